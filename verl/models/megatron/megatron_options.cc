// File: verl/models/megatron/megatron_options.cc
#include "verl/models/megatron/megatron_options.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::models {
namespace {

absl::Status NotBuilt(const std::string& prefix, const std::string& key,
                      const std::string& value, const std::string& what) {
  return absl::UnimplementedError(absl::StrCat(
      prefix, ".", key, "=", value, ": ", what, " is not built yet"));
}

}  // namespace

absl::StatusOr<MegatronSettings> MegatronSettingsFromConfig(
    const parallel::megatron::MegatronConfig& c, const std::string& prefix) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"tensor_model_parallel_size", c.tensor_model_parallel_size()},
      {"pipeline_model_parallel_size", c.pipeline_model_parallel_size()},
      {"context_parallel_size", c.context_parallel_size()},
      {"expert_model_parallel_size", c.expert_model_parallel_size()},
      {"make_vocab_size_divisible_by", c.make_vocab_size_divisible_by()}};
  for (const auto& [key, value] : sizes) {
    if (value < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".", key, "=", value, ": must be >= 1"));
    }
  }
  const int64_t tp = c.tensor_model_parallel_size();
  // Virtual pipeline stages (the interleaved schedule): null or 1 is none.
  const int64_t vpp = c.has_virtual_pipeline_model_parallel_size()
                          ? c.virtual_pipeline_model_parallel_size()
                          : 0;
  if (c.has_virtual_pipeline_model_parallel_size() &&
      (vpp < 1 || (vpp > 1 && c.pipeline_model_parallel_size() == 1))) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix, ".virtual_pipeline_model_parallel_size=", vpp,
        ": must be >= 1, and > 1 only with pipeline_model_parallel_size > 1"));
  }
  // Expert parallelism: MoE layers over ep, each expert split over etp
  // (null means tp, as in Megatron); ValidateMegatronModel checks them
  // against the model's experts, the layout against the world size.
  if (c.has_expert_tensor_parallel_size() &&
      c.expert_tensor_parallel_size() < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        prefix,
        ".expert_tensor_parallel_size=", c.expert_tensor_parallel_size(),
        ": must be >= 1 (null: tensor_model_parallel_size)"));
  }
  if (c.use_dist_checkpointing()) {
    return NotBuilt(prefix, "use_dist_checkpointing", "true",
                    "use_dist_checkpointing");
  }
  if (!c.override_ddp_config().empty()) {
    return NotBuilt(prefix, "override_ddp_config", "{...}",
                    "overriding Megatron's DDP config");
  }
  if (!c.override_mcore_model_config().empty()) {
    return NotBuilt(prefix, "override_mcore_model_config", "{...}",
                    "overriding the mcore model config");
  }
  if (c.dtype() == "float16") {
    return NotBuilt(prefix, "dtype", "float16",
                    "fp16 training (it needs Megatron's dynamic loss "
                    "scaling; bfloat16 is built)");
  }
  if (c.dtype() != "float32" && c.dtype() != "bfloat16") {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ".dtype='", c.dtype(),
                     "': expected 'float32' or 'bfloat16' ('float16' is not "
                     "built)"));
  }
  const auto& o = c.override_transformer_config();
  const std::string otc = prefix + ".override_transformer_config";
  MegatronSettings s;
  s.sizes.tp = static_cast<int>(tp);
  s.sizes.pp = static_cast<int>(c.pipeline_model_parallel_size());
  s.sizes.vpp = vpp > 1 ? static_cast<int>(vpp) : 0;
  s.model.num_layers_in_first_pipeline_stage =
      o.has_num_layers_in_first_pipeline_stage()
          ? o.num_layers_in_first_pipeline_stage()
          : -1;
  s.model.num_layers_in_last_pipeline_stage =
      o.has_num_layers_in_last_pipeline_stage()
          ? o.num_layers_in_last_pipeline_stage()
          : -1;
  const std::pair<const char*, int64_t> stage_layers[] = {
      {"num_layers_in_first_pipeline_stage",
       s.model.num_layers_in_first_pipeline_stage},
      {"num_layers_in_last_pipeline_stage",
       s.model.num_layers_in_last_pipeline_stage}};
  for (const auto& [key, n] : stage_layers) {
    if ((n >= 0 && s.sizes.pp == 1) || (n < 0 && n != -1)) {
      return absl::InvalidArgumentError(
          absl::StrCat(otc, ".", key, "=", n,
                       ": needs pipeline_model_parallel_size > 1 and >= 0"));
    }
  }
  s.sizes.cp = static_cast<int>(c.context_parallel_size());
  s.sizes.ep = static_cast<int>(c.expert_model_parallel_size());
  s.sizes.etp = c.has_expert_tensor_parallel_size()
                    ? static_cast<int>(c.expert_tensor_parallel_size())
                    : 0;
  s.model.sequence_parallel = c.sequence_parallel();
  s.model.make_vocab_size_divisible_by = c.make_vocab_size_divisible_by();
  s.model.recompute_granularity = o.recompute_granularity();
  s.model.recompute_method = o.recompute_method();
  s.model.recompute_num_layers =
      o.has_recompute_num_layers() ? o.recompute_num_layers() : 0;
  if (o.has_moe_expert_capacity_factor()) {
    s.model.moe_expert_capacity_factor = o.moe_expert_capacity_factor();
  }
  s.model.moe_token_drop_policy = o.moe_token_drop_policy();
  s.model.moe_router_enable_expert_bias = o.moe_router_enable_expert_bias();
  s.model.moe_router_bias_update_rate = o.moe_router_bias_update_rate();
  if (o.has_moe_router_load_balancing_type()) {
    s.model.moe_router_load_balancing_type = o.moe_router_load_balancing_type();
  }
  if (o.has_moe_aux_loss_coeff()) {
    s.model.moe_aux_loss_coeff = o.moe_aux_loss_coeff();
  }
  if (o.has_moe_z_loss_coeff()) s.model.moe_z_loss_coeff = o.moe_z_loss_coeff();
  if (o.moe_pad_expert_input_to_capacity()) {
    return NotBuilt(otc, "moe_pad_expert_input_to_capacity", "true",
                    "padding each expert's input to its capacity (the "
                    "drop-and-pad dispatch; dropping without padding is "
                    "built)");
  }
  s.model.recompute_modules.assign(o.recompute_modules().begin(),
                                   o.recompute_modules().end());
  if (s.model.recompute_modules.empty()) {
    s.model.recompute_modules = {"core_attn"};  // verl's default
  }
  VERL_RETURN_IF_ERROR(ValidateRecomputeOptions(s.model, prefix));
  s.seed = c.seed();
  s.forward_only = c.forward_only();
  s.dtype = c.dtype();
  s.distributed_optimizer = c.use_distributed_optimizer();
  s.param_offload = c.param_offload();
  s.grad_offload = c.grad_offload();
  s.optimizer_offload = c.optimizer_offload();
  return s;
}

void ApplyMoeFamilyDefaults(const parallel::megatron::MegatronConfig& config,
                            const ModelConfig& model,
                            MegatronModelOptions* options) {
  if (!model.IsMoe()) return;
  const auto& o = config.override_transformer_config();
  const bool sigmoid = model.scoring_func == "sigmoid";
  if (!o.has_moe_router_enable_expert_bias()) {
    options->moe_router_enable_expert_bias = sigmoid;
  }
  if (!o.has_moe_aux_loss_coeff()) {
    options->moe_aux_loss_coeff =
        sigmoid ? kDeepseekAuxLossAlpha : model.router_aux_loss_coef;
  }
}

}  // namespace verl::models
