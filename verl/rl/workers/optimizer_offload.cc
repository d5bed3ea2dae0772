// File: verl/rl/workers/optimizer_offload.cc
#include "verl/rl/workers/optimizer_offload.h"

#include <ATen/core/Tensor.h>
#include <torch/optim/adamw.h>

namespace verl::rl {

void MoveAdamWState(torch::optim::Optimizer& optimizer,
                    parallel::MemoryLocation to, c10::Device device) {
  auto move = [&](const at::Tensor& t) {
    return to == parallel::MemoryLocation::kHost
               ? parallel::HostCopy(t)
               : parallel::DeviceCopy(t, device);
  };
  for (auto& [key, state] : optimizer.state()) {
    auto& s = static_cast<torch::optim::AdamWParamState&>(*state);
    if (s.exp_avg().defined()) s.exp_avg(move(s.exp_avg()));
    if (s.exp_avg_sq().defined()) s.exp_avg_sq(move(s.exp_avg_sq()));
  }
}

int64_t AdamWStateBytes(const torch::optim::Optimizer& optimizer) {
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer.state()) {
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
    for (const at::Tensor& t : {s.exp_avg(), s.exp_avg_sq()}) {
      if (t.defined()) bytes += t.numel() * t.element_size();
    }
  }
  return bytes;
}

}  // namespace verl::rl
