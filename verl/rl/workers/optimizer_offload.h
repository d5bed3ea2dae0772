// File: verl/rl/workers/optimizer_offload.h
//
// optimizer_offload for the train states (FSDP and Megatron): AdamW's
// moments moved between host memory (pinned when CUDA is the device, see
// parallel::HostCopy) and the compute device, keeping the optimizer's state
// entries (keyed by parameter), so a step after moving them back continues
// exactly. AdamW creates its state on the first step, next to the
// parameters; before that there is nothing to move.
#ifndef VERL_RL_WORKERS_OPTIMIZER_OFFLOAD_H_
#define VERL_RL_WORKERS_OPTIMIZER_OFFLOAD_H_

#include <c10/core/Device.h>

#include <cstdint>

#include "verl/parallel/fsdp.h"

namespace torch::optim {
class Optimizer;
}  // namespace torch::optim

namespace verl::rl {

// Moves every exp_avg / exp_avg_sq of `optimizer` (an AdamW) to `to`
// (`device` for MemoryLocation::kDevice).
void MoveAdamWState(torch::optim::Optimizer& optimizer,
                    parallel::MemoryLocation to, c10::Device device);

// Bytes of `optimizer`'s (an AdamW's) exp_avg and exp_avg_sq tensors.
int64_t AdamWStateBytes(const torch::optim::Optimizer& optimizer);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_OPTIMIZER_OFFLOAD_H_
