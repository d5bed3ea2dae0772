// File: verl/infer/sampler.cc
#include "verl/infer/sampler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

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

// Temperature-scaled log-probabilities and probabilities of every row,
// computed with vectorised ATen kernels (1/T = 1 for greedy rows).
struct ScaledRows {
  at::Tensor logits, logprobs, probs;  // [B, V] float, contiguous
};
ScaledRows Scale(const at::Tensor& logits, const std::vector<double>& inv_t) {
  const at::Tensor x = logits.to(at::kFloat).contiguous();
  at::Tensor scale = at::tensor(inv_t, at::kDouble).to(at::kFloat).unsqueeze(1);
  ScaledRows r;
  r.logits = x;
  r.logprobs = at::log_softmax(x * scale, 1).contiguous();
  r.probs = r.logprobs.exp().contiguous();
  return r;
}

double InvTemperature(const SamplingParams& p) {
  return p.greedy() ? 1.0 : 1.0 / p.temperature;
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
  std::vector<double> inv_t(rows.size());
  for (size_t r = 0; r < rows.size(); ++r) {
    inv_t[r] = InvTemperature(*rows[r].params);
  }
  const ScaledRows scaled = Scale(logits, inv_t);
  const float* lp = scaled.logprobs.data_ptr<float>();
  const float* pr = scaled.probs.data_ptr<float>();
  const float* xs = scaled.logits.data_ptr<float>();
  std::vector<SampledToken> out(rows.size());
  at::parallel_for(
      0, static_cast<int64_t>(rows.size()), 1, [&](int64_t begin, int64_t end) {
        std::vector<int64_t> kept;
        for (int64_t r = begin; r < end; ++r) {
          const float* lrow = lp + r * vocab;
          const float* prow = pr + r * vocab;
          const SamplingParams& p = *rows[r].params;
          int64_t token;
          if (p.greedy()) {
            // First maximum of the raw logits (exact, no rounding ties).
            const float* xrow = xs + r * vocab;
            token = std::max_element(xrow, xrow + vocab) - xrow;
          } else {
            CHECK(rows[r].rng != nullptr)
                << "sampled row " << r << " has no rng";
            const bool filtered = FilterTokens(prow, vocab, p, &kept);
            token = Draw(prow, vocab, filtered, kept, *rows[r].rng);
          }
          out[r] = {token, lrow[token]};
        }
      });
  return out;
}

std::vector<double> SamplingDistribution(const float* logits, int64_t vocab,
                                         const SamplingParams& params) {
  std::vector<double> probs(vocab, 0.0);
  if (params.greedy()) {
    probs[std::max_element(logits, logits + vocab) - logits] = 1.0;
    return probs;
  }
  const at::Tensor row =
      at::from_blob(const_cast<float*>(logits), {1, vocab}, at::kFloat);
  const ScaledRows scaled = Scale(row, {InvTemperature(params)});
  const float* w = scaled.probs.data_ptr<float>();
  std::vector<int64_t> kept;
  if (FilterTokens(w, vocab, params, &kept)) {
    double total = 0.0;
    for (int64_t i : kept) total += w[i];
    for (int64_t i : kept) probs[i] = w[i] / total;
  } else {
    for (int64_t i = 0; i < vocab; ++i) probs[i] = w[i];
  }
  return probs;
}

}  // namespace verl::infer
