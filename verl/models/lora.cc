// File: verl/models/lora.cc
#include "verl/models/lora.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/safetensors.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/layers.h"

namespace verl::models {
namespace {

using LinearList = std::vector<std::pair<std::string, Linear*>>;

// All Linear modules with their dotted paths, in module order.
LinearList Linears(const torch::nn::Module& model) {
  LinearList out;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (auto* lin = item.value()->as<Linear>())
      out.emplace_back(item.key(), lin);
  }
  return out;
}

LinearList Adapted(const torch::nn::Module& model) {
  LinearList out;
  for (const auto& [path, lin] : Linears(model)) {
    if (lin->lora.lora_A) out.emplace_back(path, lin);
  }
  return out;
}

std::string Leaf(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// PEFT's rule: a target matches the full path or its dotted suffix.
bool Matches(const std::string& path, const std::string& target) {
  if (path == target) return true;
  return path.size() > target.size() &&
         path.compare(path.size() - target.size(), target.size(), target) ==
             0 &&
         path[path.size() - target.size() - 1] == '.';
}

bool MatchesAny(const std::string& path,
                const std::vector<std::string>& targets) {
  return std::any_of(targets.begin(), targets.end(),
                     [&](const std::string& t) { return Matches(path, t); });
}

bool IsOutputHead(const std::string& path) {
  return path == "lm_head" || path == "score";
}

// Folds +/- scale * B A into every adapted weight.
absl::Status FoldAdapters(torch::nn::Module& model, bool merge) {
  LinearList adapted = Adapted(model);
  if (adapted.empty())
    return absl::FailedPreconditionError("model has no LoRA adapters");
  torch::NoGradGuard no_grad;
  for (const auto& [path, lin] : adapted) {
    if (lin->lora.merged == merge) {
      return absl::FailedPreconditionError(
          absl::StrCat("LoRA adapter of ", path,
                       merge ? " is already merged" : " is not merged"));
    }
    const at::ScalarType ct =
        lin->weight.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor delta = at::matmul(lin->lora.lora_B->weight.to(ct),
                                  lin->lora.lora_A->weight.to(ct)) *
                       lin->lora.scale;
    at::Tensor w = lin->weight.to(ct);
    lin->weight.copy_(merge ? w + delta : w - delta);
    lin->lora.merged = merge;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyLora(torch::nn::Module& model, const LoraConfig& config,
                       uint64_t seed) {
  if (config.rank <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("lora_rank must be > 0, got ", config.rank));
  }
  if (!Adapted(model).empty()) {
    return absl::FailedPreconditionError("model already has LoRA adapters");
  }
  const bool all_linear = config.target_modules.size() == 1 &&
                          config.target_modules[0] == "all-linear";
  LinearList chosen;
  std::set<std::string> matched_targets;
  for (const auto& [path, lin] : Linears(model)) {
    bool hit = false;
    if (all_linear) {
      hit = !IsOutputHead(path);
    } else {
      for (const std::string& t : config.target_modules) {
        if (Matches(path, t)) {
          hit = true;
          matched_targets.insert(t);
        }
      }
    }
    if (hit && !MatchesAny(path, config.exclude_modules))
      chosen.emplace_back(path, lin);
  }
  if (!all_linear) {
    for (const std::string& t : config.target_modules) {
      if (!matched_targets.count(t)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "LoRA target_modules entry '", t, "' matches no linear module"));
      }
    }
  }
  if (chosen.empty()) {
    return absl::InvalidArgumentError("LoRA config selects no linear module");
  }
  torch::NoGradGuard no_grad;
  for (at::Tensor& p : model.parameters()) p.requires_grad_(false);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  for (const auto& [path, lin] : chosen) {
    at::TensorOptions opts = lin->weight.options();
    const double bound = 1.0 / std::sqrt(static_cast<double>(lin->in_features));
    at::Tensor a = at::empty({config.rank, lin->in_features}, at::kFloat)
                       .uniform_(-bound, bound, gen)
                       .to(opts);
    at::Tensor b = at::zeros({lin->out_features, config.rank}, opts);
    lin->lora.lora_A =
        lin->register_module("lora_A", std::make_shared<WeightHolder>(a));
    lin->lora.lora_B =
        lin->register_module("lora_B", std::make_shared<WeightHolder>(b));
    lin->lora.scale = config.alpha / static_cast<double>(config.rank);
    lin->lora.enabled = true;
    lin->lora.merged = false;
  }
  return absl::OkStatus();
}

std::vector<std::string> LoraModulePaths(const torch::nn::Module& model) {
  std::vector<std::string> paths;
  for (const auto& item : Adapted(model)) paths.push_back(item.first);
  return paths;
}

void SetLoraEnabled(torch::nn::Module& model, bool enabled) {
  for (const auto& item : Adapted(model)) {
    CHECK(!item.second->lora.merged || enabled)
        << "cannot disable merged LoRA adapter of " << item.first
        << "; unmerge first";
    item.second->lora.enabled = enabled;
  }
}

ScopedLoraDisabled::ScopedLoraDisabled(torch::nn::Module& model)
    : model_(model) {
  SetLoraEnabled(model_, false);
}

ScopedLoraDisabled::~ScopedLoraDisabled() { SetLoraEnabled(model_, true); }

absl::Status MergeLora(torch::nn::Module& model) {
  return FoldAdapters(model, true);
}

absl::Status UnmergeLora(torch::nn::Module& model) {
  return FoldAdapters(model, false);
}

std::vector<std::pair<std::string, at::Tensor>> LoraNamedParameters(
    const torch::nn::Module& model) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [path, lin] : Adapted(model)) {
    out.emplace_back(absl::StrCat(kPeftPrefix, path, ".lora_A.weight"),
                     lin->lora.lora_A->weight);
    out.emplace_back(absl::StrCat(kPeftPrefix, path, ".lora_B.weight"),
                     lin->lora.lora_B->weight);
  }
  return out;
}

std::string AdapterConfigJson(const LoraConfig& config,
                              const torch::nn::Module& model) {
  std::set<std::string> leaves;
  for (const auto& item : Adapted(model)) leaves.insert(Leaf(item.first));
  nlohmann::json j;
  j["peft_type"] = "LORA";
  j["task_type"] = config.task_type;
  j["base_model_name_or_path"] = config.base_model_name_or_path;
  j["r"] = config.rank;
  if (config.alpha == std::floor(config.alpha)) {
    j["lora_alpha"] = static_cast<int64_t>(config.alpha);
  } else {
    j["lora_alpha"] = config.alpha;
  }
  j["target_modules"] = std::vector<std::string>(leaves.begin(), leaves.end());
  j["exclude_modules"] = config.exclude_modules.empty()
                             ? nlohmann::json(nullptr)
                             : nlohmann::json(config.exclude_modules);
  j["lora_dropout"] = 0.0;
  j["bias"] = "none";
  j["fan_in_fan_out"] = false;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["modules_to_save"] = nullptr;
  j["use_rslora"] = false;
  j["use_dora"] = false;
  j["rank_pattern"] = nlohmann::json::object();
  j["alpha_pattern"] = nlohmann::json::object();
  return j.dump(2);
}

absl::StatusOr<LoraConfig> ParseAdapterConfigJson(const std::string& text,
                                                  const std::string& source) {
  nlohmann::json j =
      nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
  };
  if (j.is_discarded() || !j.is_object()) return bad("not a JSON object");
  if (j.value("peft_type", "") != "LORA") return bad("peft_type is not LORA");
  if (!j.contains("r") || !j["r"].is_number_integer())
    return bad("missing integer key 'r'");
  LoraConfig c;
  c.rank = j["r"].get<int64_t>();
  if (j.contains("lora_alpha") && j["lora_alpha"].is_number()) {
    c.alpha = j["lora_alpha"].get<double>();
  }
  const nlohmann::json& t =
      j.contains("target_modules") ? j["target_modules"] : nlohmann::json();
  if (t.is_string()) {
    c.target_modules = {t.get<std::string>()};
  } else if (t.is_array() && !t.empty()) {
    c.target_modules = t.get<std::vector<std::string>>();
  } else {
    return bad("'target_modules' must be a string or a non-empty list");
  }
  if (j.contains("exclude_modules") && j["exclude_modules"].is_array()) {
    c.exclude_modules = j["exclude_modules"].get<std::vector<std::string>>();
  }
  c.base_model_name_or_path = j.value("base_model_name_or_path", "");
  c.task_type = j.value("task_type", "CAUSAL_LM");
  return c;
}

absl::Status SaveLoraAdapter(const torch::nn::Module& model,
                             const LoraConfig& config, const std::string& dir) {
  ckpt::TensorMap tensors;
  for (const auto& [name, t] : LoraNamedParameters(model)) {
    tensors[name] = t.detach().contiguous();
  }
  if (tensors.empty())
    return absl::FailedPreconditionError("model has no LoRA adapters");
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(ckpt::SaveSafetensors(dir + "/adapter_model.safetensors",
                                             tensors, {{"format", "pt"}}));
  return core::WriteFileAtomic(dir + "/adapter_config.json",
                               AdapterConfigJson(config, model));
}

absl::StatusOr<LoraConfig> LoadLoraAdapter(torch::nn::Module& model,
                                           const std::string& dir) {
  const std::string config_path = dir + "/adapter_config.json";
  VERL_ASSIGN_OR_RETURN(std::string text, core::ReadFile(config_path));
  VERL_ASSIGN_OR_RETURN(LoraConfig config,
                        ParseAdapterConfigJson(text, config_path));
  if (Adapted(model).empty()) {
    VERL_RETURN_IF_ERROR(
        Annotate(ApplyLora(model, config, /*seed=*/0), config_path));
  }
  const std::string weights_path = dir + "/adapter_model.safetensors";
  VERL_ASSIGN_OR_RETURN(ckpt::TensorMap tensors,
                        ckpt::LoadSafetensors(weights_path));
  auto params = LoraNamedParameters(model);
  if (params.size() != tensors.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        weights_path, ": has ", tensors.size(), " tensors, model has ",
        params.size(), " LoRA parameters"));
  }
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : params) {
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(weights_path, ": missing tensor ", name));
    }
    if (it->second.sizes() != param.sizes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          weights_path, ": tensor ", name, " has the wrong shape"));
    }
    param.copy_(it->second);
  }
  return config;
}

}  // namespace verl::models
