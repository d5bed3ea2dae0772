// File: verl/infer/sampling_params.cc
#include "verl/infer/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace verl::infer {

absl::Status ValidateSamplingParams(const SamplingParams& p) {
  if (p.n < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("n must be >= 1, got ", p.n));
  }
  if (!(p.temperature >= 0.0) || std::isinf(p.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be >= 0, got ", p.temperature));
  }
  if (!(p.top_p > 0.0 && p.top_p <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("top_p must be in (0, 1], got ", p.top_p));
  }
  if (!(p.repetition_penalty > 0.0) || std::isinf(p.repetition_penalty)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "repetition_penalty must be > 0, got ", p.repetition_penalty));
  }
  if (p.max_tokens < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_tokens must be >= 1, got ", p.max_tokens));
  }
  return absl::OkStatus();
}

}  // namespace verl::infer
