// File: verl/rl/workers/ppo_update.h
//
// The mini-batch / micro-batch loop shared by the actor and the critic
// updates: for each epoch and mini-batch, all-reduce the mini-batch's token
// and sequence counts over DP (so every micro-batch loss is normalised
// globally), run the role's micro-batch loss + backward, take one optimizer
// step, and reduce metrics so they do not depend on the number of ranks or
// micro-batches.
#ifndef VERL_RL_WORKERS_PPO_UPDATE_H_
#define VERL_RL_WORKERS_PPO_UPDATE_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

using MetricMap = std::map<std::string, double>;

struct MicroBatchOptions {
  int64_t micro_batch_size = 1;  // rows per micro-batch when not dynamic
  bool use_dynamic_bsz = false;
  int64_t max_token_len = 16384;  // token budget per micro-batch when dynamic
  // Dynamic: every member of this group splits into the same number of
  // micro-batches, the largest any member needs (verl's
  // same_micro_num_in_dp), so collectives inside the passes (FSDP's
  // per-layer gathers) stay matched. Not owned; null: this rank's own count.
  // RunPpoUpdate uses its dp group when this is null.
  parallel::Communicator* same_count_group = nullptr;
  // Dynamic: the count rounded up to a multiple of this (0: none) — verl's
  // num_batches_divided_by, pp for a Megatron role with virtual pipeline
  // stages (the interleaved schedule needs a multiple of pp).
  int64_t num_batches_divided_by = 0;
};

// Splits `batch` into micro-batches (fixed size, or token-budget balanced);
// returns the row index lists in processing order. Dynamic with
// `same_count_group`: collective over that group (every member gets the same
// error if any member cannot split).
absl::StatusOr<std::vector<std::vector<int64_t>>> MicroBatchIndices(
    const core::Batch& batch, const MicroBatchOptions& options);

// What one micro-batch contributes. `loss` is backpropagated; `summed`
// metrics are this rank's part of a global quantity (added over micro-batches
// and ranks, e.g. a globally normalised loss divided by dp); `token_means`
// are this micro-batch's token means (weighted into global token means).
struct MicroBatchResult {
  at::Tensor loss;
  // Kept alive until after backward (e.g. the attention backend that
  // gradient checkpointing re-runs layers with).
  std::shared_ptr<void> keep_alive;
  MetricMap summed;
  MetricMap token_means;
};

// `micro` holds the micro-batch's rows; `agg` the global normalisation.
using MicroBatchFn = std::function<absl::StatusOr<MicroBatchResult>(
    const core::Batch& micro, const AggOptions& agg)>;

// Runs a mini-batch's micro-batches through something other than the plain
// forward-backward loop (pipeline parallelism: the 1F1B schedule). `loss(m)`
// runs the MicroBatchFn on micro-batch m (on the stage that computes the
// losses, after its forward) and returns the loss to backward from; the
// runner runs every backward itself. An error from `loss` must end the
// process (the other stages are inside the schedule).
using MicroBatchLossFn = std::function<absl::StatusOr<at::Tensor>(int64_t m)>;
using MicroBatchRunner = std::function<absl::Status(
    const std::vector<core::Batch>& micro, const MicroBatchLossFn& loss)>;

struct PpoUpdateOptions {
  int64_t mini_batch_size = 1;  // rows per rank per optimizer step
  int64_t epochs = 1;
  MicroBatchOptions micro;
  std::string mask_key = "response_mask";
  std::string grad_norm_key;  // e.g. "actor/grad_norm"
  // Null: the plain loop. Metrics then come only from the ranks whose
  // runner calls `loss` (the caller shares them, e.g. BroadcastMetrics).
  MicroBatchRunner runner;
  // Called with the number of micro-batches of each mini-batch before its
  // first forward (Megatron scales per-micro-batch terms such as the MoE
  // load-balancing loss by 1 / that number). Optional.
  std::function<void(int64_t num_micro_batches)> before_mini_batch;
};

// Returns: summed metrics added over mini-batches/epochs (verl sums losses
// over optimizer steps), token means averaged over mini-batches, and the mean
// grad norm under `grad_norm_key`.
absl::StatusOr<MetricMap> RunPpoUpdate(const core::Batch& batch,
                                       const PpoUpdateOptions& options,
                                       parallel::Communicator& dp_group,
                                       TrainState& train_state,
                                       const MicroBatchFn& micro_fn);

// Copies `root`'s metrics (keys and values) to every member of `group`.
absl::Status BroadcastMetrics(parallel::Communicator& group, int root,
                              MetricMap* metrics);

// Sums each value over the DP group in place (one collective).
absl::Status AllReduceSum(parallel::Communicator* group,
                          std::vector<double>& values);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_PPO_UPDATE_H_
