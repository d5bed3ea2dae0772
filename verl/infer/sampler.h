// File: verl/infer/sampler.h
//
// Token sampling for a batch of sequences from their next-token logits,
// parallel over rows. Per row: repetition penalty over the row's context (if
// not 1), then greedy (argmax) or temperature -> top-k -> top-p -> draw from
// the renormalised distribution with the sequence's own generator (one draw
// per token), so results do not depend on batch composition or preemption.
// One vectorised pass (kernels.h) gives per-chunk (256 tokens) maxima and
// exp-sums of the row; the log-prob follows from them. Greedy keeps the
// chunk holding the maximum; top-k keeps candidates at or above the k-th
// heaviest so far (partial selection, no sort of the vocabulary); an
// unfiltered draw picks a chunk by a weighted reservoir over the chunks'
// masses and draws inside it; top-p without top-k keeps the tokens within
// ln(V / (1 - top_p)) + 2 (temperature-scaled) of the running maximum, a
// superset of the nucleus (the rest weighs < (1 - top_p) of the total; the
// argument is at kNucleusMargin in sampler.cc), and finds the nucleus and
// the draw inside it by a quickselect on the candidates' mass (expected
// linear, no sort).
//
// Because no mode needs the whole row at once, the logits can come in
// vocabulary chunks (SampleTokensChunked: the engine's LM head computed
// chunk by chunk, so [rows, vocab] logits never exist); both entry points
// give the same tokens and log-probs for the same logits.
//
// Workspace (ChunkedSampler): the per-row sampling state (softmax
// statistics, kept chunk, candidate buffers, penalised-token bitmap), the
// logits chunk buffer and the results live in a ChunkedSampler the caller
// keeps across decode steps. Every buffer keeps its capacity, so after a
// warm-up call, a call with as many or fewer rows whose candidate counts
// need no more room than before does no heap allocation. The repetition
// penalty marks the context in a bitmap over the vocabulary (V / 8 bytes a
// penalised row, however long the context) and penalises a stack copy of
// <= 4096 tokens at a time; `fill` is an absl::FunctionRef; the row loops
// hold no scratch of their own, so this holds for any number of threads
// and for contexts that grow from step to step. Bounded on purpose: a
// top-k or top-p candidate buffer whose capacity grew past the retained
// size (kSamplerRetainedCandidates by default) is freed after its row's
// draw. A workspace thus keeps at most about retained * 44 bytes of
// candidates a row (28 for top-p's buffers, 16 for top-k's: 2.75 MiB at
// the default), and rows past it allocate on every call: a flat top-p row
// (a random-weight model's keeps most of a 152k vocabulary) does; peaked
// rows (trained models) stay far below. The free functions SampleTokens /
// SampleTokensChunked run a fresh workspace per call that retains nothing
// (candidate buffers freed after each draw).
//
// Returns the token and its log-probability under the temperature-scaled
// (unfiltered) distribution, which is what verl compares against as
// rollout_log_probs (temperature 1 for greedy rows).
#ifndef VERL_INFER_SAMPLER_H_
#define VERL_INFER_SAMPLER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
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

// logits: [B, V] (any float dtype); rows.size() == B. Runs a fresh
// ChunkedSampler that retains nothing.
std::vector<SampledToken> SampleTokens(const at::Tensor& logits,
                                       absl::Span<const SampleRow> rows);

// Statistics chunk of the sampler; SampleTokensChunked's chunks are
// multiples of it.
inline constexpr int64_t kSamplerSubChunk = 256;

// The unfiltered draw's uniforms: from the token's one generator draw
// `draw`, chunk c's reservoir uniform is SamplerUniform(draw, c) and the
// draw inside the chosen chunk uses SamplerUniform(draw, -1).
double SamplerUniform(uint64_t draw, int64_t index);

// Writes the logits of tokens [v0, v1) for every row into out, row-major
// [rows, v1 - v0]. A non-owning reference: a lambda converts to it without
// allocating and must outlive the call it is passed to.
using LogitChunkFn =
    absl::FunctionRef<void(int64_t v0, int64_t v1, float* out)>;

// Candidates a row's top-k / top-p buffers keep room (capacity) for across
// calls of a ChunkedSampler by default (each buffer; larger ones are freed
// after the row's draw).
inline constexpr int64_t kSamplerRetainedCandidates = int64_t{1} << 16;

// A top-p (without top-k) row's candidate buffer: the most tokens it held
// at once, the candidates left after the last filter (a superset of the
// nucleus), and how often it was pruned while the chunks streamed. Zero for
// other rows.
struct NucleusBufferStats {
  int64_t peak = 0, final = 0, prunes = 0;
};

// SampleTokens over logits produced `chunk` tokens at a time (a multiple of
// kSamplerSubChunk) by `fill`, in vocabulary order, for any rows. Same
// tokens and log-probs as SampleTokens on the concatenated logits. With
// `nucleus_stats` set, one entry per row there. Runs a fresh
// ChunkedSampler that retains nothing.
std::vector<SampledToken> SampleTokensChunked(
    int64_t vocab, LogitChunkFn fill, absl::Span<const SampleRow> rows,
    int64_t chunk = 4096,
    std::vector<NucleusBufferStats>* nucleus_stats = nullptr);

// The sampler with its workspace, kept by the caller across decode steps
// (see the top of this file): same tokens and log-probs as the free
// functions, without heap allocation once warm. Not thread-safe: one call
// at a time (the rows of a call run in parallel inside it). The returned
// spans stay valid until the next call. A moved-from sampler may only be
// destroyed or assigned to.
class ChunkedSampler {
 public:
  // `retained_candidates`: the room each row's top-k / top-p candidate
  // buffers keep across calls (larger ones are freed after the draw).
  explicit ChunkedSampler(
      int64_t retained_candidates = kSamplerRetainedCandidates);
  ~ChunkedSampler();
  ChunkedSampler(ChunkedSampler&&) noexcept;
  ChunkedSampler& operator=(ChunkedSampler&&) noexcept;
  ChunkedSampler(const ChunkedSampler&) = delete;
  ChunkedSampler& operator=(const ChunkedSampler&) = delete;

  // SampleTokensChunked: logits `chunk` tokens at a time (a multiple of
  // kSamplerSubChunk) from `fill`, in vocabulary order. One result per row.
  absl::Span<const SampledToken> Sample(int64_t vocab, LogitChunkFn fill,
                                        absl::Span<const SampleRow> rows,
                                        int64_t chunk = 4096);

  // SampleTokens over full logits [rows.size(), vocab], row-major (the
  // caller's; not modified).
  absl::Span<const SampledToken> SampleLogits(const float* logits,
                                              int64_t vocab,
                                              absl::Span<const SampleRow> rows);

  // The last call's top-p buffer statistics, one entry per row.
  absl::Span<const NucleusBufferStats> nucleus_stats() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The distribution a row is drawn from (after repetition penalty over
// `context`, temperature, top-k, top-p), as probabilities over the
// vocabulary; for tests and analysis.
std::vector<double> SamplingDistribution(
    const float* logits, int64_t vocab, const SamplingParams& params,
    const std::vector<int64_t>* context = nullptr);

}  // namespace verl::infer

#endif  // VERL_INFER_SAMPLER_H_
