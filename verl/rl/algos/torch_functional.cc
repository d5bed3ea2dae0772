// File: verl/rl/algos/torch_functional.cc
#include "verl/rl/algos/torch_functional.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <ATen/ops/rsqrt.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::rl {

at::Tensor MaskedSum(const at::Tensor& x, const at::Tensor& mask,
                     std::optional<int64_t> dim) {
  at::Tensor m = mask.to(x.scalar_type());
  at::Tensor valid = at::where(mask.to(at::kBool), x, at::zeros_like(x));
  at::Tensor prod = valid * m;
  return dim.has_value() ? prod.sum(*dim) : prod.sum();
}

at::Tensor MaskedMean(const at::Tensor& x, const at::Tensor& mask,
                      std::optional<int64_t> dim) {
  at::Tensor m = mask.to(x.scalar_type());
  at::Tensor count = dim.has_value() ? m.sum(*dim) : m.sum();
  return MaskedSum(x, mask, dim) / (count + 1e-8);
}

absl::StatusOr<at::Tensor> MaskedVar(const at::Tensor& x,
                                     const at::Tensor& mask, bool unbiased) {
  at::Tensor mean = MaskedMean(x, mask);
  at::Tensor centered = x - mean;
  at::Tensor var = MaskedMean(centered * centered, mask);
  if (unbiased) {
    const double n = mask.to(at::kDouble).sum().item<double>();
    if (n < 2.0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "masked_var: unbiased variance needs at least 2 valid (mask=1) "
          "elements, got ",
          n));
    }
    var = var * (n / (n - 1.0));
  }
  return var;
}

absl::StatusOr<at::Tensor> MaskedWhiten(const at::Tensor& x,
                                        const at::Tensor& mask,
                                        bool shift_mean) {
  at::Tensor mean = MaskedMean(x, mask);
  VERL_ASSIGN_OR_RETURN(at::Tensor var, MaskedVar(x, mask, /*unbiased=*/true));
  at::Tensor whitened = (x - mean) * at::rsqrt(var + 1e-8);
  if (!shift_mean) whitened = whitened + mean;
  return whitened;
}

at::Tensor EntropyFromLogits(const at::Tensor& logits) {
  at::Tensor pd = at::softmax(logits, -1);
  return at::logsumexp(logits, {-1}) - (pd * logits).sum(-1);
}

at::Tensor SumPiSquaredFromLogits(const at::Tensor& logits) {
  return at::exp(at::logsumexp(2.0 * logits, {-1}) -
                 2.0 * at::logsumexp(logits, {-1}));
}

at::Tensor LogprobsFromLogits(const at::Tensor& logits,
                              const at::Tensor& labels) {
  return at::log_softmax(logits, -1)
      .gather(-1, labels.unsqueeze(-1))
      .squeeze(-1);
}

at::Tensor ClipByValue(const at::Tensor& x, const at::Tensor& lo,
                       const at::Tensor& hi) {
  return at::max(at::min(x, hi), lo);
}

at::Tensor GetResponseMask(const at::Tensor& response_ids,
                           const std::vector<int64_t>& eos_ids,
                           at::ScalarType dtype) {
  at::Tensor is_eos = at::zeros_like(response_ids, at::kLong);
  for (int64_t eos : eos_ids) {
    is_eos = at::logical_or(is_eos, response_ids.eq(eos)).to(at::kLong);
  }
  return (is_eos.cumsum(1) - is_eos).eq(0).to(dtype);
}

double ConstantScheduleWithWarmup(int64_t step, int64_t num_warmup_steps) {
  if (step < num_warmup_steps) {
    return static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, num_warmup_steps));
  }
  return 1.0;
}

double CosineScheduleWithWarmup(int64_t step, int64_t num_warmup_steps,
                                int64_t num_training_steps, double min_lr_ratio,
                                double num_cycles, double init_lr_ratio) {
  CHECK(min_lr_ratio >= 0.0 && min_lr_ratio <= 1.0) << min_lr_ratio;
  if (step < num_warmup_steps) {
    return init_lr_ratio +
           (1.0 - init_lr_ratio) * static_cast<double>(step) /
               static_cast<double>(std::max<int64_t>(1, num_warmup_steps));
  }
  const double progress = static_cast<double>(step - num_warmup_steps) /
                          static_cast<double>(std::max<int64_t>(
                              1, num_training_steps - num_warmup_steps));
  const double x = std::cos(M_PI * num_cycles * 2.0 * progress);
  const double coef = (1.0 - min_lr_ratio) * 0.5;
  const double intercept = (1.0 + min_lr_ratio) * 0.5;
  return std::max(min_lr_ratio, x * coef + intercept);
}

double WsdScheduleWithWarmup(int64_t step, int64_t num_warmup_steps,
                             int64_t num_training_steps, double min_lr_ratio,
                             double num_cycles, double stable_ratio) {
  const int64_t remaining =
      std::max<int64_t>(0, num_training_steps - num_warmup_steps);
  const int64_t num_stable =
      static_cast<int64_t>(static_cast<double>(remaining) * stable_ratio);
  const int64_t num_decay = remaining - num_stable;
  if (step < num_warmup_steps) {
    return static_cast<double>(step) /
           static_cast<double>(std::max<int64_t>(1, num_warmup_steps));
  }
  if (step < num_warmup_steps + num_stable) return 1.0;
  if (step < num_training_steps) {
    const double progress =
        static_cast<double>(step - num_warmup_steps - num_stable) /
        static_cast<double>(std::max<int64_t>(1, num_decay));
    const double value = std::max(
        0.0, 0.5 * (1.0 + std::cos(M_PI * num_cycles * 2.0 * progress)));
    return (1.0 - min_lr_ratio) * value + min_lr_ratio;
  }
  return min_lr_ratio;
}

}  // namespace verl::rl
