// File: verl/models/moe/router.h
//
// Mixture-of-experts routing and expert dispatch shared by the MoE blocks of
// the decoder: HF's softmax top-k router (Qwen2-MoE / Qwen3-MoE) and
// DeepSeek-V3's sigmoid router (per-expert score-correction bias used for
// the choice only, group-limited top-k, renormalisation and routed scaling),
// and the grouped expert loop that runs each expert once on its tokens.
#ifndef VERL_MODELS_MOE_ROUTER_H_
#define VERL_MODELS_MOE_ROUTER_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "verl/models/layers.h"
#include "verl/models/model_config.h"

namespace verl::models {

// The experts chosen for each token and their combine weights.
struct Routing {
  at::Tensor indices;  // [T, k] int64
  at::Tensor weights;  // [T, k] in the router's compute dtype
};

// HF Qwen2/3-MoE: softmax over router_logits [T, E] (fp32, double stays
// double), top-k, optional renormalisation of the k weights.
Routing SoftmaxTopK(const at::Tensor& router_logits, int64_t top_k,
                    bool norm_topk_prob);

struct GroupLimitedOptions {
  int64_t top_k = 1;
  int64_t n_group = 1;     // experts split into n_group equal groups
  int64_t topk_group = 1;  // groups a token may choose from
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.0;
};

// HF DeepseekV3TopkRouter (topk_method "noaux_tc"): s = sigmoid(logits);
// choice scores s + bias; each group scored by the sum of its two best
// choice scores; the topk_group best groups kept (others' choice scores set
// to 0, as HF does); top_k experts among them. Weights are s (without the
// bias) of the chosen experts, divided by their sum (+1e-20) when
// norm_topk_prob, times routed_scaling_factor. No gradient reaches `bias`.
Routing SigmoidGroupLimitedTopK(const at::Tensor& router_logits,
                                const at::Tensor& bias,
                                const GroupLimitedOptions& options);

// Megatron's expert capacity (moe_utils.get_capacity over num_tokens * k
// routed pairs): ceil(num_tokens * top_k / num_experts * capacity_factor),
// at most num_tokens (a token reaches an expert once).
int64_t ExpertCapacity(int64_t num_tokens, int64_t top_k, int64_t num_experts,
                       double capacity_factor);

// moe_token_drop_policy: which pairs an expert over capacity keeps.
enum class TokenDropPolicy {
  kProbs,     // "probs": its `capacity` highest routing weights
  kPosition,  // "position": its first `capacity` tokens in token order
};

// Megatron's apply_router_token_dropping (pad_to_capacity false) on this
// rank's routing: [T, k] bool, true for the (token, slot) pairs kept. Each
// expert keeps at most `capacity` of the pairs routed to it (ties in weight
// go to the earlier token); rows where `rows` [T] bool is false (padding;
// undefined: none) are dropped and do not count. Dropped pairs add nothing
// to the output (Megatron: probs * mask; no renormalisation).
at::Tensor CapacityKeepMask(const Routing& routing, int64_t num_experts,
                            int64_t capacity, TokenDropPolicy policy,
                            const at::Tensor& rows = {});

// sum over slots of weights[t, j] * experts[indices[t, j]](x[t]): tokens
// grouped by expert with one sort, each expert run once. x [T, H] -> [T, H]
// in x's dtype (weights are cast to it).
at::Tensor RunExperts(const at::Tensor& x,
                      const std::vector<std::shared_ptr<MLP>>& experts,
                      const Routing& routing);

// DeepSeek-V3's router module, `mlp.gate`: `weight` [E, H] and
// `e_score_correction_bias` [E]. The bias is a parameter without gradient
// (HF: a buffer saved with the weights) so that it loads, saves and syncs by
// name with the rest; aux-loss-free balancing updates it outside autograd.
class TopkRouter : public torch::nn::Module {
 public:
  TopkRouter(int64_t num_experts, int64_t hidden);
  // x [T, H] -> router logits [T, E], computed in fp32 (double stays double).
  at::Tensor Logits(const at::Tensor& x) const;

  at::Tensor weight;
  at::Tensor e_score_correction_bias;
};

// DeepSeek-V3 MoE block (HF DeepseekV3MoE): routed experts under the sigmoid
// router plus `shared_experts`, one MLP of n_shared_experts *
// moe_intermediate_size every token goes through.
class DeepseekMoe : public torch::nn::Module {
 public:
  explicit DeepseekMoe(const ModelConfig& config);
  // x [T, H] -> [T, H]; `router_logits`, if given, receives the gate's
  // logits [T, E] (fp32; for Megatron's load-balancing loss references).
  at::Tensor Forward(const at::Tensor& x,
                     at::Tensor* router_logits = nullptr) const;

  GroupLimitedOptions options;
  std::shared_ptr<TopkRouter> gate;
  std::vector<std::shared_ptr<MLP>> experts;
  std::shared_ptr<MLP> shared_experts;  // null when n_shared_experts == 0
  // Row-parallel seam as Linear::output_hook: when set, Forward returns
  // output_hook(routed + shared output) — one all-reduce per block for the
  // tensor-parallel rollout, whose experts hold intermediate-size slices.
  std::function<at::Tensor(const at::Tensor&)> output_hook;
};

}  // namespace verl::models

#endif  // VERL_MODELS_MOE_ROUTER_H_
