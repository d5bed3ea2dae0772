// File: verl/parallel/ulysses.h
//
// Ulysses sequence parallelism (DeepSpeed-Ulysses; verl's
// `ulysses_sequence_parallel_size`). The ranks of one sp group share a batch
// and split each forward's packed token stream into equal contiguous slices
// (one per rank). Everything outside attention is per token, so each rank
// runs it on its own slice; around attention, an all-to-all switches from
// sequence-sharded q/k/v [t, heads, d] (t = T / sp tokens, all heads) to
// head-sharded [T, heads / sp, d] (all tokens, this rank's heads), so the
// usual attention runs unchanged over whole sequences, and a second
// all-to-all switches back.
//
// The ops are differentiable (autograd nodes whose backward is the inverse
// all-to-all), so backward communicates the same way; every rank of the sp
// group must run the same ops in the same order, forward and backward. A
// failed collective inside forward/backward ends the process with a line
// naming the rank (a Status cannot cross autograd).
//
// Device mesh: world = dp x sp, row-major (consecutive ranks share an sp
// group), as verl's ("dp", "sp") mesh. Data is sharded over dp only; the
// ranks of one sp group get the same rows.
#ifndef VERL_PARALLEL_ULYSSES_H_
#define VERL_PARALLEL_ULYSSES_H_

#include <ATen/core/Tensor.h>

#include <memory>

#include "absl/status/statusor.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

struct UlyssesGroups {
  std::shared_ptr<Communicator> dp;  // ranks with this rank's sp index
  std::shared_ptr<Communicator> sp;  // ranks sharing this rank's dp index
};

// sp_size <= 1: dp = world, sp = a group of one. Otherwise a ("dp", "sp")
// mesh over `world`; InvalidArgument if sp_size does not divide the world
// size. Collective over `world`.
absl::StatusOr<UlyssesGroups> MakeUlyssesGroups(
    std::shared_ptr<Communicator> world, int64_t sp_size);

// x [t, h, d] (this rank's t tokens, all h heads; h % sp == 0) ->
// [sp * t, h / sp, d] (every rank's tokens in rank order, this rank's heads
// [rank * h / sp, (rank + 1) * h / sp)). Backward: HeadsToSeq.
at::Tensor SeqToHeads(const at::Tensor& x, std::shared_ptr<Communicator> sp);
// The inverse: y [sp * t, h / sp, d] -> [t, h, d]. Backward: SeqToHeads.
at::Tensor HeadsToSeq(const at::Tensor& y, std::shared_ptr<Communicator> sp);

// Every rank's `x` concatenated along dim 0 (row counts may differ). In
// backward, this rank's rows of the incoming gradient times `grad_scale`:
// each rank of the group computes the same loss from the gathered tensor,
// so the sum over the group of the parameter gradients is the gradient of
// that one loss, and grad_scale = sp undoes the train state's average over
// the sp ranks (verl's Gather(grad_scaler=True)).
at::Tensor GatherSeq(const at::Tensor& x, std::shared_ptr<Communicator> sp,
                     double grad_scale);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_ULYSSES_H_
