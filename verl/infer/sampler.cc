// File: verl/infer/sampler.cc
#include "verl/infer/sampler.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "verl/infer/kernels.h"

namespace verl::infer {
namespace {

// Vocabulary chunk of the softmax statistics: the draw and the greedy
// search touch one chunk of logits after the single vectorised pass.
constexpr int64_t kChunk = 256;

double Uniform01(SeqRng& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

double InvTemperature(const SamplingParams& p) {
  return p.greedy() ? 1.0 : 1.0 / p.temperature;
}

// Per-thread buffers of the row kernel.
struct RowScratch {
  std::vector<float> penalized, chunk_max, chunk_sum, weights;
  std::vector<int64_t> kept;
};

// The logits a row samples from: `x` itself, or a copy with the repetition
// penalty applied to every token in `context` (HF / vLLM: positive logits
// divided by the penalty, negative ones multiplied). Each penalised value is
// computed from the original logit, so repeated tokens are penalised once.
const float* PenalizedLogits(const float* x, int64_t vocab,
                             const SamplingParams& p,
                             const std::vector<int64_t>* context,
                             RowScratch* scratch) {
  if (p.repetition_penalty == 1.0 || context == nullptr || context->empty()) {
    return x;
  }
  scratch->penalized.assign(x, x + vocab);
  const float pen = static_cast<float>(p.repetition_penalty);
  for (int64_t t : *context) {
    if (t < 0 || t >= vocab) continue;
    scratch->penalized[t] = x[t] > 0 ? x[t] / pen : x[t] * pen;
  }
  return scratch->penalized.data();
}

// One row's softmax over temperature-scaled logits, from one pass of
// per-chunk maxima and exp-sums: the global maximum, the normaliser, and
// each chunk's mass relative to the maximum.
class RowSoftmax {
 public:
  RowSoftmax(const float* x, int64_t vocab, float inv_t, RowScratch* s)
      : x_(x), vocab_(vocab), inv_t_(inv_t), s_(s) {
    nch_ = (vocab + kChunk - 1) / kChunk;
    s->chunk_max.resize(nch_);
    s->chunk_sum.resize(nch_);
    Kernels().chunk_softmax_stats(x, vocab, kChunk, inv_t, s->chunk_max.data(),
                                  s->chunk_sum.data());
    max_ = *std::max_element(s->chunk_max.begin(), s->chunk_max.end());
    total_ = 0.0;
    for (int64_t c = 0; c < nch_; ++c) total_ += ChunkMass(c);
    log_total_ = std::log(total_);
  }

  float max() const { return max_; }
  double total() const { return total_; }
  // log_softmax(x / T) at token t.
  float LogProb(int64_t t) const {
    return static_cast<float>((x_[t] - max_) * inv_t_ - log_total_);
  }
  // exp((x_t - max) / T): token t's unnormalised probability.
  double Weight(int64_t t) const {
    return std::exp(static_cast<double>((x_[t] - max_) * inv_t_));
  }
  // The first maximum of the row (greedy): only its chunk is searched.
  // NaN logits compare equal to nothing: token 0 rather than an index past
  // the vocabulary.
  int64_t ArgMax() const {
    const int64_t c =
        std::find(s_->chunk_max.begin(), s_->chunk_max.end(), max_) -
        s_->chunk_max.begin();
    if (c >= nch_) return 0;
    const float* lo = x_ + c * kChunk;
    const int64_t t =
        std::find(lo, x_ + std::min(vocab_, (c + 1) * kChunk), max_) - x_;
    return t < vocab_ ? t : 0;
  }
  // Inverse-CDF draw over the whole vocabulary in index order: whole chunks
  // are skipped by their mass; exp is evaluated inside one chunk only.
  int64_t Draw(double u) const {
    const double target = u * total_;
    double cum = 0.0;
    int64_t last = -1;  // last chunk with mass (rounding fallback)
    for (int64_t c = 0; c < nch_; ++c) {
      const double mass = ChunkMass(c);
      if (mass > 0) last = c;
      if (cum + mass <= target) {
        cum += mass;
        continue;
      }
      const int64_t t = DrawInChunk(c, target - cum);
      if (t >= 0) return t;
      cum += mass;
    }
    return std::max<int64_t>(0, LastWithWeight(std::max<int64_t>(last, 0)));
  }
  // Weights of all tokens into scratch->weights (for full distributions).
  const float* AllWeights() const {
    s_->weights.resize(vocab_);
    Kernels().scaled_exp(x_, vocab_, max_, inv_t_, s_->weights.data());
    return s_->weights.data();
  }
  int64_t num_chunks() const { return nch_; }
  const std::vector<float>& chunk_max() const { return s_->chunk_max; }

 private:
  double ChunkMass(int64_t c) const {
    return s_->chunk_sum[c] *
           std::exp(static_cast<double>((s_->chunk_max[c] - max_) * inv_t_));
  }
  // The token of chunk c where the running sum passes `target`, or -1.
  int64_t DrawInChunk(int64_t c, double target) const {
    const int64_t lo = c * kChunk, n = std::min(kChunk, vocab_ - lo);
    float w[kChunk];
    Kernels().scaled_exp(x_ + lo, n, max_, inv_t_, w);
    double cum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      cum += w[i];
      if (cum > target) return lo + i;
    }
    return -1;
  }
  int64_t LastWithWeight(int64_t c) const {
    const int64_t lo = c * kChunk, n = std::min(kChunk, vocab_ - lo);
    float w[kChunk];
    Kernels().scaled_exp(x_ + lo, n, max_, inv_t_, w);
    for (int64_t i = n - 1; i >= 0; --i) {
      if (w[i] > 0.f) return lo + i;
    }
    return lo;
  }

  const float* x_;
  int64_t vocab_, nch_;
  float inv_t_, max_;
  double total_, log_total_;
  RowScratch* s_;
};

// Tokens a filtered row may draw from, most likely first (ties: lower id):
// the top-k by partial selection, then the smallest prefix whose mass
// reaches top_p. Returns false (and leaves `kept` empty) when neither
// filter is active.
bool FilterTokens(const float* x, int64_t vocab, const SamplingParams& p,
                  const RowSoftmax& sm, std::vector<int64_t>* kept) {
  kept->clear();
  const bool use_k = p.top_k > 0 && p.top_k < vocab;
  const bool use_p = p.top_p < 1.0;
  if (!use_k && !use_p) return false;
  auto heavier = [x](int64_t a, int64_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  };
  const int64_t limit = use_k ? p.top_k : vocab;
  if (use_k && limit <= sm.num_chunks()) {
    // The k-th largest chunk maximum bounds the k-th largest logit from
    // below: only chunks reaching it can hold candidates.
    std::vector<float> maxima = sm.chunk_max();
    std::nth_element(maxima.begin(), maxima.begin() + (limit - 1), maxima.end(),
                     std::greater<float>());
    const float bound = maxima[limit - 1];
    for (int64_t c = 0; c < sm.num_chunks(); ++c) {
      if (sm.chunk_max()[c] < bound) continue;
      const int64_t hi = std::min(vocab, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < hi; ++i) {
        if (x[i] >= bound) kept->push_back(i);
      }
    }
  } else {
    kept->resize(vocab);
    for (int64_t i = 0; i < vocab; ++i) (*kept)[i] = i;
  }
  if (use_k && static_cast<int64_t>(kept->size()) > limit) {
    std::nth_element(kept->begin(), kept->begin() + (limit - 1), kept->end(),
                     heavier);
    kept->resize(limit);
  }
  if (!use_p) {
    std::sort(kept->begin(), kept->end(), heavier);
    return true;
  }
  // Top-p sums weights repeatedly: evaluate them once, vectorised.
  const float* w = sm.AllWeights();
  double total = sm.total();  // mass of the candidates
  if (use_k) {
    total = 0.0;
    for (int64_t i : *kept) total += w[i];
  }
  // Select the heaviest m tokens in sorted order; for top-p grow m
  // geometrically until they hold top_p of the mass, so the nucleus costs
  // O(V) rather than a full sort of the vocabulary.
  const int64_t size = static_cast<int64_t>(kept->size());
  int64_t m = std::min<int64_t>(size, 64);
  while (true) {
    if (m < size) {
      std::nth_element(kept->begin(), kept->begin() + (m - 1), kept->end(),
                       heavier);
    }
    std::sort(kept->begin(), kept->begin() + m, heavier);
    double cum = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      cum += w[(*kept)[i]];
      if (cum >= p.top_p * total) {
        kept->resize(i + 1);
        return true;
      }
    }
    if (m >= size) return true;  // rounding: keep all candidates
    m = std::min<int64_t>(size, m * 8);
  }
}

// Inverse-CDF draw over `kept` in its order; `w`: the row's weights when
// already evaluated (top-p), else null.
int64_t DrawKept(const RowSoftmax& sm, const std::vector<int64_t>& kept,
                 const float* w, SeqRng& rng) {
  auto weight = [&](int64_t t) { return w != nullptr ? w[t] : sm.Weight(t); };
  const double u = Uniform01(rng);
  double total = 0.0;
  for (int64_t t : kept) total += weight(t);
  const double target = u * total;
  double cum = 0.0;
  for (int64_t t : kept) {
    cum += weight(t);
    if (cum > target) return t;
  }
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    if (weight(*it) > 0) return *it;
  }
  return kept.front();
}

// Samples one row: the token and its log-probability under the
// temperature-scaled (penalised, unfiltered) distribution. With `probs`
// set, returns the filtered, renormalised distribution there instead of
// drawing.
SampledToken SampleRowImpl(const float* raw, int64_t vocab,
                           const SamplingParams& p,
                           const std::vector<int64_t>* context, SeqRng* rng,
                           RowScratch* scratch, std::vector<double>* probs) {
  const float* x = PenalizedLogits(raw, vocab, p, context, scratch);
  const RowSoftmax sm(x, vocab, static_cast<float>(InvTemperature(p)), scratch);
  if (p.greedy()) {
    // First maximum of the (penalised) logits: exact, no rounding ties.
    const int64_t token = sm.ArgMax();
    if (probs != nullptr) {
      probs->assign(vocab, 0.0);
      (*probs)[token] = 1.0;
    }
    return {token, sm.LogProb(token)};
  }
  const bool filtered = FilterTokens(x, vocab, p, sm, &scratch->kept);
  if (probs != nullptr) {
    probs->assign(vocab, 0.0);
    if (filtered) {
      double total = 0.0;
      for (int64_t i : scratch->kept) total += sm.Weight(i);
      for (int64_t i : scratch->kept) (*probs)[i] = sm.Weight(i) / total;
    } else {
      const float* w = sm.AllWeights();
      for (int64_t i = 0; i < vocab; ++i) (*probs)[i] = w[i] / sm.total();
    }
    return {-1, 0.f};
  }
  CHECK(rng != nullptr) << "sampled row has no rng";
  const float* w = p.top_p < 1.0 ? scratch->weights.data() : nullptr;
  const int64_t token = filtered ? DrawKept(sm, scratch->kept, w, *rng)
                                 : sm.Draw(Uniform01(*rng));
  return {token, sm.LogProb(token)};
}

}  // namespace

SeqRng MakeSequenceRng(uint64_t seed, int64_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index),
                    static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32)};
  return SeqRng(seq);
}

std::vector<SampledToken> SampleTokens(const at::Tensor& logits,
                                       const std::vector<SampleRow>& rows) {
  CHECK_EQ(logits.dim(), 2);
  CHECK_EQ(logits.size(0), static_cast<int64_t>(rows.size()));
  const int64_t vocab = logits.size(1);
  const at::Tensor x = logits.to(at::kFloat).contiguous();
  const float* xs = x.data_ptr<float>();
  std::vector<SampledToken> out(rows.size());
  // Rows per task: enough work (~256K logits) to pay for a parallel region.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / vocab);
  at::parallel_for(0, static_cast<int64_t>(rows.size()), grain,
                   [&](int64_t begin, int64_t end) {
                     RowScratch scratch;
                     for (int64_t r = begin; r < end; ++r) {
                       out[r] = SampleRowImpl(xs + r * vocab, vocab,
                                              *rows[r].params, rows[r].context,
                                              rows[r].rng, &scratch, nullptr);
                     }
                   });
  return out;
}

std::vector<double> SamplingDistribution(const float* logits, int64_t vocab,
                                         const SamplingParams& params,
                                         const std::vector<int64_t>* context) {
  RowScratch scratch;
  std::vector<double> probs;
  SampleRowImpl(logits, vocab, params, context, nullptr, &scratch, &probs);
  return probs;
}

}  // namespace verl::infer
