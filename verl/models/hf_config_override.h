// File: verl/models/hf_config_override.h
//
// verl's `model.override_config.*`: HF config fields set before the model is
// built (verl's update_model_config, setattr on the AutoConfig; nested keys
// such as `rope_scaling.type` set inside the sub-dict; the Megatron form
// `model_config.<key>` means `<key>`). Applied here to the config.json view
// of a ModelConfig and re-parsed, for the fields that keep the checkpoint's
// weight shapes: num_hidden_layers (fewer layers: the first N are loaded),
// max_position_embeddings, rope_theta, rope_scaling.*, sliding windows,
// rms_norm_eps, special token ids, MoE routing (num_experts_per_tok,
// norm_topk_prob, router_aux_loss_coef). attn_implementation and use_cache
// are accepted with no effect (the kernels are the project's own; KV caching
// is the engine's); dropout keys are accepted at 0 (the models have no
// dropout). Anything else is refused with the list of served keys.
#ifndef VERL_MODELS_HF_CONFIG_OVERRIDE_H_
#define VERL_MODELS_HF_CONFIG_OVERRIDE_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/models/model_config.h"

namespace verl::models {

// verl's override_config.moe_config.freeze_moe_router (Megatron's
// router.weight.requires_grad_(False)): whether `overrides` set it true.
// ApplyHfConfigOverrides accepts the key (True/False) and leaves it to the
// trainer.
bool FreezeMoeRouterOverride(
    const std::map<std::string, std::string>& overrides);

// `base` with `overrides` (key -> value as written on the command line: a
// JSON literal, Python's True/False/None, or a bare string) applied. Errors
// (InvalidArgument) name `<key_prefix>.<key>` and say why.
absl::StatusOr<ModelConfig> ApplyHfConfigOverrides(
    const ModelConfig& base,
    const std::map<std::string, std::string>& overrides,
    absl::string_view key_prefix);

}  // namespace verl::models

#endif  // VERL_MODELS_HF_CONFIG_OVERRIDE_H_
