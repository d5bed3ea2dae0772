// File: verl/models/moe/router.cc
#include "verl/models/moe/router.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

namespace verl::models {

Routing SoftmaxTopK(const at::Tensor& router_logits, int64_t top_k,
                    bool norm_topk_prob) {
  at::Tensor probs =
      at::softmax(router_logits, -1, ComputeDtype(router_logits.scalar_type()));
  auto [weights, indices] = at::topk(probs, top_k, -1);
  if (norm_topk_prob) weights = weights / weights.sum(-1, /*keepdim=*/true);
  return {indices, weights};
}

Routing SigmoidGroupLimitedTopK(const at::Tensor& router_logits,
                                const at::Tensor& bias,
                                const GroupLimitedOptions& o) {
  const int64_t t = router_logits.size(0), e = router_logits.size(1);
  CHECK_EQ(e % o.n_group, 0) << "experts must split into n_group groups";
  CHECK_LE(o.topk_group, o.n_group);
  at::Tensor scores =
      at::sigmoid(router_logits.to(ComputeDtype(router_logits.scalar_type())));
  at::Tensor indices;
  {
    at::NoGradGuard no_grad;
    at::Tensor choice =
        scores.detach() + bias.detach().to(scores.scalar_type()).unsqueeze(0);
    at::Tensor grouped = choice.view({t, o.n_group, e / o.n_group});
    at::Tensor group_scores =
        std::get<0>(grouped.topk(std::min<int64_t>(2, e / o.n_group), -1))
            .sum(-1);  // [T, n_group]
    at::Tensor group_idx =
        std::get<1>(group_scores.topk(o.topk_group, -1, true, false));
    at::Tensor group_mask =
        at::zeros_like(group_scores, at::kBool).scatter_(1, group_idx, true);
    at::Tensor expert_mask = group_mask.unsqueeze(-1)
                                 .expand({t, o.n_group, e / o.n_group})
                                 .reshape({t, e});
    choice = choice.masked_fill(expert_mask.logical_not(), 0.0);
    indices = std::get<1>(choice.topk(o.top_k, -1, true, false));
  }
  at::Tensor weights = scores.gather(1, indices);
  if (o.norm_topk_prob) {
    weights = weights / (weights.sum(-1, /*keepdim=*/true) + 1e-20);
  }
  return {indices, weights * o.routed_scaling_factor};
}

int64_t ExpertCapacity(int64_t num_tokens, int64_t top_k, int64_t num_experts,
                       double capacity_factor) {
  CHECK_GT(num_experts, 0);
  // The order of get_capacity's float operations.
  const double pairs = static_cast<double>(num_tokens * top_k);
  const auto capacity = static_cast<int64_t>(
      std::ceil(pairs / static_cast<double>(num_experts) * capacity_factor));
  return std::min(capacity, num_tokens);
}

at::Tensor CapacityKeepMask(const Routing& routing, int64_t num_experts,
                            int64_t capacity, TokenDropPolicy policy,
                            const at::Tensor& rows) {
  at::NoGradGuard no_grad;
  const int64_t t = routing.indices.size(0), k = routing.indices.size(1);
  at::Tensor expert = routing.indices.reshape({-1}).to(at::kLong);
  if (rows.defined()) {  // padding rows: an expert id no one has, sorted last
    CHECK_EQ(rows.numel(), t);
    at::Tensor pad =
        rows.to(expert.device(), at::kBool).logical_not().repeat_interleave(k);
    expert = expert.masked_fill(pad, num_experts);
  }
  // Pair ids in the order an expert keeps them: by weight, descending
  // (stable, so equal weights keep token order), or in token order; then
  // stably grouped by expert.
  at::Tensor order = at::arange(t * k, expert.options());
  if (policy == TokenDropPolicy::kProbs) {
    order = std::get<1>(routing.weights.detach().reshape({-1}).sort(
        /*stable=*/true, 0, /*descending=*/true));
  }
  order = order.index_select(
      0, std::get<1>(expert.index_select(0, order).sort(true, 0, false)));
  // Rank of each pair within its expert's run.
  at::Tensor sorted_expert = expert.index_select(0, order);
  at::Tensor counts = at::bincount(sorted_expert, {}, num_experts + 1);
  at::Tensor starts = counts.cumsum(0) - counts;
  at::Tensor rank = at::arange(t * k, expert.options()) -
                    starts.index_select(0, sorted_expert);
  at::Tensor keep_sorted =
      rank.lt(capacity).logical_and(sorted_expert.lt(num_experts));
  at::Tensor keep = at::zeros({t * k}, expert.options().dtype(at::kBool));
  keep.index_put_({order}, keep_sorted);
  return keep.view({t, k});
}

at::Tensor RunExperts(const at::Tensor& x,
                      const std::vector<std::shared_ptr<MLP>>& experts,
                      const Routing& routing) {
  const int64_t num_experts = static_cast<int64_t>(experts.size());
  const int64_t top_k = routing.indices.size(1);
  at::Tensor weights = routing.weights.to(x.scalar_type());
  // Group the T*k (token, slot) pairs by expert with one sort, then run each
  // expert once on its tokens.
  at::Tensor flat_expert = routing.indices.reshape({-1});
  at::Tensor order = std::get<1>(flat_expert.sort(/*stable=*/true, 0, false));
  at::Tensor token_of = at::floor_divide(order, top_k);
  at::Tensor slot_weight = weights.reshape({-1}).index_select(0, order);
  at::Tensor counts =
      at::bincount(flat_expert, {}, num_experts).to(at::kCPU).contiguous();
  const int64_t* cnt = counts.data_ptr<int64_t>();
  at::Tensor out = at::zeros_like(x);
  int64_t start = 0;
  for (int64_t e = 0; e < num_experts; ++e) {
    if (cnt[e] == 0) continue;
    at::Tensor tokens = token_of.narrow(0, start, cnt[e]);
    at::Tensor y = experts[e]->Forward(x.index_select(0, tokens)) *
                   slot_weight.narrow(0, start, cnt[e]).unsqueeze(1);
    out = out.index_add(0, tokens, y);
    start += cnt[e];
  }
  return out;
}

TopkRouter::TopkRouter(int64_t num_experts, int64_t hidden) {
  weight = register_parameter("weight", at::zeros({num_experts, hidden}));
  e_score_correction_bias =
      register_parameter("e_score_correction_bias", at::zeros({num_experts}),
                         /*requires_grad=*/false);
}

at::Tensor TopkRouter::Logits(const at::Tensor& x) const {
  const c10::ScalarType ct = ComputeDtype(x.scalar_type());
  return at::linear(x.to(ct), weight.to(ct));
}

DeepseekMoe::DeepseekMoe(const ModelConfig& c) {
  CHECK_GT(c.num_experts_per_tok, 0) << "num_experts_per_tok must be > 0";
  CHECK_GT(c.n_group, 0);
  CHECK_EQ(c.num_experts % c.n_group, 0)
      << "n_routed_experts must be a multiple of n_group";
  options.top_k = c.num_experts_per_tok;
  options.n_group = c.n_group;
  options.topk_group = c.topk_group;
  options.norm_topk_prob = c.norm_topk_prob;
  options.routed_scaling_factor = c.routed_scaling_factor;
  const int64_t h = c.hidden_size;
  gate =
      register_module("gate", std::make_shared<TopkRouter>(c.num_experts, h));
  auto list = register_module("experts", std::make_shared<ModuleList>());
  for (int64_t e = 0; e < c.num_experts; ++e) {
    experts.push_back(std::make_shared<MLP>(h, c.moe_intermediate_size));
    list->Add(experts.back());
  }
  if (c.n_shared_experts > 0) {
    shared_experts = register_module(
        "shared_experts",
        std::make_shared<MLP>(h, c.moe_intermediate_size * c.n_shared_experts));
  }
}

at::Tensor DeepseekMoe::Forward(const at::Tensor& x,
                                at::Tensor* router_logits) const {
  const at::Tensor logits = gate->Logits(x);
  if (router_logits) *router_logits = logits;
  at::Tensor out = RunExperts(
      x, experts,
      SigmoidGroupLimitedTopK(logits, gate->e_score_correction_bias, options));
  if (shared_experts) out = out + shared_experts->Forward(x);
  return output_hook ? output_hook(out) : out;
}

}  // namespace verl::models
