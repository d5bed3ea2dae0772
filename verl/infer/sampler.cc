// File: verl/infer/sampler.cc
#include "verl/infer/sampler.h"

#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "verl/infer/vec_math.h"

namespace verl::infer {
namespace {

// Tokens a filtered row may draw from: the top-k, then the smallest prefix of
// the descending order whose probability mass reaches top_p. `w` holds the
// row's (possibly unnormalised) probabilities. Returns false (and leaves
// `kept` empty) when neither filter is active.
bool FilterTokens(const float* w, int64_t vocab, const SamplingParams& p,
                  std::vector<int64_t>* kept) {
  kept->clear();
  const bool use_k = p.top_k > 0 && p.top_k < vocab;
  const bool use_p = p.top_p < 1.0;
  if (!use_k && !use_p) return false;
  kept->resize(vocab);
  for (int64_t i = 0; i < vocab; ++i) (*kept)[i] = i;
  auto heavier = [w](int64_t a, int64_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };
  const int64_t limit = use_k ? p.top_k : vocab;
  double total = 0.0;  // mass of the top-k candidates (or of everything)
  if (use_p) {
    if (use_k) {
      std::nth_element(kept->begin(), kept->begin() + (limit - 1), kept->end(),
                       heavier);
      kept->resize(limit);
    }
    for (int64_t i : *kept) total += w[i];
  }
  // Select the heaviest m tokens in sorted order; for top-p grow m
  // geometrically until they hold top_p of the mass, so the nucleus costs
  // O(V) rather than a full sort of the vocabulary.
  int64_t m = use_p ? std::min<int64_t>(limit, 64) : limit;
  while (true) {
    if (m < static_cast<int64_t>(kept->size())) {
      std::nth_element(kept->begin(), kept->begin() + (m - 1), kept->end(),
                       heavier);
    }
    std::sort(kept->begin(), kept->begin() + m, heavier);
    if (!use_p) {
      kept->resize(m);
      return true;
    }
    double cum = 0.0;
    for (int64_t i = 0; i < m; ++i) {
      cum += w[(*kept)[i]];
      if (cum >= p.top_p * total) {
        kept->resize(i + 1);
        return true;
      }
    }
    if (m >= limit) {  // rounding: keep all candidates
      kept->resize(m);
      return true;
    }
    m = std::min<int64_t>(limit, m * 8);
  }
}

double Uniform01(SeqRng& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

// Inverse-CDF draw over `w` restricted to `kept` (all tokens if !filtered).
int64_t Draw(const float* w, int64_t vocab, bool filtered,
             const std::vector<int64_t>& kept, SeqRng& rng) {
  const double u = Uniform01(rng);
  const int64_t n = filtered ? static_cast<int64_t>(kept.size()) : vocab;
  auto id = [&](int64_t i) { return filtered ? kept[i] : i; };
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += w[id(i)];
  const double target = u * total;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += w[id(i)];
    if (cum > target) return id(i);
  }
  // Rounding: fall back to the last token with non-zero weight.
  for (int64_t i = n - 1; i >= 0; --i) {
    if (w[id(i)] > 0.f) return id(i);
  }
  return id(0);
}

double InvTemperature(const SamplingParams& p) {
  return p.greedy() ? 1.0 : 1.0 / p.temperature;
}

// Per-thread buffers of the row kernel.
struct RowScratch {
  std::vector<float> penalized, weights;
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

// exp((x - max) / T) of a row into `w`; returns log of their sum and sets
// `*max_out`.
__attribute__((target_clones("arch=haswell", "default"))) double ScaledExp(
    const float* x, int64_t vocab, float inv_t, float* w, float* max_out) {
  float mx = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : mx)
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, x[i]);
  double sum = 0.0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < vocab; ++i) {
    w[i] = VecExp((x[i] - mx) * inv_t);
    sum += w[i];
  }
  *max_out = mx;
  return std::log(sum);
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
  const float inv_t = static_cast<float>(InvTemperature(p));
  scratch->weights.resize(vocab);
  float* w = scratch->weights.data();
  float mx = 0.f;
  const double log_sum = ScaledExp(x, vocab, inv_t, w, &mx);
  auto logprob = [&](int64_t t) {
    return static_cast<float>((x[t] - mx) * inv_t - log_sum);
  };
  if (p.greedy()) {
    // First maximum of the (penalised) logits: exact, no rounding ties.
    const int64_t token = std::max_element(x, x + vocab) - x;
    if (probs != nullptr) {
      probs->assign(vocab, 0.0);
      (*probs)[token] = 1.0;
    }
    return {token, logprob(token)};
  }
  const bool filtered = FilterTokens(w, vocab, p, &scratch->kept);
  if (probs != nullptr) {
    probs->assign(vocab, 0.0);
    double total = 0.0;
    if (filtered) {
      for (int64_t i : scratch->kept) total += w[i];
      for (int64_t i : scratch->kept) (*probs)[i] = w[i] / total;
    } else {
      for (int64_t i = 0; i < vocab; ++i) total += w[i];
      for (int64_t i = 0; i < vocab; ++i) (*probs)[i] = w[i] / total;
    }
    return {-1, 0.f};
  }
  CHECK(rng != nullptr) << "sampled row has no rng";
  const int64_t token = Draw(w, vocab, filtered, scratch->kept, *rng);
  return {token, logprob(token)};
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
