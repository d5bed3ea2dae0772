#include "verl/rl/trainer/policy_loader.h"

#include <ATen/core/grad_mode.h>
#include <torch/nn/module.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/hf_config_override.h"
#include "verl/models/megatron/megatron_options.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/workers/fsdp_train_state.h"
#include "verl/rl/workers/megatron_train_state.h"

namespace verl::rl {
namespace {

// MoE router weights: HF mlp.gate.weight, Megatron mlp.router.weight.
bool IsMoeRouterWeight(const std::string& name) {
  return absl::EndsWith(name, ".mlp.gate.weight") ||
         absl::EndsWith(name, ".mlp.router.weight");
}

// verl's freeze_moe_router: no gradient, no optimizer step for the routers.
void FreezeMoeRouter(torch::nn::Module& model) {
  for (auto& item : model.named_parameters(/*recurse=*/true)) {
    if (IsMoeRouterWeight(item.key())) item.value().set_requires_grad(false);
  }
}

// Whether `model`'s routers were frozen (a clone or Megatron copy follows).
bool MoeRouterFrozen(const torch::nn::Module& model) {
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (IsMoeRouterWeight(item.key()) && !item.value().requires_grad()) {
      return true;
    }
  }
  return false;
}

void CopyParameters(const torch::nn::Module& from, torch::nn::Module& to,
                    bool skip_heads) {
  at::NoGradGuard no_grad;
  auto src = from.named_parameters();
  for (auto& item : to.named_parameters()) {
    if (skip_heads && (item.key() == "lm_head.weight" ||
                       item.key().rfind("score.", 0) == 0)) {
      continue;
    }
    const at::Tensor* s = src.find(item.key());
    if (s) item.value().copy_(*s);
  }
}

// Adds `id` to the stop ids unless present (the preset, the generation
// config and the tokenizer often name the same eos).
void AddStopId(models::ModelConfig* config, int64_t id) {
  std::vector<int64_t>& ids = config->eos_token_ids;
  if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
}

bool IsVlmPreset(const std::string& name) {
  const std::vector<std::string> names = models::vlm::VlmPresetNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The vision-language policy: model.path's folder or the preset, with the
// tokenizer's stop and pad ids in its text config.
absl::StatusOr<LoadedPolicy> LoadVlmPolicy(const models::ModelSettings& m,
                                           const models::Tokenizer& tokenizer,
                                           uint64_t seed) {
  if (m.override_config_size() > 0) {
    return absl::InvalidArgumentError(
        "actor_rollout_ref.model.override_config is not supported for "
        "vision-language models");
  }
  LoadedPolicy p;
  std::shared_ptr<models::vlm::Qwen2VLForConditionalGeneration> source;
  models::vlm::VlmConfig vlm;
  if (!m.path().empty()) {
    VERL_ASSIGN_OR_RETURN(models::vlm::VlmCheckpoint ckpt,
                          models::vlm::LoadVlmCheckpoint(m.path()));
    source = ckpt.model;
    vlm = source->vlm_config();
    p.hf_dir = m.path();
  } else {
    VERL_ASSIGN_OR_RETURN(vlm, models::vlm::MakeVlmPreset(m.preset()));
    if (tokenizer.vocab_size() > vlm.text.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model.preset=", m.preset(), ": the tokenizer's ",
          tokenizer.vocab_size(), " tokens exceed the preset's vocabulary of ",
          vlm.text.vocab_size));
    }
  }
  if (tokenizer.eos_token_id() >= 0) {
    AddStopId(&vlm.text, tokenizer.eos_token_id());
  }
  if (tokenizer.pad_token_id() >= 0)
    vlm.text.pad_token_id = tokenizer.pad_token_id();
  // The model keeps its own copy of the config: built with the stop ids.
  auto model = models::vlm::CreateVlmModel(vlm, seed);
  if (source) CopyParameters(*source, *model, /*skip_heads=*/false);
  p.config = vlm.text;
  p.vlm = vlm;
  p.model = model;
  return p;
}

}  // namespace

absl::StatusOr<bool> IsVisionLanguage(const models::ModelSettings& m) {
  if (m.path().empty()) return IsVlmPreset(m.preset());
  const std::string config_path =
      (std::filesystem::path(m.path()) / "config.json").string();
  VERL_ASSIGN_OR_RETURN(nlohmann::json config, core::ReadJsonFile(config_path));
  return config.is_object() && config.contains("vision_config");
}

absl::StatusOr<models::Tokenizer> LoadTokenizer(
    const models::ModelSettings& m) {
  const std::string dir =
      m.has_tokenizer_path() ? m.tokenizer_path() : m.path();
  if (dir.empty()) {
    if (!IsVlmPreset(m.preset())) return models::MakeBuiltinTokenizer();
    VERL_ASSIGN_OR_RETURN(models::vlm::VlmConfig vlm,
                          models::vlm::MakeVlmPreset(m.preset()));
    return models::vlm::MakeVlmTokenizer(vlm);
  }
  // A vision-language folder (the tokenizer's own, which may differ from
  // model.path): the processor's chat_template.json is the default template.
  const std::string config_path =
      (std::filesystem::path(dir) / "config.json").string();
  if (std::filesystem::exists(config_path)) {
    VERL_ASSIGN_OR_RETURN(nlohmann::json config,
                          core::ReadJsonFile(config_path));
    if (!config.is_object() || !config.contains("vision_config")) {
      return models::Tokenizer::FromDirectory(dir);
    }
    VERL_ASSIGN_OR_RETURN(std::optional<models::Tokenizer> tok,
                          models::vlm::LoadVlmTokenizer(dir));
    if (tok) return *std::move(tok);
  }
  return models::Tokenizer::FromDirectory(dir);
}

absl::StatusOr<std::optional<models::vlm::ImageProcessorConfig>>
LoadImageProcessor(const models::ModelSettings& m) {
  VERL_ASSIGN_OR_RETURN(bool vl, IsVisionLanguage(m));
  if (!vl) return std::optional<models::vlm::ImageProcessorConfig>();
  models::vlm::ImageProcessorConfig config;
  const std::string path =
      m.path().empty()
          ? std::string()
          : (std::filesystem::path(m.path()) / "preprocessor_config.json")
                .string();
  if (!path.empty() && std::filesystem::exists(path)) {
    VERL_ASSIGN_OR_RETURN(nlohmann::json json, core::ReadJsonFile(path));
    VERL_ASSIGN_OR_RETURN(
        config, models::vlm::ImageProcessorConfigFromJson(json, path));
  }
  return std::optional<models::vlm::ImageProcessorConfig>(config);
}

absl::StatusOr<LoadedPolicy> LoadPolicy(const models::ModelSettings& m,
                                        const models::Tokenizer& tokenizer,
                                        uint64_t seed) {
  VERL_ASSIGN_OR_RETURN(bool vl, IsVisionLanguage(m));
  if (vl) return LoadVlmPolicy(m, tokenizer, seed);
  LoadedPolicy p;
  const std::map<std::string, std::string> overrides(
      m.override_config().begin(), m.override_config().end());
  constexpr char kOverrideKey[] = "actor_rollout_ref.model.override_config";
  if (!m.path().empty()) {
    VERL_ASSIGN_OR_RETURN(models::HfCheckpoint hf,
                          models::LoadHfConfigs(m.path()));
    VERL_ASSIGN_OR_RETURN(p.config, models::ApplyHfConfigOverrides(
                                        hf.config, overrides, kOverrideKey));
    if (hf.generation) {
      for (int64_t id : hf.generation->eos_token_ids) AddStopId(&p.config, id);
    }
    p.model = models::CreateModel(p.config, seed);
    std::map<std::string, at::Tensor> dst;
    for (auto& item : p.model->named_parameters())
      dst[item.key()] = item.value();
    // Fewer layers (override_config.num_hidden_layers): the first N load,
    // the rest of the checkpoint is left out, as transformers does.
    models::HfLoadIntoOptions load;
    load.allow_unexpected =
        p.config.num_hidden_layers < hf.config.num_hidden_layers;
    VERL_RETURN_IF_ERROR(models::LoadHfWeightsInto(m.path(), &dst, load));
    p.hf_dir = m.path();
  } else {
    VERL_ASSIGN_OR_RETURN(
        models::ModelConfig preset,
        models::MakePreset(m.preset(), tokenizer.vocab_size()));
    VERL_ASSIGN_OR_RETURN(p.config, models::ApplyHfConfigOverrides(
                                        preset, overrides, kOverrideKey));
    p.model = models::CreateModel(p.config, seed);
  }
  if (tokenizer.eos_token_id() >= 0) {
    AddStopId(&p.config, tokenizer.eos_token_id());
  }
  if (tokenizer.pad_token_id() >= 0)
    p.config.pad_token_id = tokenizer.pad_token_id();
  // The model keeps its own copy of the config: rebuild with the stop ids.
  auto with_ids = models::CreateModel(p.config, seed);
  CopyParameters(*p.model, *with_ids, /*skip_heads=*/false);
  p.model = with_ids;
  if (models::FreezeMoeRouterOverride(overrides)) {
    if (!p.config.IsMoe()) {
      return absl::InvalidArgumentError(absl::StrCat(
          kOverrideKey,
          ".moe_config.freeze_moe_router=True needs an MoE model (",
          p.config.model_type, " has no router)"));
    }
    FreezeMoeRouter(*p.model);
  }
  return p;
}

std::shared_ptr<models::CausalLM> CloneModel(const models::CausalLM& src,
                                             bool value_head, uint64_t seed) {
  if (const auto* vlm =
          dynamic_cast<const models::vlm::Qwen2VLForConditionalGeneration*>(
              &src)) {
    // The critic: the same towers with a value head (verl's
    // token-classification model of the policy's architecture).
    models::vlm::VlmConfig config = vlm->vlm_config();
    config.text.is_value_model = value_head;
    auto model = models::vlm::CreateVlmModel(config, seed);
    CopyParameters(src, *model, /*skip_heads=*/value_head);
    return model;
  }
  models::ModelConfig config = src.config();
  config.is_value_model = value_head;
  auto model = models::CreateModel(config, seed);
  CopyParameters(src, *model, /*skip_heads=*/value_head);
  if (MoeRouterFrozen(src)) FreezeMoeRouter(*model);
  return model;
}

absl::StatusOr<std::unique_ptr<TrainState>> MakeTrainState(
    models::CausalLM& model, Strategy::Value strategy,
    const parallel::FsdpConfig& fsdp, const OptimizerOptions& options,
    std::shared_ptr<parallel::Communicator> world) {
  if (world->size() > 1 &&
      (strategy == Strategy::fsdp || strategy == Strategy::fsdp2)) {
    VERL_ASSIGN_OR_RETURN(auto state,
                          FsdpTrainState::ForModule(model, fsdp, options, world,
                                                    /*per_layer=*/true));
    return std::unique_ptr<TrainState>(std::move(state));
  }
  return std::unique_ptr<TrainState>(std::make_unique<ReplicatedTrainState>(
      NamedParameters(model), options, world));
}

absl::StatusOr<std::shared_ptr<models::MegatronGPTModel>> MakeMegatronModel(
    const models::CausalLM& source,
    const parallel::megatron::MegatronConfig& config, const std::string& prefix,
    std::shared_ptr<parallel::megatron::ParallelState> mpu) {
  VERL_ASSIGN_OR_RETURN(models::MegatronSettings settings,
                        models::MegatronSettingsFromConfig(config, prefix));
  models::ApplyMoeFamilyDefaults(config, source.config(), &settings.model);
  VERL_RETURN_IF_ERROR(models::ValidateMegatronModel(
      source.config(), settings.model, mpu->layout().sizes()));
  auto model = std::make_shared<models::MegatronGPTModel>(
      source.config(), settings.model, std::move(mpu));
  std::map<std::string, at::Tensor> hf;
  for (const auto& item : source.named_parameters(/*recurse=*/true)) {
    hf[item.key()] = item.value().detach();
  }
  VERL_RETURN_IF_ERROR(
      models::LoadMegatronFromHf(models::HfSourceFromMap(hf), model.get()));
  if (MoeRouterFrozen(source)) FreezeMoeRouter(*model);
  // megatron.dtype: half parameters (the train state keeps fp32 masters).
  if (settings.dtype == "bfloat16") {
    CastMegatronParameters(*model, at::kBFloat16);
  }
  return model;
}

absl::StatusOr<std::unique_ptr<TrainState>> MakeMegatronTrainState(
    const models::CausalLM& source,
    const parallel::megatron::MegatronConfig& config, const std::string& prefix,
    const OptimizerOptions& options,
    std::shared_ptr<parallel::megatron::ParallelState> mpu,
    std::shared_ptr<models::MegatronGPTModel>* model) {
  VERL_ASSIGN_OR_RETURN(*model, MakeMegatronModel(source, config, prefix, mpu));
  VERL_ASSIGN_OR_RETURN(models::MegatronSettings settings,
                        models::MegatronSettingsFromConfig(config, prefix));
  MegatronStateOptions state_options;
  state_options.distributed_optimizer = settings.distributed_optimizer;
  state_options.param_offload = settings.param_offload;
  state_options.grad_offload = settings.grad_offload;
  state_options.optimizer_offload = settings.optimizer_offload;
  VERL_ASSIGN_OR_RETURN(
      auto state, MegatronTrainState::Create(*model, std::move(mpu), options,
                                             state_options));
  return std::unique_ptr<TrainState>(std::move(state));
}

}  // namespace verl::rl
