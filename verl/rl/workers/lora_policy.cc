// File: verl/rl/workers/lora_policy.cc
#include "verl/rl/workers/lora_policy.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>

#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/models/layers.h"

namespace verl::rl {

models::LoraConfig LoraConfigFromSettings(const models::ModelSettings& m) {
  models::LoraConfig c;
  c.rank = m.lora_rank();
  c.alpha = m.lora_alpha();
  if (m.target_modules_size() > 0) {
    c.target_modules.assign(m.target_modules().begin(),
                            m.target_modules().end());
  }
  if (m.has_exclude_modules()) {
    for (absl::string_view s :
         absl::StrSplit(m.exclude_modules(), ',', absl::SkipWhitespace())) {
      c.exclude_modules.emplace_back(absl::StripAsciiWhitespace(s));
    }
  }
  c.base_model_name_or_path = m.path();
  return c;
}

NamedTensorList TrainableParameters(const torch::nn::Module& model) {
  NamedTensorList out;
  for (const auto& item : model.named_parameters()) {
    if (item.value().requires_grad())
      out.emplace_back(item.key(), item.value());
  }
  return out;
}

absl::Status ForEachMergedLoraWeight(
    const torch::nn::Module& model,
    const std::function<absl::Status(const std::string&, const at::Tensor&)>&
        fn) {
  torch::NoGradGuard no_grad;
  // Adapted weight name ("...q_proj.weight") -> its Linear.
  std::map<std::string, const models::Linear*> adapted;
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    const auto* lin = item.value()->as<models::Linear>();
    if (lin != nullptr && lin->lora.lora_A) {
      adapted[item.key() + ".weight"] = lin;
    }
  }
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    if (name.find(".lora_A.") != std::string::npos ||
        name.find(".lora_B.") != std::string::npos) {
      continue;
    }
    auto it = adapted.find(name);
    const at::Tensor w = item.value().detach();
    if (it == adapted.end() || it->second->lora.merged ||
        !it->second->lora.enabled) {
      VERL_RETURN_IF_ERROR(fn(name, w));
      continue;
    }
    const models::Linear& lin = *it->second;
    // Same arithmetic as MergeLora (verl/models/lora.cc) so the engine sees
    // exactly the weights an in-place merge would produce.
    const at::ScalarType ct =
        w.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor delta = at::matmul(lin.lora.lora_B->weight.to(ct),
                                  lin.lora.lora_A->weight.to(ct)) *
                       lin.lora.scale;
    VERL_RETURN_IF_ERROR(fn(name, (w.to(ct) + delta).to(w.scalar_type())));
  }
  return absl::OkStatus();
}

NamedTensorList MergedLoraWeights(const torch::nn::Module& model) {
  NamedTensorList out;
  absl::Status status = ForEachMergedLoraWeight(
      model, [&](const std::string& name, const at::Tensor& w) {
        out.emplace_back(name, w);
        return absl::OkStatus();
      });
  CHECK(status.ok()) << status;  // the collector never fails
  return out;
}

}  // namespace verl::rl
