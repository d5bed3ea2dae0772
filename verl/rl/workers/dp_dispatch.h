// File: verl/rl/workers/dp_dispatch.h
//
// verl's data-parallel dispatch for worker-group calls (single_controller's
// DP_COMPUTE_PROTO): every rank holds the whole Batch, computes on its own
// chunk and gets everyone's results back in row order.
#ifndef VERL_RL_WORKERS_DP_DISPATCH_H_
#define VERL_RL_WORKERS_DP_DISPATCH_H_

#include <cstdint>
#include <functional>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/parallel/process_group.h"

namespace verl::rl {

// Runs `fn` on this rank's chunk of `batch` and gathers the results: pad to a
// multiple of the group size, chunk, compute, gather, unpad. Collective.
absl::StatusOr<core::Batch> ShardedCall(
    parallel::Communicator& comm, const core::Batch& batch,
    const std::function<absl::StatusOr<core::Batch>(const core::Batch&)>& fn);

// This rank's rows for an update: the global batch is cut into mini-batches
// of `global_mini` rows first, then each mini-batch is split over the ranks,
// so mini-batch i holds the same trajectories for any number of ranks.
// InvalidArgument when the sizes do not divide.
absl::StatusOr<core::Batch> UpdateShard(const parallel::Communicator& comm,
                                        const core::Batch& batch,
                                        int64_t global_mini);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_DP_DISPATCH_H_
