// File: verl/rl/trainer/train_main.cc
//
// RunTrainer: joins the process group (torchrun-style environment; a single
// process when unset) and runs the PPO/GRPO trainer. Errors are one line on
// stderr naming the rank; the exit code is non-zero.
#include "verl/rl/trainer/train_main.h"

#include <iostream>

#include "verl/parallel/distributed.h"
#include "verl/rl/trainer/ppo_trainer.h"

namespace verl::rl {

int RunTrainer(const PpoTrainerConfig& config) {
  parallel::DistributedOptions options;
  // verl passes nccl_timeout to init_process_group, which also bounds the
  // rendezvous (torch's env:// TCPStore timeout).
  options.process_group.timeout =
      std::chrono::seconds(config.actor_rollout_ref().nccl_timeout());
  options.process_group.init_timeout = options.process_group.timeout;
  absl::StatusOr<parallel::DistributedContext> ctx =
      parallel::InitDistributed(options);
  if (!ctx.ok()) {
    std::cerr << "train: " << ctx.status().message() << std::endl;
    return 1;
  }
  absl::StatusOr<FitResult> result = RunPpo(config, ctx->world);
  if (!result.ok()) {
    std::cerr << "train: rank " << ctx->env.rank << ": "
              << result.status().message() << std::endl;
    return 1;
  }
  if (ctx->env.rank == 0) {
    std::cout << "train: finished " << result->steps << " steps" << std::endl;
  }
  return 0;
}

}  // namespace verl::rl
