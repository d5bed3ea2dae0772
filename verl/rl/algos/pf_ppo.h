// File: verl/rl/algos/pf_ppo.h
//
// PF-PPO (algorithm.use_pf_ppo): re-weight trajectories by their score and
// resample the batch with replacement by those weights.
#ifndef VERL_RL_ALGOS_PF_PPO_H_
#define VERL_RL_ALGOS_PF_PPO_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace verl::rl {

// Weights from sequence scores s [B] (Σ token_level_scores):
//   pow: |s|^weight_pow;  max_min: 1 if s is the batch max or min else 0;
//   max_random: 0.4 if s is the max else 0.1;  then max(w + 1e-8, 1e-8).
absl::StatusOr<at::Tensor> PfPpoWeights(const at::Tensor& scores,
                                        const std::string& reweight_method,
                                        double weight_pow = 2.0);

// B indices drawn with replacement ∝ weights (multinomial, seeded).
at::Tensor PfPpoResampleIndices(const at::Tensor& weights, uint64_t seed);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_PF_PPO_H_
