// File: verl/rl/algos/torch_functional.h
//
// verl's shared numeric primitives (verl/utils/torch_functional.py): masked
// reductions with verl's epsilons, entropy from logits, response masks from
// EOS ids, and learning-rate schedule factors as pure functions of the step.
#ifndef VERL_RL_ALGOS_TORCH_FUNCTIONAL_H_
#define VERL_RL_ALGOS_TORCH_FUNCTIONAL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::rl {

// Σ x·m over `dim` (all elements if nullopt). Entries outside the mask are
// replaced by 0 first, so NaN/Inf there do not leak into the sum.
at::Tensor MaskedSum(const at::Tensor& x, const at::Tensor& mask,
                     std::optional<int64_t> dim = std::nullopt);

// masked_sum / (Σ m + 1e-8).
at::Tensor MaskedMean(const at::Tensor& x, const at::Tensor& mask,
                      std::optional<int64_t> dim = std::nullopt);

// Masked variance over all elements; unbiased applies N/(N-1) with N = Σm.
// InvalidArgument when `unbiased` and N < 2 (verl's masked_var raises: one
// valid token has no unbiased variance).
absl::StatusOr<at::Tensor> MaskedVar(const at::Tensor& x,
                                     const at::Tensor& mask,
                                     bool unbiased = true);

// (x − μ)·rsqrt(var_unbiased + 1e-8) (+μ back if !shift_mean). Statistics
// come from masked elements only; the transform applies to every element.
// Errors as MaskedVar (fewer than 2 valid elements).
absl::StatusOr<at::Tensor> MaskedWhiten(const at::Tensor& x,
                                        const at::Tensor& mask,
                                        bool shift_mean = true);

// Per-position entropy logsumexp(z) − Σ softmax(z)·z over the last dim.
at::Tensor EntropyFromLogits(const at::Tensor& logits);

// Σπ² = exp(logsumexp(2z) − 2·logsumexp(z)) over the last dim.
at::Tensor SumPiSquaredFromLogits(const at::Tensor& logits);

// log_softmax(logits)[..., labels].
at::Tensor LogprobsFromLogits(const at::Tensor& logits,
                              const at::Tensor& labels);

// max(min(x, hi), lo) with tensor bounds.
at::Tensor ClipByValue(const at::Tensor& x, const at::Tensor& lo,
                       const at::Tensor& hi);

// [B,T] mask: 1 up to and including the first token in `eos_ids`, 0 after.
at::Tensor GetResponseMask(const at::Tensor& response_ids,
                           const std::vector<int64_t>& eos_ids,
                           at::ScalarType dtype);

// LR multipliers (LambdaLR factors) as functions of the scheduler step.
double ConstantScheduleWithWarmup(int64_t step, int64_t num_warmup_steps);
double CosineScheduleWithWarmup(int64_t step, int64_t num_warmup_steps,
                                int64_t num_training_steps,
                                double min_lr_ratio = 0.0,
                                double num_cycles = 0.5,
                                double init_lr_ratio = 0.0);
// Warmup-stable-decay (SFT): linear warmup, ⌊(N−W)·stable_ratio⌋ steps at 1,
// cosine decay to min_lr_ratio, min_lr_ratio after N.
double WsdScheduleWithWarmup(int64_t step, int64_t num_warmup_steps,
                             int64_t num_training_steps,
                             double min_lr_ratio = 0.0, double num_cycles = 0.5,
                             double stable_ratio = 0.9);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_TORCH_FUNCTIONAL_H_
