// File: verl/parallel/megatron/expert_parallel.cc
#include "verl/parallel/megatron/expert_parallel.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <numeric>

#include "absl/strings/str_join.h"
#include "verl/parallel/comm_autograd.h"

namespace verl::parallel::megatron {
namespace {

at::Tensor AllToAllNoGrad(const at::Tensor& x, const std::vector<int64_t>& send,
                          const std::vector<int64_t>& recv,
                          Communicator& comm) {
  if (x.scalar_type() == at::kBFloat16) {  // bits travel as half words
    return AllToAllNoGrad(x.contiguous().view(at::kHalf), send, recv, comm)
        .view(at::kBFloat16);
  }
  std::vector<int64_t> got;
  at::Tensor out = CommOrDie(comm.AllToAll(x.contiguous(), send, &got), comm,
                             "expert all-to-all");
  CHECK(got == recv) << "expert all-to-all: received rows ["
                     << absl::StrJoin(got, ", ") << "], planned ["
                     << absl::StrJoin(recv, ", ") << "]";
  return out;
}

// Every member's rows, concatenated in rank order (counts may differ).
at::Tensor AllGatherRowsNoGrad(const at::Tensor& x, Communicator& comm) {
  if (x.scalar_type() == at::kBFloat16) {
    return AllGatherRowsNoGrad(x.contiguous().view(at::kHalf), comm)
        .view(at::kBFloat16);
  }
  return CommOrDie(comm.AllGatherCat(x.contiguous()), comm,
                   "expert tensor-parallel all-gather");
}

// y holds every member's block in rank order (`rows` each): returns this
// member's block summed over the members (an all-to-all of the blocks plus
// a local sum, as Communicator::ReduceScatter, with variable blocks).
at::Tensor ReduceScatterRowsNoGrad(const at::Tensor& y,
                                   const std::vector<int64_t>& rows,
                                   Communicator& comm) {
  const int64_t m = rows[comm.rank()];
  const std::vector<int64_t> recv(comm.size(), m);
  return AllToAllNoGrad(y, rows, recv, comm)
      .reshape({comm.size(), m, y.size(1)})
      .sum(0);
}

// No etp member received a row (every member knows, from the counts):
// nothing to exchange in either direction.
bool NoRows(const EtpGather& g) { return g.regroup.numel() == 0; }

}  // namespace

at::Tensor AllToAllRows(const at::Tensor& x,
                        const std::vector<int64_t>& send_splits,
                        const std::vector<int64_t>& recv_splits,
                        const CommPtr& comm) {
  if (comm->size() == 1) return x;
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = AllToAllNoGrad(x.detach(), send_splits, recv_splits, *comm);
  }
  return WithCommBackward(
      out, x, "ExpertAllToAllBackward",
      [comm, send_splits, recv_splits](const at::Tensor& g) {
        return AllToAllNoGrad(g, recv_splits, send_splits, *comm);
      });
}

ExpertDispatch PlanExpertDispatch(const at::Tensor& indices,
                                  int64_t num_experts, Communicator& ep,
                                  const at::Tensor& keep) {
  CHECK_EQ(indices.dim(), 2) << "routing indices must be [N, k]";
  const int64_t ranks = ep.size();
  CHECK_EQ(num_experts % ranks, 0)
      << num_experts << " experts do not split over " << ranks << " ep ranks";
  ExpertDispatch plan;
  plan.num_tokens = indices.size(0);
  plan.top_k = indices.size(1);
  plan.num_local_experts = num_experts / ranks;
  const int64_t el = plan.num_local_experts;
  at::Tensor flat = indices.reshape({-1}).to(at::kLong);
  plan.order = std::get<1>(flat.sort(/*stable=*/true, 0, false));
  if (keep.defined()) {  // the sent pairs, still by expert
    CHECK(keep.sizes() == indices.sizes()) << "keep mask must be [N, k]";
    plan.order = plan.order.masked_select(
        keep.reshape({-1}).to(at::kBool).index_select(0, plan.order));
    flat = flat.index_select(0, plan.order);
  }
  plan.token_of = at::floor_divide(plan.order, plan.top_k);
  plan.counts = at::bincount(flat, {}, num_experts).to(at::kLong).contiguous();
  // Counts first: [E] split evenly, so rank j gets every rank's counts of
  // its experts, [ep, El] in source-rank order.
  at::Tensor recv_counts = plan.counts;
  if (ranks > 1) {
    recv_counts = CommOrDie(ep.AllToAll(plan.counts), ep,
                            "expert all-to-all (token counts)");
  }
  recv_counts = recv_counts.view({ranks, el});
  at::Tensor send = plan.counts.view({ranks, el}).sum(1);
  at::Tensor recv = recv_counts.sum(1);
  plan.send_splits.assign(send.data_ptr<int64_t>(),
                          send.data_ptr<int64_t>() + ranks);
  plan.recv_splits.assign(recv.data_ptr<int64_t>(),
                          recv.data_ptr<int64_t>() + ranks);
  // Received rows come as [source][local expert] blocks; regroup them by
  // local expert (stable, so each expert's rows stay in source order).
  at::Tensor local_expert = at::arange(el, at::kLong)
                                .repeat({ranks})
                                .repeat_interleave(recv_counts.reshape({-1}));
  plan.regroup = std::get<1>(local_expert.sort(/*stable=*/true, 0, false));
  plan.ungroup = at::empty_like(plan.regroup);
  plan.ungroup.index_put_({plan.regroup},
                          at::arange(plan.regroup.numel(), at::kLong));
  at::Tensor per_expert = recv_counts.sum(0);
  plan.local_offsets.assign(1, 0);
  for (int64_t e = 0; e < el; ++e) {
    plan.local_offsets.push_back(plan.local_offsets.back() +
                                 per_expert[e].item<int64_t>());
  }
  return plan;
}

at::Tensor DispatchTokens(const at::Tensor& x, const ExpertDispatch& plan,
                          const CommPtr& ep) {
  CHECK_EQ(x.size(0), plan.num_tokens);
  at::Tensor rows = x.index_select(0, plan.token_of);
  rows = AllToAllRows(rows, plan.send_splits, plan.recv_splits, ep);
  return rows.index_select(0, plan.regroup);
}

at::Tensor CombineTokens(const at::Tensor& y, const at::Tensor& weights,
                         const ExpertDispatch& plan, const CommPtr& ep) {
  at::Tensor rows = y.index_select(0, plan.ungroup);
  rows = AllToAllRows(rows, plan.recv_splits, plan.send_splits, ep);
  at::Tensor w = weights.to(y.scalar_type())
                     .reshape({-1})
                     .index_select(0, plan.order)
                     .unsqueeze(1);
  at::Tensor out = at::zeros({plan.num_tokens, y.size(1)}, y.options());
  return out.index_add(0, plan.token_of, rows * w);
}

EtpGather PlanEtpGather(const std::vector<int64_t>& local_offsets,
                        Communicator& etp) {
  CHECK(!local_offsets.empty()) << "local_offsets must start with 0";
  const int64_t el = static_cast<int64_t>(local_offsets.size()) - 1;
  const int64_t members = etp.size();
  std::vector<int64_t> mine(el);
  for (int64_t e = 0; e < el; ++e) {
    mine[e] = local_offsets[e + 1] - local_offsets[e];
  }
  at::Tensor counts = at::tensor(mine, at::kLong);
  if (members > 1) counts = AllGatherDim(counts, 0, etp);
  counts = counts.view({members, el}).contiguous();
  EtpGather g;
  at::Tensor rows = counts.sum(1);
  g.member_rows.assign(rows.data_ptr<int64_t>(),
                       rows.data_ptr<int64_t>() + members);
  // [member][local expert] blocks -> by local expert (stable: each expert's
  // rows stay in member order).
  at::Tensor local_expert = at::arange(el, at::kLong)
                                .repeat({members})
                                .repeat_interleave(counts.reshape({-1}));
  g.regroup = std::get<1>(local_expert.sort(/*stable=*/true, 0, false));
  g.ungroup = at::empty_like(g.regroup);
  g.ungroup.index_put_({g.regroup}, at::arange(g.regroup.numel(), at::kLong));
  at::Tensor per_expert = counts.sum(0);
  g.local_offsets.assign(1, 0);
  for (int64_t e = 0; e < el; ++e) {
    g.local_offsets.push_back(g.local_offsets.back() +
                              per_expert[e].item<int64_t>());
  }
  return g;
}

at::Tensor GatherExpertRows(const at::Tensor& rows, const EtpGather& g,
                            const CommPtr& etp) {
  if (etp->size() == 1) return rows;
  CHECK_EQ(rows.size(0), g.member_rows[etp->rank()]);
  if (NoRows(g)) return rows;
  at::Tensor all;
  {
    at::NoGradGuard no_grad;
    all = AllGatherRowsNoGrad(rows.detach(), *etp);
  }
  CHECK_EQ(all.size(0), g.regroup.numel())
      << "expert tensor-parallel all-gather: rows differ from the plan";
  all = WithCommBackward(all, rows, "EtpGatherBackward",
                         [etp, sizes = g.member_rows](const at::Tensor& grad) {
                           return ReduceScatterRowsNoGrad(grad, sizes, *etp);
                         });
  return all.index_select(0, g.regroup);
}

at::Tensor ReduceScatterExpertRows(const at::Tensor& y, const EtpGather& g,
                                   const CommPtr& etp) {
  if (etp->size() == 1 || NoRows(g)) return y;
  at::Tensor blocks = y.index_select(0, g.ungroup);  // by member
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = ReduceScatterRowsNoGrad(blocks.detach(), g.member_rows, *etp);
  }
  return WithCommBackward(out, blocks, "EtpReduceScatterBackward",
                          [etp](const at::Tensor& grad) {
                            return AllGatherRowsNoGrad(grad, *etp);
                          });
}

}  // namespace verl::parallel::megatron
