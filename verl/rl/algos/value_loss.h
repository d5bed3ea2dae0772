// File: verl/rl/algos/value_loss.h
//
// Critic loss (verl's compute_value_loss): clipped value loss
// ½·agg(max((V̂−R)², (clip(V̂, V_old±c)−R)²)) and vf_clipfrac; plus the
// entropy bonus term agg(H) used by the actor.
#ifndef VERL_RL_ALGOS_VALUE_LOSS_H_
#define VERL_RL_ALGOS_VALUE_LOSS_H_

#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/statusor.h"
#include "verl/rl/algos/agg_loss.h"

namespace verl::rl {

struct ValueLossOutput {
  at::Tensor loss;           // scalar
  double vf_clipfrac = 0.0;  // critic/vf_clipfrac
};

absl::StatusOr<ValueLossOutput> ComputeValueLoss(
    const at::Tensor& vpreds, const at::Tensor& values,
    const at::Tensor& returns, const at::Tensor& response_mask,
    double cliprange_value, const std::string& loss_agg_mode,
    const AggOptions& agg = {});

// agg_loss(entropy, mask, mode): the actor's `actor/entropy` value; the
// objective subtracts entropy_coeff times it.
absl::StatusOr<at::Tensor> ComputeEntropyLoss(const at::Tensor& entropy,
                                              const at::Tensor& response_mask,
                                              const std::string& loss_agg_mode,
                                              const AggOptions& agg = {});

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_VALUE_LOSS_H_
