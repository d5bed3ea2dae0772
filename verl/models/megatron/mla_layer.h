// File: verl/models/megatron/mla_layer.h
//
// Multi-head latent attention (DeepSeek-V3) in the Megatron backend, with
// Megatron-core's MLASelfAttention module names (local spec):
//
//   self_attention.linear_q_down_proj.weight  [q_lora_rank, H]   replicated
//   self_attention.q_layernorm.weight         [q_lora_rank]      replicated
//   self_attention.linear_q_up_proj.weight    [np/tp*(nope+rope), q_lora]
//   self_attention.linear_q_proj.weight       [np/tp*(nope+rope), H]
//                                             (q_lora_rank 0 instead)
//   self_attention.linear_kv_down_proj.weight [kv_lora+rope, H]  replicated
//   self_attention.kv_layernorm.weight        [kv_lora]          replicated
//   self_attention.linear_kv_up_proj.weight   [np/tp*(nope+v), kv_lora]
//   self_attention.linear_proj.weight         [H, np/tp*v]       row
//
// The down projections are replicated (TE's "duplicated" linears): every
// rank compresses its own tokens (its sequence shard under sequence
// parallelism), the up projections are column-parallel over heads, so each
// rank expands the latent for its np/tp heads only. The rope key, shared by
// all heads, is all-gathered along the sequence under sequence parallelism
// (backward reduce-scatters, summing every rank's heads' gradient) or
// copied into the tensor-parallel region (backward all-reduce). The
// replicated weights then hold full gradients without sequence parallelism
// and per-shard ones with it (MegatronGPTModel::FinalizeGrads sums those
// over tp, as it does the norms'). RoPE (YaRN included) and the softmax
// scale are HF's DeepseekV3Attention's (verl/models/mla/mla_attention.h).
//
// Tested through the whole model by megatron_gpt_test (megatron_gpt_worker's
// dsv3_mla* and DeepSeek MoE cases against the HF CausalLM at tp, cp, pp, ep).
#ifndef VERL_MODELS_MEGATRON_MLA_LAYER_H_
#define VERL_MODELS_MEGATRON_MLA_LAYER_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "verl/models/attention.h"
#include "verl/models/layers.h"
#include "verl/models/mla/mla_attention.h"
#include "verl/models/model_config.h"
#include "verl/parallel/megatron/tp_layers.h"

namespace verl::models {

struct MegatronModelOptions;  // megatron_gpt.h

// One line naming the key when an MLA config cannot be split over tp or
// uses what this layer does not serve (attention biases).
absl::Status ValidateMegatronMla(const ModelConfig& config, int64_t tp);

class TpMlaAttention : public torch::nn::Module, public MlaDims {
 public:
  TpMlaAttention(const ModelConfig& config, int64_t layer,
                 const MegatronModelOptions& options,
                 parallel::megatron::CommPtr tp);
  // x [T, H] ([T/tp, H] with sp) -> same; cos/sin [T, qk_rope_head_dim].
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin,
                     std::shared_ptr<AttentionBackend> backend) const;
  // The replicated parameters (down projections and latent norms).
  std::vector<at::Tensor> ReplicatedParameters() const;

  int64_t layer, heads_per_rank;
  bool sequence_parallel;
  bool recompute_core_attn = false;
  // q_lora_rank > 0: down, norm, up; else linear_q_proj.
  std::shared_ptr<Linear> linear_q_down_proj;
  std::shared_ptr<RMSNorm> q_layernorm;
  std::shared_ptr<parallel::megatron::ColumnParallelLinear> linear_q_up_proj,
      linear_q_proj;
  std::shared_ptr<Linear> linear_kv_down_proj;
  std::shared_ptr<RMSNorm> kv_layernorm;
  std::shared_ptr<parallel::megatron::ColumnParallelLinear> linear_kv_up_proj;
  std::shared_ptr<parallel::megatron::RowParallelLinear> linear_proj;

 private:
  parallel::megatron::CommPtr tp_;
};

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_MLA_LAYER_H_
