// File: verl/parallel/distributed.h
//
// One call a worker makes after MaybeLaunch: read the torchrun environment,
// set LibTorch's intra-op threads, join the world process group.
//
//   VERL_ASSIGN_OR_RETURN(DistributedContext dist, InitDistributed({}));
//   dist.world->AllReduce(...);  // dist.env.rank, dist.intra_op_threads
#ifndef VERL_PARALLEL_DISTRIBUTED_H_
#define VERL_PARALLEL_DISTRIBUTED_H_

#include <memory>

#include "absl/status/statusor.h"
#include "verl/parallel/dist_env.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

struct DistributedOptions {
  ProcessGroupOptions process_group;
  // > 0: use this many intra-op threads; 0: OMP_NUM_THREADS, else the
  // hardware threads divided by LOCAL_WORLD_SIZE (see threads.h).
  int intra_op_threads = 0;
};

struct DistributedContext {
  DistEnv env;
  std::shared_ptr<Communicator> world;
  int intra_op_threads = 1;  // The count now in effect.
};

absl::StatusOr<DistributedContext> InitDistributed(
    const DistributedOptions& options = {});

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_DISTRIBUTED_H_
