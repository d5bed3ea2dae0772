// File: verl/infer/sampler.h
//
// Token sampling for a batch of sequences from their next-token logits,
// parallel over rows. Per row: repetition penalty over the row's context (if
// not 1), then greedy (argmax) or temperature -> top-k -> top-p -> draw from
// the renormalised distribution with the sequence's own generator, so
// results do not depend on batch composition or preemption. One vectorised
// pass (kernels.h) gives per-chunk maxima and exp-sums of the row; greedy,
// the log-prob, the unfiltered inverse-CDF draw and top-k's candidate bound
// need nothing else but one chunk; top-k is a partial selection (no sort of
// the vocabulary), top-p grows a sorted prefix geometrically. Returns the token
// and its log-probability under the temperature-scaled (unfiltered)
// distribution, which is what verl compares against as rollout_log_probs
// (temperature 1 for greedy rows).
#ifndef VERL_INFER_SAMPLER_H_
#define VERL_INFER_SAMPLER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <random>
#include <vector>

#include "verl/infer/sampling_params.h"

namespace verl::infer {

using SeqRng = std::mt19937_64;

// Generator for sample `index` of a request seeded with `seed`.
SeqRng MakeSequenceRng(uint64_t seed, int64_t index);

struct SampleRow {
  const SamplingParams* params = nullptr;
  SeqRng* rng = nullptr;  // unused for greedy rows
  // Tokens seen so far (prompt + generated) for repetition_penalty; may be
  // null when the penalty is 1.
  const std::vector<int64_t>* context = nullptr;
};

struct SampledToken {
  int64_t token = 0;
  float logprob = 0.f;
};

// logits: [B, V] (any float dtype); rows.size() == B.
std::vector<SampledToken> SampleTokens(const at::Tensor& logits,
                                       const std::vector<SampleRow>& rows);

// The distribution a row is drawn from (after repetition penalty over
// `context`, temperature, top-k, top-p), as probabilities over the
// vocabulary; for tests and analysis.
std::vector<double> SamplingDistribution(
    const float* logits, int64_t vocab, const SamplingParams& params,
    const std::vector<int64_t>* context = nullptr);

}  // namespace verl::infer

#endif  // VERL_INFER_SAMPLER_H_
