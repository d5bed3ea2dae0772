// File: verl/models/megatron/moe_layer.h
//
// Megatron-core's MoE layer (MoELayer with SequentialMLP experts and the
// all-to-all token dispatcher) for MegatronGPTModel, registered as a
// layer's "mlp":
//
//   mlp.router.weight                             [E, H]   replicated
//   mlp.router.expert_bias                        [E]      sigmoid router only
//                                                          (no gradient)
//   mlp.experts.local_experts.{i}.linear_fc1.weight [2F/etp, H] [gate; up]
//   mlp.experts.local_experts.{i}.linear_fc2.weight [H, F/etp]
//   mlp.shared_experts.linear_fc1.weight / linear_fc2.weight  tp-sharded
//   mlp.shared_experts.gate_weight                [1, H]   Qwen2-MoE only
//
// Expert parallelism: the ep group's rank j holds experts
// [j*E/ep, (j+1)*E/ep) (local index i is global expert j*E/ep + i); every
// rank routes its own tokens — the same math as the single-process decoder's
// MoE blocks (verl/models/moe/router.h: softmax top-k for Qwen2/3-MoE,
// sigmoid + bias + group-limited top-k for DeepSeek-V3) — and dispatches
// them over ep with all-to-alls (verl/parallel/megatron/expert_parallel.h).
// No token is dropped unless moe_expert_capacity_factor is set: then each
// rank's experts keep at most ExpertCapacity(its real tokens) of the pairs
// this rank routes to them (CapacityKeepMask, Megatron's
// apply_router_token_dropping in the router, before the dispatch). Shared
// experts run densely (tp-sharded like the
// dense MLP) beside the routed ones. With tp > 1 the layer needs sequence
// parallelism (as Megatron), so each tp rank routes its own T/tp tokens.
//
// Expert tensor parallelism (expert_tensor_parallel_size etp > 1): each
// local expert's linear_fc1 is column-split over the etp group (this rank's
// rows [gate_r; up_r], [2F/etp, H]) and linear_fc2 row-split ([H, F/etp]),
// as Megatron's TEColumnParallelGroupedLinear / RowParallel experts; after
// the ep all-to-all the rows are all-gathered over etp and the experts'
// partial outputs reduce-scattered back before the combine
// (expert_parallel.h's GatherExpertRows / ReduceScatterExpertRows).
//
// Load balancing by loss (Megatron's TopKRouter with
// moe_router_load_balancing_type / moe_aux_loss_coeff / moe_z_loss_coeff):
// in a training forward (grad mode on) each layer computes its own
// load-balancing loss from its router scores (softmax, or the sigmoid
// scores normalised per token) and their plain top-k (no bias, no groups),
// over the real tokens of the micro-batch on every tp x cp rank:
//   aux_loss      E / (N^2 k) * sum_e T_e P_e
//   seq_aux_loss  mean over sequences s of E / (L_s^2 k) * sum_e T_se P_se
// (T: chosen (token, slot) pairs per expert, P: summed scores, N / L_s the
// token counts), times moe_aux_loss_coeff; the z-loss is
// moe_z_loss_coeff * mean over tokens of logsumexp(logits)^2. T and the
// counts are all-reduced over tp x cp; each rank's P covers its own rows,
// so the ranks' parts sum to the loss (and its gradient) of the whole
// micro-batch. Megatron's MoEAuxLossAutoScaler attaches the losses to the
// routing weights: backward adds aux_scale * d(loss) — the loss never
// reaches the caller's loss value, so it composes with pipeline stages and
// recompute (the recomputed forward attaches it). Megatron counts the
// padding rows of its sequence layout too; here only real tokens count, so
// the loss does not depend on tp / cp.
#ifndef VERL_MODELS_MEGATRON_MOE_LAYER_H_
#define VERL_MODELS_MEGATRON_MOE_LAYER_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "verl/models/layers.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/model_config.h"
#include "verl/models/moe/router.h"

namespace verl::models {

// One expert (or its etp shard, ffn = F / etp): linear_fc1 [2 ffn, H] =
// [gate; up] (SwiGLU), linear_fc2 [H, ffn]; a shard's output is partial.
class ExpertMlp : public torch::nn::Module {
 public:
  ExpertMlp(int64_t hidden, int64_t ffn);
  at::Tensor Forward(const at::Tensor& x) const;

  std::shared_ptr<Linear> linear_fc1, linear_fc2;
};

// `router.weight` [E, H] and, for the sigmoid router, `router.expert_bias`
// [E] (HF e_score_correction_bias; a parameter without gradient).
class MoeRouter : public torch::nn::Module {
 public:
  MoeRouter(int64_t num_experts, int64_t hidden, bool with_bias);

  at::Tensor weight;
  at::Tensor expert_bias;  // undefined for the softmax router
};

// The rows of one forward: which are real tokens (not cp / sp padding) and
// the sequence of each (-1: padding) among num_sequences. Undefined
// tensors: every row real, one sequence.
struct MoeRows {
  at::Tensor real;      // [N] bool
  at::Tensor sequence;  // [N] int64
  int64_t num_sequences = 1;
};

class MegatronMoeLayer : public torch::nn::Module {
 public:
  // `etp`: the expert tensor-parallel group (null: none, etp 1).
  MegatronMoeLayer(const ModelConfig& config,
                   const MegatronModelOptions& options, CommPtr tp, CommPtr ep,
                   CommPtr etp = nullptr);

  // This rank's tokens x [N, H] -> [N, H]. Collective over ep and etp (and
  // tp for the shared experts). Records the router logits and routing of the
  // call (last_router_logits / last_indices).
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t num_experts, top_k;
  bool sigmoid;  // DeepSeek-V3 router; else softmax top-k
  bool norm_topk_prob;
  GroupLimitedOptions group_options;
  std::shared_ptr<MoeRouter> router;
  std::vector<std::shared_ptr<ExpertMlp>> local_experts;
  int64_t first_expert = 0;               // global index of local expert 0
  std::shared_ptr<TpMlp> shared_experts;  // null without shared experts
  at::Tensor shared_gate_weight;          // [1, H] (Qwen2-MoE); else undefined

  // Capacity-based dropping (unset: none).
  std::optional<double> capacity_factor;
  TokenDropPolicy drop_policy = TokenDropPolicy::kProbs;

  // Set by the model before Forward, and again before a recompute of it
  // (null: every row real, one sequence). Padding rows are routed but never
  // dispatched; the capacity and the losses count the real ones only.
  mutable std::shared_ptr<const MoeRows> rows;
  // The last Forward's router logits [N, E] (with autograd history, for the
  // load-balancing loss; the model clears them after its forward), chosen
  // experts [N, k] and which of those pairs were dispatched [N, k] bool
  // (undefined when nothing can be dropped).
  mutable at::Tensor last_router_logits, last_indices, last_kept;
  // Whether Forward keeps last_router_logits (the model's aux loss needs
  // them; false with pipeline stages or MoE recompute, see
  // MegatronGPTModel::moe_aux_loss).
  bool keep_router_logits = true;

  // Load-balancing loss (above): "none" | "aux_loss" | "seq_aux_loss", the
  // coefficients, and the tp x cp group its counts are summed over (null:
  // this rank alone).
  std::string balance_type = "none";
  double aux_coeff = 0.0, z_coeff = 0.0;
  CommPtr tp_cp;
  // The gradient factor of the losses (MegatronGPTModel::SetMoeAuxLossScale).
  double aux_scale = 1.0;
  // This rank's parts of the losses without coefficients, summed over the
  // training forwards since the model last took them, and those forwards.
  mutable double balance_sum = 0.0, z_sum = 0.0;
  mutable int64_t loss_forwards = 0;

 private:
  CommPtr ep_, etp_;
};

// Per-layer expert load metrics (verl-style names, the role prefixes
// "actor/"): for MoE layer L, `moe/layer_L/tokens_per_expert_{max,min,mean}`
// and `moe/layer_L/imbalance` (max / mean); over layers
// `moe/imbalance_max`, `moe/imbalance_mean`. `load` holds each MoE layer's
// routed (token, slot) count per expert.
std::map<std::string, double> ExpertLoadMetrics(
    const std::map<int64_t, std::vector<double>>& load);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_MOE_LAYER_H_
