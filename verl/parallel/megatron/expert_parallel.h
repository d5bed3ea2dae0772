// File: verl/parallel/megatron/expert_parallel.h
//
// Megatron's all-to-all token dispatcher (MoEAlltoAllTokenDispatcher) over
// the expert-parallel group: the ep ranks hold contiguous blocks of
// num_experts / ep experts (rank j: experts [j*El, (j+1)*El)); each rank
// routes its own tokens, and
//
//   1. Plan:     the (token, slot) pairs are sorted by expert (stable); the
//                per-expert counts are exchanged first (an all-to-all of
//                [E] counts), giving the variable send/receive splits;
//   2. Dispatch: the permuted token rows go to their experts' ranks (one
//                all-to-all with those splits) and are regrouped by local
//                expert, so each local expert sees one contiguous block;
//   3. Combine:  the expert outputs travel back (the inverse all-to-all),
//                are weighted by the routing weights and summed per token.
//
// No token is dropped unless the plan gets a keep mask (capacity-based
// dropping, moe_expert_capacity_factor: verl/models/moe/router.h's
// CapacityKeepMask); dropped pairs are neither sent nor combined. Both
// all-to-alls are differentiable (backward is the all-to-all with the splits
// swapped), so every ep rank must run Dispatch/Combine, forward and
// backward, in the same order, also with zero tokens for some expert.
//
//   ExpertDispatch plan = PlanExpertDispatch(routing.indices, E, *ep);
//   at::Tensor rows = DispatchTokens(x, plan, ep);      // [M, H] by expert
//   ... y = local expert e on rows[plan.local_offsets[e] ...] ...
//   at::Tensor out = CombineTokens(y, routing.weights, plan, ep);  // [N, H]
//
// Expert tensor parallelism (etp > 1, Megatron's AlltoAll dispatcher with
// an expert tp group): the etp group's members hold the same experts, fc1
// column-split and fc2 row-split, but received different tokens. After the
// ep dispatch the rows are all-gathered over etp (variable row counts, the
// per-expert counts exchanged first) and regrouped by local expert; the
// experts' partial outputs are reduce-scattered back to the rows' owners
// before the combine:
//
//   EtpGather g = PlanEtpGather(plan.local_offsets, *etp);
//   rows = GatherExpertRows(rows, g, etp);           // [sum M_m, H]
//   ... local expert e on rows[g.local_offsets[e] ...] (weight shards) ...
//   y = ReduceScatterExpertRows(y, g, etp);          // [M, H], summed
#ifndef VERL_PARALLEL_MEGATRON_EXPERT_PARALLEL_H_
#define VERL_PARALLEL_MEGATRON_EXPERT_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "verl/parallel/megatron/mappings.h"

namespace verl::parallel::megatron {

// Differentiable variable-split all-to-all of rows: sends rows
// [off_j, off_j + send_splits[j]) of x [N, ...] to member j, returns the
// rows received from every member in rank order ([sum recv_splits, ...]).
// Backward: the gradient goes back with the splits swapped. bf16 travels as
// 16-bit words. A failed collective ends the process naming the rank.
at::Tensor AllToAllRows(const at::Tensor& x,
                        const std::vector<int64_t>& send_splits,
                        const std::vector<int64_t>& recv_splits,
                        const CommPtr& comm);

// One MoE layer's dispatch on this rank (no autograd state).
struct ExpertDispatch {
  int64_t num_tokens = 0;  // N (this rank's tokens)
  int64_t top_k = 0;
  int64_t num_local_experts = 0;  // El = E / ep
  at::Tensor order;  // [P] flat (token, slot) ids of the sent pairs by expert
  at::Tensor token_of;  // [P] token of each sorted pair
  at::Tensor counts;    // [E] int64: this rank's sent pairs per expert
  std::vector<int64_t> send_splits, recv_splits;  // rows per ep rank
  // Received rows regrouped by local expert: rows = received[regroup];
  // local expert e holds rows [local_offsets[e], local_offsets[e + 1]).
  at::Tensor regroup, ungroup;  // [M] and its inverse permutation
  std::vector<int64_t> local_offsets;
};

// Collective over `ep` (the counts exchange). indices [N, k] int64 in
// [0, num_experts); num_experts must divide by ep.size(). `keep` [N, k]
// bool (undefined: every pair) selects the pairs that are sent (P of them).
ExpertDispatch PlanExpertDispatch(const at::Tensor& indices,
                                  int64_t num_experts, Communicator& ep,
                                  const at::Tensor& keep = {});

// x [N, H] -> the rows of this rank's experts [M, H], grouped by local
// expert. Collective over `ep`.
at::Tensor DispatchTokens(const at::Tensor& x, const ExpertDispatch& plan,
                          const CommPtr& ep);

// Expert outputs y [M, H] (grouped as DispatchTokens returned them) ->
// sum over slots of weights[t, s] * y(t, s), [N, H] in y's dtype (weights
// [N, k] are cast to it). Collective over `ep`.
at::Tensor CombineTokens(const at::Tensor& y, const at::Tensor& weights,
                         const ExpertDispatch& plan, const CommPtr& ep);

// The etp all-gather of one MoE layer's dispatched rows (no autograd state).
struct EtpGather {
  std::vector<int64_t> member_rows;  // rows each etp member received (M_m)
  // Gathered rows come as [member][local expert] blocks: by expert =
  // gathered[regroup]; ungroup is its inverse permutation.
  at::Tensor regroup, ungroup;
  // Local expert e holds gathered rows [local_offsets[e], local_offsets[e+1]).
  std::vector<int64_t> local_offsets;
};

// Collective over `etp` (an all-gather of the [El] per-expert row counts).
// `local_offsets`: this rank's ExpertDispatch::local_offsets.
EtpGather PlanEtpGather(const std::vector<int64_t>& local_offsets,
                        Communicator& etp);

// rows [M, H] (DispatchTokens' output) -> every etp member's rows grouped by
// local expert [sum M_m, H] (an all-gather with variable counts). Backward:
// the members' partial gradients are reduce-scattered back (summed onto
// their owner's rows). Collective over `etp`.
at::Tensor GatherExpertRows(const at::Tensor& rows, const EtpGather& g,
                            const CommPtr& etp);

// The experts' partial outputs y [sum M_m, H] (grouped as GatherExpertRows
// returned them) -> this rank's rows [M, H], summed over the etp members.
// Backward: all-gather. Collective over `etp`.
at::Tensor ReduceScatterExpertRows(const at::Tensor& y, const EtpGather& g,
                                   const CommPtr& etp);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_EXPERT_PARALLEL_H_
