// File: verl/parallel/ulysses.cc
#include "verl/parallel/ulysses.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <glog/logging.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/comm_autograd.h"
#include "verl/parallel/device_mesh.h"

namespace verl::parallel {
namespace {

// Equal-split all-to-all of dim 0; bf16 travels as same-width half words
// (Gloo in LibTorch 1.13 has no bf16; an all-to-all only moves bits).
at::Tensor AllToAllRows(const at::Tensor& send, Communicator& comm,
                        const char* what) {
  if (send.scalar_type() == at::kBFloat16) {
    return AllToAllRows(send.contiguous().view(at::kHalf), comm, what)
        .view(at::kBFloat16);
  }
  return CommOrDie(comm.AllToAll(send), comm, absl::StrCat("Ulysses ", what));
}

at::Tensor SeqToHeadsRaw(const at::Tensor& x, Communicator& comm) {
  const int64_t n = comm.size();
  CHECK_EQ(x.dim(), 3) << "SeqToHeads expects [tokens, heads, head_dim]";
  const int64_t t = x.size(0), h = x.size(1), d = x.size(2);
  CHECK_EQ(h % n, 0) << "Ulysses: " << h << " heads do not split over sp=" << n;
  // Row block j = this rank's tokens for head group j, sent to rank j;
  // block j received = rank j's tokens for this rank's head group.
  at::Tensor send = x.reshape({t, n, h / n, d})
                        .permute({1, 0, 2, 3})
                        .reshape({n * t, h / n, d});
  return AllToAllRows(send, comm, "all-to-all (sequence to heads)");
}

at::Tensor HeadsToSeqRaw(const at::Tensor& y, Communicator& comm) {
  const int64_t n = comm.size();
  CHECK_EQ(y.dim(), 3) << "HeadsToSeq expects [tokens, heads, head_dim]";
  const int64_t total = y.size(0), hs = y.size(1), d = y.size(2);
  CHECK_EQ(total % n, 0) << "Ulysses: " << total
                         << " tokens do not split over sp=" << n;
  const int64_t t = total / n;
  // Row block j (rank j's tokens) goes to rank j; block j received = this
  // rank's tokens for head group j.
  at::Tensor recv = AllToAllRows(y, comm, "all-to-all (heads to sequence)");
  return recv.view({n, t, hs, d}).permute({1, 0, 2, 3}).reshape({t, n * hs, d});
}

}  // namespace

absl::StatusOr<UlyssesGroups> MakeUlyssesGroups(
    std::shared_ptr<Communicator> world, int64_t sp_size) {
  if (sp_size <= 1) return UlyssesGroups{world, SingleProcessCommunicator()};
  if (world->size() % sp_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ulysses_sequence_parallel_size=", sp_size,
                     " does not divide the world size ", world->size()));
  }
  static int calls = 0;  // same sequence of calls on every rank
  VERL_ASSIGN_OR_RETURN(
      DeviceMesh mesh,
      DeviceMesh::Create(world,
                         {{"dp", static_cast<int>(world->size() / sp_size)},
                          {"sp", static_cast<int>(sp_size)}},
                         absl::StrCat("ulysses", calls++)));
  UlyssesGroups g;
  VERL_ASSIGN_OR_RETURN(g.dp, mesh.Get("dp"));
  VERL_ASSIGN_OR_RETURN(g.sp, mesh.Get("sp"));
  return g;
}

at::Tensor SeqToHeads(const at::Tensor& x, std::shared_ptr<Communicator> sp) {
  if (sp->size() == 1) return x;
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = SeqToHeadsRaw(x.detach(), *sp);
  }
  return WithCommBackward(
      out, x, "UlyssesSeqToHeadsBackward",
      [sp](const at::Tensor& g) { return HeadsToSeqRaw(g, *sp); });
}

at::Tensor HeadsToSeq(const at::Tensor& y, std::shared_ptr<Communicator> sp) {
  if (sp->size() == 1) return y;
  at::Tensor out;
  {
    at::NoGradGuard no_grad;
    out = HeadsToSeqRaw(y.detach(), *sp);
  }
  return WithCommBackward(
      out, y, "UlyssesHeadsToSeqBackward",
      [sp](const at::Tensor& g) { return SeqToHeadsRaw(g, *sp); });
}

at::Tensor GatherSeq(const at::Tensor& x, std::shared_ptr<Communicator> sp,
                     double grad_scale) {
  if (sp->size() == 1) return x;
  CHECK_GE(x.dim(), 1) << "GatherSeq needs a dim 0";
  at::Tensor out;
  int64_t offset = 0;
  {
    at::NoGradGuard no_grad;
    absl::StatusOr<std::vector<at::Tensor>> parts = sp->AllGather(x.detach());
    DieOnCommError(parts.status(), *sp, "Ulysses all-gather of outputs");
    for (int r = 0; r < sp->rank(); ++r) offset += (*parts)[r].size(0);
    out = at::cat(*parts, 0);
  }
  const int64_t rows = x.size(0);
  return WithCommBackward(out, x, "UlyssesGatherBackward",
                          [offset, rows, grad_scale](const at::Tensor& g) {
                            return g.narrow(0, offset, rows) * grad_scale;
                          });
}

}  // namespace verl::parallel
