// File: verl/rl/algos/value_loss.cc
#include "verl/rl/algos/value_loss.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/max.h>

#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {

absl::StatusOr<ValueLossOutput> ComputeValueLoss(
    const at::Tensor& vpreds, const at::Tensor& values,
    const at::Tensor& returns, const at::Tensor& response_mask,
    double cliprange_value, const std::string& loss_agg_mode,
    const AggOptions& agg) {
  at::Tensor clipped =
      ClipByValue(vpreds, values - cliprange_value, values + cliprange_value);
  at::Tensor loss1 = (vpreds - returns).pow(2);
  at::Tensor loss2 = (clipped - returns).pow(2);
  absl::StatusOr<at::Tensor> agg_loss =
      AggLoss(at::max(loss1, loss2), response_mask, loss_agg_mode, agg);
  if (!agg_loss.ok()) return agg_loss.status();
  ValueLossOutput out;
  out.loss = 0.5 * *agg_loss;
  out.vf_clipfrac =
      MaskedMean(loss2.gt(loss1).to(vpreds.scalar_type()), response_mask)
          .item<double>();
  return out;
}

absl::StatusOr<at::Tensor> ComputeEntropyLoss(const at::Tensor& entropy,
                                              const at::Tensor& response_mask,
                                              const std::string& loss_agg_mode,
                                              const AggOptions& agg) {
  return AggLoss(entropy, response_mask, loss_agg_mode, agg);
}

}  // namespace verl::rl
