// File: verl/parallel/megatron/vocab_parallel.h
//
// Log-probabilities, entropy and cross-entropy from vocab-parallel logits
// (megatron/core/tensor_parallel/cross_entropy.py, and verl's
// vocab_parallel_log_probs_from_logits / vocab_parallel_entropy) without
// ever gathering the vocabulary: each rank holds logits for its columns
// [rank*Vp/tp, (rank+1)*Vp/tp) of the padded vocabulary, and the softmax
// statistics travel as one max all-reduce and one sum all-reduce of three
// numbers per token (sum exp, target logit, sum exp*z).
//
// Columns >= vocab_size (Megatron's vocabulary padding) are left out of the
// softmax, so the results equal the unpadded single-process model's.
// Backward is local: d logp / dz = onehot - p, d H / dz = -p (z - E_p[z]),
// from the saved logits and the per-token log-sum-exp and E_p[z].
#ifndef VERL_PARALLEL_MEGATRON_VOCAB_PARALLEL_H_
#define VERL_PARALLEL_MEGATRON_VOCAB_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "verl/parallel/megatron/mappings.h"

namespace verl::parallel::megatron {

struct VocabParallelOutput {
  at::Tensor log_probs;  // [...] fp32 (double for double logits)
  at::Tensor entropy;    // [...]; undefined unless requested
};

// logits [..., Vp/tp] (this rank's shard), labels [...] int64 global ids in
// [0, vocab_size). z = logits / temperature in fp32. Differentiable w.r.t.
// `logits`; every rank of `tp` must call it with the same shapes.
VocabParallelOutput VocabParallelLogProbsAndEntropy(
    const at::Tensor& logits, const at::Tensor& labels, int64_t vocab_size,
    const CommPtr& tp, double temperature = 1.0, bool with_entropy = true);

// Megatron's vocab_parallel_cross_entropy: -log p(label), per token.
at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits,
                                     const at::Tensor& labels,
                                     int64_t vocab_size, const CommPtr& tp);

// Full logits [..., vocab_size] from the shards (all-gather; for tests and
// for callers that need the whole distribution, e.g. sampling).
at::Tensor GatherVocabParallelLogits(const at::Tensor& logits,
                                     int64_t vocab_size, const CommPtr& tp);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_VOCAB_PARALLEL_H_
