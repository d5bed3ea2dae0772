// File: verl/infer/sampling_params.h
//
// Per-request sampling settings (vLLM SamplingParams / verl rollout keys)
// and their validation.
#ifndef VERL_INFER_SAMPLING_PARAMS_H_
#define VERL_INFER_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"

namespace verl::infer {

struct SamplingParams {
  int64_t n = 1;                        // samples per prompt (verl rollout.n)
  bool do_sample = true;                // false => greedy
  double temperature = 1.0;             // 0 => greedy
  int64_t top_k = -1;                   // <= 0 => disabled
  double top_p = 1.0;                   // in (0, 1]
  int64_t max_tokens = 16;              // response_length
  std::vector<int64_t> stop_token_ids;  // stop in addition to EOS
  bool ignore_eos = false;              // keep going past the model's EOS ids
  // HF/vLLM repetition penalty over prompt + generated tokens (1 => off):
  // a seen token's logit l becomes l / penalty if l > 0 else l * penalty,
  // before temperature. Log-probs are those of the penalised distribution.
  double repetition_penalty = 1.0;
  // Per-request seed; sample i draws from a generator seeded by (seed, i).
  // Unset => derived from the engine seed and the request id.
  std::optional<uint64_t> seed;

  bool greedy() const { return !do_sample || temperature == 0.0; }
};

// Checks n, temperature, top_p, max_tokens and repetition_penalty; the
// message names the offending field.
absl::Status ValidateSamplingParams(const SamplingParams& params);

}  // namespace verl::infer

#endif  // VERL_INFER_SAMPLING_PARAMS_H_
