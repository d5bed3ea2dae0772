// File: verl/parallel/megatron/mappings.cc
#include "verl/parallel/megatron/mappings.h"

#include <ATen/core/grad_mode.h>
#include <glog/logging.h>

#include <string>
#include <utility>

#include "verl/parallel/comm_autograd.h"

namespace verl::parallel::megatron {
namespace {

// Reductions of bf16/fp16 run in fp32 and round once at the end.
at::Tensor Reduced(const at::Tensor& x, Communicator& comm, ReduceOp op,
                   const char* what) {
  const bool upcast =
      x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  at::Tensor t = upcast ? x.to(at::kFloat) : x.clone();
  DieOnCommError(comm.AllReduce(t, op), comm, what);
  return upcast ? t.to(x.scalar_type()) : t;
}

int64_t Dim(const at::Tensor& x, int64_t dim) {
  CHECK_GE(x.dim(), 1) << "tensor-parallel mapping of a 0-d tensor";
  return dim < 0 ? dim + x.dim() : dim;
}

// `x` without history, `fn` applied with grad mode off.
template <typename Fn>
at::Tensor NoGrad(const at::Tensor& x, Fn fn) {
  at::NoGradGuard no_grad;
  return fn(x.detach());
}

// Forward `fwd`, backward `bwd`, both on `tp`; identity on a group of one.
template <typename Fwd, typename Bwd>
at::Tensor Mapped(const at::Tensor& x, const CommPtr& tp, const char* name,
                  Fwd fwd, Bwd bwd) {
  if (tp->size() == 1) return x;
  at::Tensor out = NoGrad(x, [&](const at::Tensor& d) { return fwd(d, *tp); });
  return WithCommBackward(
      std::move(out), x, name,
      [tp, bwd](const at::Tensor& g) { return bwd(g, *tp); });
}

at::Tensor Identity(const at::Tensor& x, Communicator&) { return x; }

}  // namespace

at::Tensor AllReduceSum(const at::Tensor& x, Communicator& comm) {
  return Reduced(x, comm, ReduceOp::kSum, "tensor-parallel all-reduce (sum)");
}

at::Tensor AllReduceMax(const at::Tensor& x, Communicator& comm) {
  return Reduced(x, comm, ReduceOp::kMax, "tensor-parallel all-reduce (max)");
}

at::Tensor AllGatherDim(const at::Tensor& x, int64_t dim, Communicator& comm) {
  dim = Dim(x, dim);
  if (x.scalar_type() == at::kBFloat16) {  // bits travel as half words
    return AllGatherDim(x.contiguous().view(at::kHalf), dim, comm)
        .view(at::kBFloat16);
  }
  at::Tensor rows = x.movedim(dim, 0).contiguous();
  at::Tensor all =
      CommOrDie(comm.AllGatherCat(rows), comm, "tensor-parallel all-gather");
  return all.movedim(0, dim).contiguous();
}

at::Tensor ReduceScatterDim(const at::Tensor& x, int64_t dim,
                            Communicator& comm) {
  dim = Dim(x, dim);
  CHECK_EQ(x.size(dim) % comm.size(), 0)
      << "reduce-scatter: dim " << dim << " of size " << x.size(dim)
      << " does not split over " << comm.size() << " ranks";
  const bool upcast =
      x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  at::Tensor rows =
      (upcast ? x.to(at::kFloat) : x).movedim(dim, 0).contiguous();
  at::Tensor mine = CommOrDie(comm.ReduceScatter(rows, ReduceOp::kSum), comm,
                              "tensor-parallel reduce-scatter");
  mine = mine.movedim(0, dim).contiguous();
  return upcast ? mine.to(x.scalar_type()) : mine;
}

at::Tensor SplitDim(const at::Tensor& x, int64_t dim,
                    const Communicator& comm) {
  dim = Dim(x, dim);
  CHECK_EQ(x.size(dim) % comm.size(), 0)
      << "split: dim " << dim << " of size " << x.size(dim)
      << " does not split over " << comm.size() << " ranks";
  const int64_t n = x.size(dim) / comm.size();
  return x.narrow(dim, comm.rank() * n, n).contiguous();
}

at::Tensor CopyToTensorParallelRegion(const at::Tensor& x, const CommPtr& tp) {
  return Mapped(x, tp, "CopyToTensorParallelRegionBackward", Identity,
                AllReduceSum);
}

at::Tensor ReduceFromTensorParallelRegion(const at::Tensor& x,
                                          const CommPtr& tp) {
  return Mapped(x, tp, "ReduceFromTensorParallelRegionBackward", AllReduceSum,
                Identity);
}

at::Tensor ScatterToTensorParallelRegion(const at::Tensor& x,
                                         const CommPtr& tp) {
  return Mapped(
      x, tp, "ScatterToTensorParallelRegionBackward",
      [](const at::Tensor& t, Communicator& c) { return SplitDim(t, -1, c); },
      [](const at::Tensor& g, Communicator& c) {
        return AllGatherDim(g, -1, c);
      });
}

at::Tensor GatherFromTensorParallelRegion(const at::Tensor& x,
                                          const CommPtr& tp) {
  return Mapped(
      x, tp, "GatherFromTensorParallelRegionBackward",
      [](const at::Tensor& t, Communicator& c) {
        return AllGatherDim(t, -1, c);
      },
      [](const at::Tensor& g, Communicator& c) { return SplitDim(g, -1, c); });
}

at::Tensor AllGatherLastDimFromTensorParallelRegion(const at::Tensor& x,
                                                    const CommPtr& tp) {
  return Mapped(
      x, tp, "AllGatherLastDimFromTensorParallelRegionBackward",
      [](const at::Tensor& t, Communicator& c) {
        return AllGatherDim(t, -1, c);
      },
      [](const at::Tensor& g, Communicator& c) {
        return ReduceScatterDim(g, -1, c);
      });
}

at::Tensor ScatterToSequenceParallelRegion(const at::Tensor& x,
                                           const CommPtr& tp) {
  return Mapped(
      x, tp, "ScatterToSequenceParallelRegionBackward",
      [](const at::Tensor& t, Communicator& c) { return SplitDim(t, 0, c); },
      [](const at::Tensor& g, Communicator& c) {
        return AllGatherDim(g, 0, c);
      });
}

at::Tensor GatherFromSequenceParallelRegion(const at::Tensor& x,
                                            const CommPtr& tp,
                                            bool tensor_parallel_output_grad) {
  auto gather = [](const at::Tensor& t, Communicator& c) {
    return AllGatherDim(t, 0, c);
  };
  if (tensor_parallel_output_grad) {
    return Mapped(x, tp, "GatherFromSequenceParallelRegionBackward", gather,
                  [](const at::Tensor& g, Communicator& c) {
                    return ReduceScatterDim(g, 0, c);
                  });
  }
  return Mapped(
      x, tp, "GatherFromSequenceParallelRegionBackward", gather,
      [](const at::Tensor& g, Communicator& c) { return SplitDim(g, 0, c); });
}

at::Tensor ReduceScatterToSequenceParallelRegion(const at::Tensor& x,
                                                 const CommPtr& tp) {
  return Mapped(
      x, tp, "ReduceScatterToSequenceParallelRegionBackward",
      [](const at::Tensor& t, Communicator& c) {
        return ReduceScatterDim(t, 0, c);
      },
      [](const at::Tensor& g, Communicator& c) {
        return AllGatherDim(g, 0, c);
      });
}

}  // namespace verl::parallel::megatron
