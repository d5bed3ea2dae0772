// File: verl/infer/sampler.cc
#include "verl/infer/sampler.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>

namespace verl::infer {
namespace {

// A row's sampling distribution: unnormalised weights exp(z - max) over all
// tokens and, when top-k/top-p filtered, the surviving token ids (sorted by
// weight, descending). `lse` is log sum exp(z) over the full vocabulary.
struct RowDistribution {
  std::vector<float> weight;
  std::vector<int64_t> kept;  // empty => every token
  bool filtered = false;
  double lse = 0.0;
  double inv_temperature = 1.0;
};

void BuildDistribution(const float* logits, int64_t vocab,
                       const SamplingParams& p, RowDistribution* d) {
  const double inv_t = p.greedy() ? 1.0 : 1.0 / p.temperature;
  d->inv_temperature = inv_t;
  d->weight.resize(vocab);
  const float mx = *std::max_element(logits, logits + vocab);
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) {
    const float w = std::exp(static_cast<float>((logits[i] - mx) * inv_t));
    d->weight[i] = w;
    sum += w;
  }
  d->lse = mx * inv_t + std::log(sum);
  d->kept.clear();
  d->filtered = false;
  const bool use_k = p.top_k > 0 && p.top_k < vocab;
  const bool use_p = p.top_p < 1.0;
  if (!use_k && !use_p) return;
  d->filtered = true;
  d->kept.resize(vocab);
  for (int64_t i = 0; i < vocab; ++i) d->kept[i] = i;
  const std::vector<float>& w = d->weight;
  auto heavier = [&w](int64_t a, int64_t b) {
    return w[a] > w[b] || (w[a] == w[b] && a < b);
  };
  if (use_k) {
    std::nth_element(d->kept.begin(), d->kept.begin() + (p.top_k - 1),
                     d->kept.end(), heavier);
    d->kept.resize(p.top_k);
  }
  std::sort(d->kept.begin(), d->kept.end(), heavier);
  if (use_p) {
    double total = 0.0;
    for (int64_t i : d->kept) total += w[i];
    // Smallest prefix (by descending probability) whose mass reaches top_p.
    double cum = 0.0;
    size_t keep = 0;
    while (keep < d->kept.size()) {
      cum += w[d->kept[keep++]];
      if (cum >= p.top_p * total) break;
    }
    d->kept.resize(std::max<size_t>(keep, 1));
  }
}

double Uniform01(SeqRng& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int64_t Draw(const RowDistribution& d, SeqRng& rng) {
  const double u = Uniform01(rng);
  const int64_t n = d.filtered ? static_cast<int64_t>(d.kept.size())
                               : static_cast<int64_t>(d.weight.size());
  auto id = [&](int64_t i) { return d.filtered ? d.kept[i] : i; };
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += d.weight[id(i)];
  const double target = u * total;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += d.weight[id(i)];
    if (cum > target) return id(i);
  }
  // Rounding: fall back to the last token with non-zero weight.
  for (int64_t i = n - 1; i >= 0; --i) {
    if (d.weight[id(i)] > 0.f) return id(i);
  }
  return id(0);
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
  const at::Tensor x = logits.to(at::kFloat).contiguous();
  const int64_t vocab = x.size(1);
  const float* base = x.data_ptr<float>();
  std::vector<SampledToken> out(rows.size());
  at::parallel_for(
      0, static_cast<int64_t>(rows.size()), 1, [&](int64_t begin, int64_t end) {
        RowDistribution d;
        for (int64_t r = begin; r < end; ++r) {
          const float* row = base + r * vocab;
          const SamplingParams& p = *rows[r].params;
          int64_t token;
          if (p.greedy()) {
            token = std::max_element(row, row + vocab) - row;  // first maximum
            const float mx = row[token];
            double sum = 0.0;
            for (int64_t i = 0; i < vocab; ++i) sum += std::exp(row[i] - mx);
            out[r] = {token, static_cast<float>(-std::log(sum))};
            continue;
          }
          CHECK(rows[r].rng != nullptr) << "sampled row " << r << " has no rng";
          BuildDistribution(row, vocab, p, &d);
          token = Draw(d, *rows[r].rng);
          out[r] = {token,
                    static_cast<float>(row[token] * d.inv_temperature - d.lse)};
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
  RowDistribution d;
  BuildDistribution(logits, vocab, params, &d);
  double total = 0.0;
  if (d.filtered) {
    for (int64_t i : d.kept) total += d.weight[i];
    for (int64_t i : d.kept) probs[i] = d.weight[i] / total;
  } else {
    for (float w : d.weight) total += w;
    for (int64_t i = 0; i < vocab; ++i) probs[i] = d.weight[i] / total;
  }
  return probs;
}

}  // namespace verl::infer
