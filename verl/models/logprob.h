// File: verl/models/logprob.h
//
// Log-probabilities of given labels and entropy from logits, scaled by the
// sampling temperature (verl's logprobs_from_logits and
// entropy_from_logits_with_chunking). Rows are processed in chunks so the
// [tokens, vocab] fp32 softmax is never materialised for all rows at once;
// backward recomputes each chunk from the saved logits and per-row
// log-sum-exp (custom autograd function), so it is autograd-correct without
// keeping the softmax.
#ifndef VERL_MODELS_LOGPROB_H_
#define VERL_MODELS_LOGPROB_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace verl::models {

inline constexpr int64_t kLogProbChunkRows = 2048;

struct LogProbEntropy {
  at::Tensor log_probs;  // [...] fp32 (double for double logits)
  at::Tensor entropy;    // [...] same; undefined unless requested
};

// logits [..., V] (fp32/bf16/fp16/double), labels [...] int64. Computes
// z = logits / temperature in fp32, log_softmax(z)[label] and
// H = logsumexp(z) - sum(softmax(z) * z). Differentiable w.r.t. logits.
LogProbEntropy LogProbsAndEntropy(const at::Tensor& logits,
                                  const at::Tensor& labels,
                                  double temperature = 1.0,
                                  bool with_entropy = true,
                                  int64_t chunk_rows = kLogProbChunkRows);

// Convenience wrappers.
at::Tensor LogProbsFromLogits(const at::Tensor& logits,
                              const at::Tensor& labels,
                              double temperature = 1.0,
                              int64_t chunk_rows = kLogProbChunkRows);
at::Tensor EntropyFromLogits(const at::Tensor& logits, double temperature = 1.0,
                             int64_t chunk_rows = kLogProbChunkRows);

// Σ_v softmax(z)_v² per row of z = logits / temperature, as verl's
// calculate_sum_pi_squared_from_logits: exp(lse(2z) − 2·lse(z)), in chunks of
// rows, without autograd (the optimal-token-baseline estimators need it as
// data, not as a loss). Result [...] in the compute type.
at::Tensor SumPiSquaredFromLogits(const at::Tensor& logits,
                                  double temperature = 1.0,
                                  int64_t chunk_rows = kLogProbChunkRows);

}  // namespace verl::models

#endif  // VERL_MODELS_LOGPROB_H_
