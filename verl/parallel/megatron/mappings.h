// File: verl/parallel/megatron/mappings.h
//
// Megatron's tensor-parallel communication ops (megatron/core/
// tensor_parallel/mappings.py) as autograd-aware functions over one
// tensor-parallel group. Each forward collective is paired with its
// conjugate in backward:
//
//   op (forward)                               backward
//   CopyToTensorParallelRegion     identity    all-reduce
//   ReduceFromTensorParallelRegion all-reduce  identity
//   ScatterToTensorParallelRegion  split last  all-gather last
//   GatherFromTensorParallelRegion all-gather  split last
//   AllGatherLastDim...            all-gather  reduce-scatter last
//   ScatterToSequenceParallel...   split dim 0 all-gather dim 0
//   GatherFromSequenceParallel...  all-gather  reduce-scatter dim 0
//   ReduceScatterToSequence...     reduce-scat all-gather dim 0
//
// "Last" is the feature dim (split evenly over tp); dim 0 is the token dim
// under sequence parallelism (split evenly; its size must divide by tp).
// Every rank of the group must call the same ops in the same order, forward
// and backward. A failed collective ends the process naming the rank.
// bf16 reductions run in fp32 (Gloo in LibTorch 1.13 has no bf16 sum).
#ifndef VERL_PARALLEL_MEGATRON_MAPPINGS_H_
#define VERL_PARALLEL_MEGATRON_MAPPINGS_H_

#include <ATen/core/Tensor.h>

#include <memory>

#include "verl/parallel/process_group.h"

namespace verl::parallel::megatron {

using CommPtr = std::shared_ptr<Communicator>;

at::Tensor CopyToTensorParallelRegion(const at::Tensor& x, const CommPtr& tp);
at::Tensor ReduceFromTensorParallelRegion(const at::Tensor& x,
                                          const CommPtr& tp);
at::Tensor ScatterToTensorParallelRegion(const at::Tensor& x,
                                         const CommPtr& tp);
at::Tensor GatherFromTensorParallelRegion(const at::Tensor& x,
                                          const CommPtr& tp);
// Megatron's all_gather_last_dim_from_tensor_parallel_region: the gathered
// features are consumed differently by each rank, so backward sums them.
at::Tensor AllGatherLastDimFromTensorParallelRegion(const at::Tensor& x,
                                                    const CommPtr& tp);

at::Tensor ScatterToSequenceParallelRegion(const at::Tensor& x,
                                           const CommPtr& tp);
// `tensor_parallel_output_grad`: the consumer is tensor-parallel (each rank
// computes a partial gradient of the gathered tensor), so backward
// reduce-scatters; false: backward just takes this rank's rows.
at::Tensor GatherFromSequenceParallelRegion(
    const at::Tensor& x, const CommPtr& tp,
    bool tensor_parallel_output_grad = true);
at::Tensor ReduceScatterToSequenceParallelRegion(const at::Tensor& x,
                                                 const CommPtr& tp);

// The raw collectives (no autograd), also used by the layers' backward.
at::Tensor AllReduceSum(const at::Tensor& x, Communicator& comm);
at::Tensor AllReduceMax(const at::Tensor& x, Communicator& comm);
at::Tensor AllGatherDim(const at::Tensor& x, int64_t dim, Communicator& comm);
at::Tensor ReduceScatterDim(const at::Tensor& x, int64_t dim,
                            Communicator& comm);
at::Tensor SplitDim(const at::Tensor& x, int64_t dim, const Communicator& comm);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_MAPPINGS_H_
