// File: verl/parallel/distributed.cc
#include "verl/parallel/distributed.h"

#include "verl/core/status.h"
#include "verl/parallel/threads.h"

namespace verl::parallel {

absl::StatusOr<DistributedContext> InitDistributed(
    const DistributedOptions& options) {
  DistributedContext context;
  VERL_ASSIGN_OR_RETURN(context.env, DistEnvFromProcessEnv());
  VERL_ASSIGN_OR_RETURN(context.intra_op_threads,
                        SetIntraOpThreads(options.intra_op_threads,
                                          context.env.local_world_size));
  VERL_ASSIGN_OR_RETURN(context.world,
                        InitProcessGroup(context.env, options.process_group));
  return context;
}

}  // namespace verl::parallel
