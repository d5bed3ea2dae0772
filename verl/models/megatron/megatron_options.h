// File: verl/models/megatron/megatron_options.h
//
// verl's `<role>.megatron.*` keys (megatron_config.proto) -> Megatron's
// parallel sizes and the tensor-parallel model's options. What this backend
// does not serve yet fails here with one line naming the full key
// (virtual pipeline parallelism, expert tensor parallelism other than 1 or
// tp, use_dist_checkpointing, DDP / mcore overrides), never
// silently. The keys that select implementations verl-cpp does not have
// (attention_backend, use_mbridge, vanilla_mbridge, variable_seq_lengths,
// moe_token_dispatcher_type) are accepted: there is one implementation.
#ifndef VERL_MODELS_MEGATRON_OPTIONS_H_
#define VERL_MODELS_MEGATRON_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/parallel/megatron/megatron_config.pb.h"
#include "verl/parallel/megatron/parallel_state.h"

namespace verl::models {

struct MegatronSettings {
  parallel::megatron::ModelParallelSizes sizes;
  MegatronModelOptions model;
  int64_t seed = 42;
  bool forward_only = false;
  // Parameters: "float32", or "bfloat16" with fp32 gradients and master
  // weights (rl::MegatronTrainState).
  std::string dtype = "float32";
  bool distributed_optimizer = true;  // use_distributed_optimizer
  // Buffers resting in host memory between uses (rl::MegatronTrainState).
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;
};

// `prefix` is the role's path, e.g. "actor_rollout_ref.actor.megatron".
absl::StatusOr<MegatronSettings> MegatronSettingsFromConfig(
    const parallel::megatron::MegatronConfig& config,
    const std::string& prefix);

// verl's per-family MoE defaults (verl/models/mcore/config_converter.py
// and mbridge) for the keys `config` leaves null, on `options` from
// MegatronSettingsFromConfig: DeepSeek-V3 (sigmoid router) turns on the
// expert-bias update (moe_router_enable_expert_bias) and takes
// moe_aux_loss_coeff = aux_loss_alpha (0.001); Qwen2/3-MoE take
// router_aux_loss_coef. The load-balancing loss itself stays "none" for
// every family, as verl sets it for RL ("hurts perf in RL"): set
// moe_router_load_balancing_type to turn it on. Dense models: nothing.
inline constexpr double kDeepseekAuxLossAlpha = 0.001;
void ApplyMoeFamilyDefaults(const parallel::megatron::MegatronConfig& config,
                            const ModelConfig& model,
                            MegatronModelOptions* options);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_OPTIONS_H_
