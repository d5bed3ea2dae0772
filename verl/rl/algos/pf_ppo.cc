// File: verl/rl/algos/pf_ppo.cc
#include "verl/rl/algos/pf_ppo.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp_min.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/where.h>

#include "absl/strings/str_cat.h"

namespace verl::rl {

absl::StatusOr<at::Tensor> PfPpoWeights(const at::Tensor& scores,
                                        const std::string& reweight_method,
                                        double weight_pow) {
  at::Tensor s = scores.to(at::kDouble);
  at::Tensor w;
  if (reweight_method == "pow") {
    w = s.abs().pow(weight_pow);
  } else if (reweight_method == "max_min") {
    w = s.eq(s.max()).logical_or(s.eq(s.min())).to(at::kDouble);
  } else if (reweight_method == "max_random") {
    w = at::where(s.eq(s.max()), at::full_like(s, 0.4), at::full_like(s, 0.1));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm.pf_ppo.reweight_method: unknown value '", reweight_method,
        "' (expected pow, max_min or max_random)"));
  }
  return at::clamp_min(w + 1e-8, 1e-8);
}

at::Tensor PfPpoResampleIndices(const at::Tensor& weights, uint64_t seed) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  return at::multinomial(weights.to(at::kDouble).cpu(), weights.size(0),
                         /*replacement=*/true, gen);
}

}  // namespace verl::rl
