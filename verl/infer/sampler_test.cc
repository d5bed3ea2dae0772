// File: verl/infer/sampler_test.cc
#include "verl/infer/sampler.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/topk.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "absl/types/span.h"
#include "verl/core/heap_counter.h"
#include "verl/core/test_util.h"

namespace verl::infer {
namespace {

using ::verl::core::testing::StatusIs;

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

// Closed-form reference: softmax(l / T), keep the top-k, keep the smallest
// prefix of the descending order reaching top_p, renormalise.
std::vector<double> Expected(const SamplingParams& p) {
  const int64_t v = kLogits.size();
  std::vector<double> prob(v);
  double z = 0;
  for (int64_t i = 0; i < v; ++i)
    z += prob[i] = std::exp(kLogits[i] / p.temperature);
  for (double& x : prob) x /= z;
  // kLogits is already sorted descending.
  int64_t keep = p.top_k > 0 ? std::min<int64_t>(p.top_k, v) : v;
  double kmass = std::accumulate(prob.begin(), prob.begin() + keep, 0.0);
  if (p.top_p < 1.0) {
    double cum = 0;
    int64_t n = 0;
    while (n < keep) {
      cum += prob[n++] / kmass;
      if (cum >= p.top_p) break;
    }
    keep = n;
  }
  double mass = std::accumulate(prob.begin(), prob.begin() + keep, 0.0);
  std::vector<double> out(v, 0.0);
  for (int64_t i = 0; i < keep; ++i) out[i] = prob[i] / mass;
  return out;
}

// Draws n tokens: 8 rows (sample indices 0..7 of `seed`) per call.
std::vector<int64_t> Draw(const SamplingParams& p, int64_t n, uint64_t seed) {
  constexpr int64_t kRows = 8;
  const at::Tensor logits = at::tensor(kLogits).unsqueeze(0).repeat({kRows, 1});
  std::vector<SeqRng> rngs;
  for (int64_t i = 0; i < kRows; ++i) rngs.push_back(MakeSequenceRng(seed, i));
  std::vector<SampleRow> rows;
  for (int64_t i = 0; i < kRows; ++i) rows.push_back({&p, &rngs[i]});
  std::vector<int64_t> tokens;
  while (static_cast<int64_t>(tokens.size()) < n) {
    for (const SampledToken& t : SampleTokens(logits, rows)) {
      tokens.push_back(t.token);
    }
  }
  tokens.resize(n);
  return tokens;
}

void CheckStatistics(const SamplingParams& p) {
  const std::vector<double> want = Expected(p);
  const std::vector<double> got =
      SamplingDistribution(kLogits.data(), kLogits.size(), p);
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6) << "token " << i;
  }
  const int64_t n = 24000;
  std::vector<int64_t> counts(kLogits.size(), 0);
  for (int64_t t : Draw(p, n, 1234)) ++counts[t];
  for (size_t i = 0; i < want.size(); ++i) {
    const double freq = static_cast<double>(counts[i]) / n;
    if (want[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "filtered token " << i << " was drawn";
    } else {
      const double sd = std::sqrt(want[i] * (1 - want[i]) / n);
      EXPECT_NEAR(freq, want[i], 5 * sd + 1e-3) << "token " << i;
    }
  }
}

TEST(SamplerTest, TemperatureTopKTopPMatchClosedForm) {
  SamplingParams p;
  for (double t : {1.0, 0.5, 2.0}) {
    p.temperature = t;
    p.top_k = -1;
    p.top_p = 1.0;
    CheckStatistics(p);
    p.top_k = 3;
    CheckStatistics(p);
    p.top_k = -1;
    p.top_p = 0.8;
    CheckStatistics(p);
    p.top_k = 4;
    p.top_p = 0.6;
    CheckStatistics(p);
  }
}

TEST(SamplerTest, TemperatureChangesDistribution) {
  SamplingParams cold, hot;
  cold.temperature = 0.3;
  hot.temperature = 3.0;
  auto c = SamplingDistribution(kLogits.data(), kLogits.size(), cold);
  auto h = SamplingDistribution(kLogits.data(), kLogits.size(), hot);
  EXPECT_GT(c[0], 0.9);
  EXPECT_LT(h[0], 0.4);
}

TEST(SamplerTest, SeedsAreReproducibleAndDistinct) {
  SamplingParams p;
  EXPECT_EQ(Draw(p, 64, 7), Draw(p, 64, 7));
  EXPECT_NE(Draw(p, 64, 7), Draw(p, 64, 8));
  // Sample indices of one seed get different streams.
  SeqRng a = MakeSequenceRng(7, 0), b = MakeSequenceRng(7, 1);
  EXPECT_NE(a(), b());
}

TEST(SamplerTest, GreedyAndTopKOneAgreeAndLogProbsAreTemperatureScaled) {
  at::manual_seed(0);
  const int64_t b = 16, v = 50;
  at::Tensor logits = at::randn({b, v});
  SamplingParams greedy;
  greedy.do_sample = false;
  SamplingParams top1;
  top1.top_k = 1;
  top1.temperature = 0.7;
  std::vector<SeqRng> rngs;
  for (int64_t i = 0; i < b; ++i) rngs.push_back(MakeSequenceRng(3, i));
  std::vector<SampleRow> g_rows, k_rows;
  for (int64_t i = 0; i < b; ++i) {
    g_rows.push_back({&greedy, nullptr});
    k_rows.push_back({&top1, &rngs[i]});
  }
  auto g = SampleTokens(logits, g_rows);
  auto k = SampleTokens(logits, k_rows);
  at::Tensor argmax = logits.argmax(1);
  at::Tensor lp1 = at::log_softmax(logits, 1);
  at::Tensor lpt = at::log_softmax(logits / 0.7, 1);
  for (int64_t i = 0; i < b; ++i) {
    EXPECT_EQ(g[i].token, argmax[i].item<int64_t>());
    EXPECT_EQ(k[i].token, g[i].token);
    EXPECT_NEAR(g[i].logprob, lp1[i][g[i].token].item<float>(), 1e-5);
    EXPECT_NEAR(k[i].logprob, lpt[i][k[i].token].item<float>(), 1e-5);
  }
  // temperature 0 is greedy too.
  SamplingParams zero;
  zero.temperature = 0.0;
  EXPECT_TRUE(zero.greedy());
}

// NaN logits (a diverged model) never yield a token outside the vocabulary.
TEST(SamplerTest, NanLogitsStayInsideTheVocabulary) {
  const int64_t v = 1000;
  at::Tensor logits = at::randn({3, v});
  logits[0].fill_(std::nanf(""));
  logits[1][700] = std::nanf("");
  logits[2].fill_(std::nanf(""));
  SamplingParams greedy;
  greedy.do_sample = false;
  SamplingParams sampled;
  SamplingParams nucleus;
  nucleus.top_p = 0.9;
  SeqRng rng = MakeSequenceRng(1, 0);
  SeqRng rngs[3] = {MakeSequenceRng(1, 1), MakeSequenceRng(1, 2),
                    MakeSequenceRng(1, 3)};
  auto out = SampleTokens(
      logits, {{&greedy, nullptr}, {&greedy, nullptr}, {&sampled, &rng}});
  auto top_p = SampleTokens(
      logits,
      {{&nucleus, &rngs[0]}, {&nucleus, &rngs[1]}, {&nucleus, &rngs[2]}});
  out.insert(out.end(), top_p.begin(), top_p.end());
  for (const SampledToken& t : out) {
    EXPECT_GE(t.token, 0);
    EXPECT_LT(t.token, v);
  }
}

// HF RepetitionPenaltyLogitsProcessor / vLLM: a seen token's logit l becomes
// l / penalty when l > 0, else l * penalty (once, however often it was seen).
TEST(SamplerTest, RepetitionPenaltyMatchesHfDefinition) {
  const std::vector<int64_t> context = {0, 4, 4, 2, 0};
  const double pen = 2.5;
  std::vector<float> want_logits = kLogits;
  for (int64_t t : {0, 2, 4}) {
    want_logits[t] = kLogits[t] > 0 ? kLogits[t] / pen : kLogits[t] * pen;
  }
  // want_logits = {0.8, 1, 0.2, 0, -2.5, -3}: greedy flips from 0 to 1.
  const at::Tensor logits = at::tensor(kLogits).unsqueeze(0);
  const at::Tensor want = at::tensor(want_logits);
  SamplingParams greedy;
  greedy.do_sample = false;
  greedy.repetition_penalty = pen;
  SampledToken g = SampleTokens(logits, {{&greedy, nullptr, &context}})[0];
  EXPECT_EQ(g.token, 1);
  EXPECT_NEAR(g.logprob, at::log_softmax(want, 0)[1].item<float>(), 1e-6);
  // Without context (or penalty 1) nothing changes.
  EXPECT_EQ(SampleTokens(logits, {{&greedy, nullptr, nullptr}})[0].token, 0);

  SamplingParams p;
  p.temperature = 0.7;
  p.repetition_penalty = pen;
  const std::vector<double> dist =
      SamplingDistribution(kLogits.data(), kLogits.size(), p, &context);
  const at::Tensor closed = at::softmax(want.to(at::kDouble) / 0.7, 0);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    EXPECT_NEAR(dist[i], closed[i].item<double>(), 1e-6) << "token " << i;
  }
  // Draws follow it, and log-probs are those of the penalised distribution.
  const int64_t n = 16000;
  std::vector<int64_t> counts(kLogits.size(), 0);
  std::vector<SeqRng> rngs;
  for (int64_t i = 0; i < 8; ++i) rngs.push_back(MakeSequenceRng(42, i));
  std::vector<SampleRow> rows;
  for (SeqRng& r : rngs) rows.push_back({&p, &r, &context});
  const at::Tensor batch = logits.repeat({8, 1});
  const at::Tensor lp = at::log_softmax(want / 0.7, 0);
  for (int64_t drawn = 0; drawn < n; drawn += 8) {
    for (const SampledToken& t : SampleTokens(batch, rows)) {
      ++counts[t.token];
      EXPECT_NEAR(t.logprob, lp[t.token].item<float>(), 1e-5);
    }
  }
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double w = closed[i].item<double>();
    EXPECT_NEAR(static_cast<double>(counts[i]) / n, w,
                5 * std::sqrt(w * (1 - w) / n) + 1e-3)
        << "token " << i;
  }
}

// Dense double-precision reference of the sampling rules: full softmax,
// first argmax, top-k / top-p over the fully sorted vocabulary (logit
// descending, ties by id) and an inverse-CDF draw with the uniform of the
// row's generator; an unfiltered draw picks a 256-token chunk by the
// sequential weighted reservoir over the chunks' masses (SamplerUniform(r,
// c)), then draws inside it with SamplerUniform(r, -1).
SampledToken DenseSample(const std::vector<float>& raw, const SamplingParams& p,
                         const std::vector<int64_t>* context, SeqRng* rng) {
  std::vector<float> x = raw;
  if (context != nullptr && p.repetition_penalty != 1.0) {
    const float pen = static_cast<float>(p.repetition_penalty);
    for (int64_t t : *context) x[t] = raw[t] > 0 ? raw[t] / pen : raw[t] * pen;
  }
  const int64_t v = static_cast<int64_t>(x.size());
  const float inv_t =
      p.greedy() ? 1.f : static_cast<float>(1.0 / p.temperature);
  const float m = *std::max_element(x.begin(), x.end());
  std::vector<double> w(v);
  double total = 0;
  for (int64_t i = 0; i < v; ++i) total += w[i] = std::exp((x[i] - m) * inv_t);
  auto logprob = [&](int64_t t) {
    return static_cast<float>((x[t] - m) * inv_t - std::log(total));
  };
  if (p.greedy()) {
    const int64_t t = std::max_element(x.begin(), x.end()) - x.begin();
    return {t, logprob(t)};
  }
  std::vector<int64_t> order(v);
  std::iota(order.begin(), order.end(), 0);
  const bool use_k = p.top_k > 0 && p.top_k < v, use_p = p.top_p < 1.0;
  const uint64_t draw = (*rng)();
  if (!use_k && !use_p) {
    constexpr int64_t kC = kSamplerSubChunk;
    double cum = 0;
    int64_t chosen = 0;
    for (int64_t c = 0; c * kC < v; ++c) {
      double mass = 0;
      for (int64_t i = c * kC; i < std::min(v, (c + 1) * kC); ++i) {
        mass += w[i];
      }
      cum += mass;
      if (SamplerUniform(draw, c) * cum < mass) chosen = c;
    }
    order.assign(order.begin() + chosen * kC,
                 order.begin() + std::min(v, (chosen + 1) * kC));
    double kept = 0;
    for (int64_t i : order) kept += w[i];
    const double target = SamplerUniform(draw, -1) * kept;
    double c2 = 0;
    for (int64_t i : order) {
      c2 += w[i];
      if (c2 > target) return {i, logprob(i)};
    }
    return {order.back(), logprob(order.back())};
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  if (use_k) order.resize(p.top_k);
  if (use_p) {
    double mass = 0, cum = 0;
    for (int64_t i : order) mass += w[i];
    size_t n = 0;
    while (n < order.size()) {
      cum += w[order[n++]];
      if (cum >= p.top_p * mass) break;
    }
    order.resize(n);
  }
  double kept = 0;
  for (int64_t i : order) kept += w[i];
  const double target = static_cast<double>(draw >> 11) * 0x1.0p-53 * kept;
  double cum = 0;
  for (int64_t i : order) {
    cum += w[i];
    if (cum > target) return {i, logprob(i)};
  }
  return {order.back(), logprob(order.back())};
}

// The one-pass chunked sampler draws the same tokens as the dense reference
// for the same seeds (greedy, top-k = 1, plain temperature, top-k, top-p,
// both, repetition penalty) at the vocabulary sizes, with log-probs
// within 1e-5.
TEST(SamplerTest, ChunkedSamplerMatchesDenseReference) {
  at::manual_seed(9);
  for (int64_t vocab : {8192, 151936}) {
    // The reference sorts the whole vocabulary per draw: few at 152k.
    const int64_t rows = vocab > 10000 ? 2 : 4, draws = vocab > 10000 ? 2 : 8;
    const at::Tensor logits = at::randn({rows, vocab}) * 3.0;
    std::vector<std::vector<float>> dense(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const float* p = logits[r].contiguous().data_ptr<float>();
      dense[r].assign(p, p + vocab);
    }
    std::vector<int64_t> context = {5, 17, 17, 4000, vocab - 1};
    std::vector<SamplingParams> cases(7);
    cases[0].do_sample = false;
    cases[1].top_k = 1;
    cases[1].temperature = 0.7;
    cases[2].temperature = 1.0;
    cases[3].temperature = 0.8;
    cases[3].top_k = 50;
    cases[4].top_p = 0.9;
    cases[5].top_k = 300;
    cases[5].top_p = 0.7;
    cases[5].temperature = 1.3;
    cases[6].temperature = 0.9;
    cases[6].repetition_penalty = 1.3;
    for (size_t c = 0; c < cases.size(); ++c) {
      const SamplingParams& p = cases[c];
      std::vector<SeqRng> rngs, ref_rngs;
      std::vector<SampleRow> sample_rows;
      for (int64_t r = 0; r < rows; ++r) {
        rngs.push_back(MakeSequenceRng(77, r));
        ref_rngs.push_back(MakeSequenceRng(77, r));
      }
      for (int64_t r = 0; r < rows; ++r) {
        sample_rows.push_back({&p, &rngs[r], &context});
      }
      for (int64_t d = 0; d < draws; ++d) {
        const std::vector<SampledToken> got = SampleTokens(logits, sample_rows);
        for (int64_t r = 0; r < rows; ++r) {
          const SampledToken want =
              DenseSample(dense[r], p, &context, &ref_rngs[r]);
          EXPECT_EQ(got[r].token, want.token)
              << "vocab " << vocab << " case " << c << " row " << r;
          EXPECT_NEAR(got[r].logprob, want.logprob, 1e-5)
              << "vocab " << vocab << " case " << c << " row " << r;
        }
      }
    }
  }
}

// Samples `logits` ([rows, vocab], row r with params[r]) through
// SampleTokens and SampleTokensChunked (`chunk`) from the same seeds, three
// draws, and expects the same tokens and log-probs; returns the chunked
// path's nucleus buffer statistics of the last draw; each draw asks for
// every chunk once.
std::vector<NucleusBufferStats> ExpectChunkedEqualsFull(
    const at::Tensor& logits, const std::vector<SamplingParams>& params,
    const std::vector<int64_t>* context, int64_t chunk,
    const std::string& what) {
  const int64_t rows = logits.size(0), vocab = logits.size(1);
  const float* lp = logits.data_ptr<float>();
  std::vector<SeqRng> full_rngs, chunk_rngs;
  for (int64_t r = 0; r < rows; ++r) {
    full_rngs.push_back(MakeSequenceRng(29, r));
    chunk_rngs.push_back(MakeSequenceRng(29, r));
  }
  std::vector<SampleRow> full_rows, chunk_rows;
  for (int64_t r = 0; r < rows; ++r) {
    full_rows.push_back({&params[r], &full_rngs[r], context});
    chunk_rows.push_back({&params[r], &chunk_rngs[r], context});
  }
  int64_t calls = 0;
  auto fill = [&](int64_t v0, int64_t v1, float* out) {
    ++calls;
    for (int64_t r = 0; r < rows; ++r) {
      std::copy(lp + r * vocab + v0, lp + r * vocab + v1, out + r * (v1 - v0));
    }
  };
  std::vector<NucleusBufferStats> stats;
  for (int draw = 0; draw < 3; ++draw) {
    const auto want = SampleTokens(logits, full_rows);
    const auto got =
        SampleTokensChunked(vocab, fill, chunk_rows, chunk, &stats);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r].token, want[r].token)
          << what << " chunk " << chunk << " row " << r << " draw " << draw;
      EXPECT_EQ(got[r].logprob, want[r].logprob)
          << what << " chunk " << chunk << " row " << r << " draw " << draw;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(stats.size()), rows);
  EXPECT_EQ(calls, 3 * ((vocab + chunk - 1) / chunk)) << what;
  return stats;
}

// The LM head in vocabulary chunks: SampleTokensChunked, fed the same
// logits a chunk at a time, gives exactly SampleTokens' tokens and
// log-probs (greedy, top-k 1, temperature, top-k, top-k + top-p, repetition
// penalty), at the vocabulary and at sizes that end mid-chunk.
TEST(SamplerTest, ChunkedLogitsGiveTheSameTokensAsFullLogits) {
  at::manual_seed(5);
  for (int64_t vocab : {151936, 1000, 300}) {
    const int64_t rows = 5;
    const at::Tensor logits = at::randn({rows, vocab}) * 3.0;
    std::vector<int64_t> context = {5, 17, 17, 200, vocab - 1};
    std::vector<SamplingParams> cases(7);
    cases[0].do_sample = false;
    cases[1].top_k = 1;
    cases[1].temperature = 0.7;
    cases[2].temperature = 1.0;
    cases[3].temperature = 0.8;
    cases[3].top_k = 50;
    cases[4].top_k = 100;
    cases[4].top_p = 0.7;
    cases[4].temperature = 1.3;
    cases[5].temperature = 0.9;
    cases[5].repetition_penalty = 1.3;
    cases[6].do_sample = false;
    cases[6].repetition_penalty = 1.3;
    for (int64_t chunk : {4096, 512}) {
      for (size_t c = 0; c < cases.size(); ++c) {
        ExpectChunkedEqualsFull(
            logits, std::vector<SamplingParams>(rows, cases[c]), &context,
            chunk,
            "vocab " + std::to_string(vocab) + " case " + std::to_string(c));
      }
    }
  }
}

// Top-p without top-k through the chunked head: the streaming candidate
// buffer (tokens within ln(V / (1 - p)) + 2 of the running maximum) gives
// exactly the full row's tokens and log-probs at p 0.5 / 0.9 / 0.99 and
// several temperatures, on flat rows (the buffer holds most of the
// vocabulary), peaked rows (most of it pruned away as it streams) and rows
// whose maximum comes only in the last chunk (pruned late).
TEST(SamplerTest, ChunkedNucleusGivesTheFullLogitsTokens) {
  at::manual_seed(13);
  const int64_t vocab = 151936, rows = 3;
  std::vector<SamplingParams> params(rows);
  // (a) Flat rows, as from a random-weight model.
  const at::Tensor flat = at::randn({rows, vocab});
  // (b) Peaked rows, as from a trained model: a few tokens far above a
  // noisy floor, one of them in the first chunk.
  at::Tensor peaked = at::randn({rows, vocab}) * 2.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 20; ++i) {
      const int64_t t = i == 0 ? 3 + r : (i * 7919 + r * 104729) % vocab;
      peaked[r][t] = 40.0 + 0.5 * i;
    }
  }
  // (c) The maximum only in the last chunk: a ridge at the end of the
  // vocabulary, and a ramp whose maximum rises chunk by chunk.
  at::Tensor late = at::randn({rows, vocab}) * 2.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 5; ++i) late[r][vocab - 1 - 17 * i - r] = 60.0 + i;
  }
  at::Tensor ramp =
      at::randn({rows, vocab}) + at::linspace(0.0, 300.0, vocab).unsqueeze(0);
  ramp = ramp.contiguous();
  for (double top_p : {0.5, 0.9, 0.99}) {
    for (double temperature : {0.7, 1.0, 1.5}) {
      for (int64_t r = 0; r < rows; ++r) {
        params[r].top_p = top_p;
        params[r].temperature = temperature;
      }
      const std::string what =
          "p " + std::to_string(top_p) + " T " + std::to_string(temperature);
      for (int64_t chunk : {4096, 512}) {
        auto stats = ExpectChunkedEqualsFull(flat, params, nullptr, chunk,
                                             "flat " + what);
        for (const NucleusBufferStats& s : stats) {
          // Flat: few dropped (the margin spans the whole N(0, 1) range
          // at T >= 1).
          if (temperature >= 1.0) {
            EXPECT_GT(s.final, vocab / 2) << what;
          }
        }
        stats = ExpectChunkedEqualsFull(peaked, params, nullptr, chunk,
                                        "peaked " + what);
        for (const NucleusBufferStats& s : stats) {
          // The floor (< 40 - 28 at p 0.99, T 1.5) never entered the buffer
          // after the first chunk: most of the vocabulary was dropped.
          EXPECT_LT(s.peak, 2 * 512) << what;
          EXPECT_LE(s.final, 20) << what;
          EXPECT_GE(s.final, 1) << what;
        }
        stats = ExpectChunkedEqualsFull(late, params, nullptr, chunk,
                                        "late " + what);
        for (const NucleusBufferStats& s : stats) {
          EXPECT_GT(s.peak, vocab / 2) << what;  // all within the margin
          EXPECT_LE(s.final, 5) << what;         // until the ridge came
        }
        stats = ExpectChunkedEqualsFull(ramp, params, nullptr, chunk,
                                        "ramp " + what);
        for (const NucleusBufferStats& s : stats) {
          EXPECT_GE(s.prunes, 3) << what;  // pruned while streaming
          EXPECT_LT(s.peak, vocab / 2) << what;
        }
      }
    }
  }
}

// One row of each mode: greedy, top-k, top-k + top-p, top-p, unfiltered,
// and top-p at a low temperature.
std::vector<SamplingParams> MixedModes() {
  std::vector<SamplingParams> params(6);
  params[0].do_sample = false;
  params[1].top_k = 50;
  params[1].temperature = 0.8;
  params[2].top_k = 100;
  params[2].top_p = 0.7;
  params[3].top_p = 0.9;
  params[4].temperature = 1.1;
  params[5].top_p = 0.5;
  params[5].temperature = 0.7;
  return params;
}

// (d) A batch mixing greedy, top-k, top-k + top-p, top-p and unfiltered
// rows under a repetition penalty: chunked and full logits agree row by
// row, at vocabularies that end mid-chunk too.
TEST(SamplerTest, ChunkedMixedBatchWithPenaltyGivesTheFullLogitsTokens) {
  at::manual_seed(17);
  std::vector<SamplingParams> params = MixedModes();
  for (SamplingParams& p : params) p.repetition_penalty = 1.3;
  for (int64_t vocab : {151936, 1000, 300}) {
    const int64_t rows = static_cast<int64_t>(params.size());
    at::Tensor logits = at::randn({rows, vocab}) * 3.0;
    // The context's tokens are among the heaviest, so the penalty matters.
    std::vector<int64_t> context = {5, 17, 17, 200, vocab - 1};
    for (int64_t t : context) logits.select(1, t).fill_(12.0);
    for (int64_t chunk : {4096, 512, 256}) {
      ExpectChunkedEqualsFull(logits, params, &context, chunk,
                              "vocab " + std::to_string(vocab));
    }
  }
}

// The chunked nucleus draw follows the closed form: softmax(x / T), the
// smallest heaviest-first prefix reaching top_p, renormalised (computed
// here in double), for 24000 draws over 5 chunks of 256 (the last
// partial); SamplingDistribution gives the same distribution.
TEST(SamplerTest, ChunkedNucleusDrawFollowsTheClosedForm) {
  at::manual_seed(23);
  const int64_t vocab = 1100, rows = 8;
  const at::Tensor row = at::randn({vocab}) * 2.0;
  const float* x = row.data_ptr<float>();
  SamplingParams p;
  p.temperature = 0.8;
  p.top_p = 0.9;
  std::vector<double> want(vocab);
  double z = 0;
  for (int64_t i = 0; i < vocab; ++i) z += want[i] = std::exp(x[i] / 0.8);
  std::vector<int64_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  double cum = 0;
  size_t n = 0;
  while (n < order.size() && cum < p.top_p * z) cum += want[order[n++]];
  std::vector<double> nucleus(vocab, 0.0);
  for (size_t i = 0; i < n; ++i) nucleus[order[i]] = want[order[i]] / cum;
  ASSERT_GT(n, 20u);
  ASSERT_LT(n, 600u);
  const std::vector<double> dist = SamplingDistribution(x, vocab, p);
  for (int64_t i = 0; i < vocab; ++i) {
    EXPECT_NEAR(dist[i], nucleus[i], 1e-6) << "token " << i;
  }
  std::vector<SeqRng> rngs;
  for (int64_t i = 0; i < rows; ++i) rngs.push_back(MakeSequenceRng(31, i));
  std::vector<SampleRow> sample_rows;
  for (SeqRng& r : rngs) sample_rows.push_back({&p, &r});
  auto fill = [&](int64_t v0, int64_t v1, float* out) {
    for (int64_t r = 0; r < rows; ++r)
      std::copy(x + v0, x + v1, out + r * (v1 - v0));
  };
  const int64_t draws = 24000;
  std::vector<int64_t> counts(vocab, 0);
  for (int64_t d = 0; d < draws; d += rows) {
    for (const SampledToken& t :
         SampleTokensChunked(vocab, fill, sample_rows, 256)) {
      ++counts[t.token];
    }
  }
  for (int64_t i = 0; i < vocab; ++i) {
    if (nucleus[i] == 0.0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " outside the nucleus";
    } else {
      const double w = nucleus[i];
      EXPECT_NEAR(static_cast<double>(counts[i]) / draws, w,
                  5 * std::sqrt(w * (1 - w) / draws) + 1e-3)
          << "token " << i;
    }
  }
}

// The unfiltered draw over many chunks (chunk by reservoir, token inside
// it) follows softmax(x / T): per-chunk and top-token frequencies of 24000
// draws against the closed form.
TEST(SamplerTest, ReservoirDrawOverChunksFollowsSoftmax) {
  at::manual_seed(3);
  const int64_t vocab = 1100, rows = 8;  // 5 chunks, the last partial
  const at::Tensor row = at::randn({vocab}) * 1.5;
  SamplingParams p;
  p.temperature = 0.8;
  const at::Tensor want = at::softmax(row.to(at::kDouble) / 0.8, 0);
  const at::Tensor logits = row.unsqueeze(0).repeat({rows, 1});
  std::vector<SeqRng> rngs;
  for (int64_t i = 0; i < rows; ++i) rngs.push_back(MakeSequenceRng(21, i));
  std::vector<SampleRow> sample_rows;
  for (SeqRng& r : rngs) sample_rows.push_back({&p, &r});
  const int64_t n = 24000;
  std::vector<int64_t> counts(vocab, 0);
  for (int64_t drawn = 0; drawn < n; drawn += rows) {
    for (const SampledToken& t : SampleTokens(logits, sample_rows)) {
      ++counts[t.token];
    }
  }
  auto check = [&](double w, int64_t count, const std::string& what) {
    EXPECT_NEAR(static_cast<double>(count) / n, w,
                5 * std::sqrt(w * (1 - w) / n) + 1e-3)
        << what;
  };
  for (int64_t c = 0; c * kSamplerSubChunk < vocab; ++c) {
    const int64_t lo = c * kSamplerSubChunk;
    const int64_t hi = std::min(vocab, lo + kSamplerSubChunk);
    check(want.narrow(0, lo, hi - lo).sum().item<double>(),
          std::accumulate(counts.begin() + lo, counts.begin() + hi, int64_t{0}),
          "chunk " + std::to_string(c));
  }
  const at::Tensor top = std::get<1>(want.topk(5));
  for (int64_t i = 0; i < 5; ++i) {
    const int64_t t = top[i].item<int64_t>();
    check(want[t].item<double>(), counts[t], "token " + std::to_string(t));
  }
}

// Rows over `logits` ([rows, vocab], row r with params[r] and generator
// MakeSequenceRng(41, r)), for a ChunkedSampler and for the free functions
// side by side (each its own generators, so both draw the same numbers).
struct TwinRows {
  TwinRows(const at::Tensor& logits, const std::vector<SamplingParams>& params,
           const std::vector<int64_t>* context)
      : logits(logits) {
    const int64_t n = logits.size(0);
    for (int64_t r = 0; r < n; ++r) {
      ws_rngs.push_back(MakeSequenceRng(41, r));
      free_rngs.push_back(MakeSequenceRng(41, r));
    }
    for (int64_t r = 0; r < n; ++r) {
      const std::vector<int64_t>* c =
          params[r].repetition_penalty != 1.0 ? context : nullptr;
      ws.push_back({&params[r], &ws_rngs[r], c});
      free.push_back({&params[r], &free_rngs[r], c});
    }
  }
  // Writes the logits of [v0, v1) for the first `rows` rows.
  void Fill(int64_t rows, int64_t v0, int64_t v1, float* out) const {
    const int64_t vocab = logits.size(1);
    const float* lp = logits.data_ptr<float>();
    for (int64_t r = 0; r < rows; ++r) {
      std::copy(lp + r * vocab + v0, lp + r * vocab + v1, out + r * (v1 - v0));
    }
  }
  at::Tensor logits;
  std::vector<SeqRng> ws_rngs, free_rngs;
  std::vector<SampleRow> ws, free;
};

// One ChunkedSampler call of the first `rows` rows (chunked with `chunk`,
// else over the full logits) under a HeapCounter, then the free function
// on the same rows: the same tokens, log-probs and nucleus statistics.
// Returns the call's heap allocations.
int64_t CountedCallMatchesFree(ChunkedSampler& sampler, TwinRows& t,
                               int64_t rows, int64_t chunk,
                               const std::string& what) {
  const int64_t vocab = t.logits.size(1);
  const auto ws_rows = absl::MakeConstSpan(t.ws.data(), rows);
  const auto free_rows = absl::MakeConstSpan(t.free.data(), rows);
  absl::Span<const SampledToken> got;
  int64_t allocations = 0;
  {
    core::testing::HeapCounter counter;
    got = chunk > 0 ? sampler.Sample(
                          vocab,
                          [&](int64_t v0, int64_t v1, float* out) {
                            t.Fill(rows, v0, v1, out);
                          },
                          ws_rows, chunk)
                    : sampler.SampleLogits(t.logits.data_ptr<float>(), vocab,
                                           ws_rows);
    allocations = counter.allocations();
  }
  std::vector<NucleusBufferStats> want_stats;
  const std::vector<SampledToken> want =
      chunk > 0 ? SampleTokensChunked(
                      vocab,
                      [&](int64_t v0, int64_t v1, float* out) {
                        t.Fill(rows, v0, v1, out);
                      },
                      free_rows, chunk, &want_stats)
                : SampleTokens(t.logits.narrow(0, 0, rows), free_rows);
  EXPECT_EQ(static_cast<int64_t>(got.size()), rows) << what;
  EXPECT_EQ(static_cast<int64_t>(sampler.nucleus_stats().size()), rows) << what;
  for (int64_t r = 0; r < rows && r < static_cast<int64_t>(got.size()); ++r) {
    EXPECT_EQ(got[r].token, want[r].token) << what << " row " << r;
    EXPECT_EQ(got[r].logprob, want[r].logprob) << what << " row " << r;
    if (chunk > 0) {
      EXPECT_EQ(sampler.nucleus_stats()[r].peak, want_stats[r].peak) << what;
      EXPECT_EQ(sampler.nucleus_stats()[r].final, want_stats[r].final) << what;
      EXPECT_EQ(sampler.nucleus_stats()[r].prunes, want_stats[r].prunes)
          << what;
    }
  }
  return allocations;
}

// The decode loop's sampler: once warm, a ChunkedSampler samples a batch
// mixing every mode (greedy, top-k, top-k + top-p, top-p alone on peaked
// rows, unfiltered, repetition penalty with a context) with zero heap
// allocations, chunked and over full logits, with one and two threads
// (16 rows: the chunk loop splits them into two tasks), for a smaller
// batch after a larger one and for a context grown eightfold; every call
// gives the free functions' tokens and log-probs bit for bit.
TEST(SamplerTest, WarmChunkedSamplerDoesNotAllocate) {
  if (!core::testing::HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  at::manual_seed(43);
  const int64_t vocab = 5000;
  // Every mode, and three rows under a repetition penalty.
  std::vector<SamplingParams> modes = MixedModes();
  modes[5].repetition_penalty = 1.3;
  modes.emplace_back().top_k = 40;
  modes.back().repetition_penalty = 1.3;
  modes.emplace_back().do_sample = false;
  modes.back().repetition_penalty = 1.3;
  std::vector<SamplingParams> params;
  for (int i = 0; i < 2; ++i)
    params.insert(params.end(), modes.begin(), modes.end());
  const int64_t rows = static_cast<int64_t>(params.size());
  // Peaked rows, as from a trained model: a few tokens far above a noisy
  // floor; the context holds some of them, in several sub-chunks.
  at::Tensor logits = at::randn({rows, vocab}) * 2.0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < 12; ++i) {
      logits[r][(i * 997 + r * 131) % vocab] = 20.0 + 0.5 * i;
    }
  }
  logits = logits.contiguous();
  std::vector<int64_t> context;
  for (int64_t i = 0; i < 40; ++i) context.push_back((i * 997 + 131) % vocab);
  context.push_back(vocab - 1);
  context.push_back(3);
  TwinRows t(logits, params, &context);
  const int saved_threads = at::get_num_threads();
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (int64_t chunk : {4096, 512, 0}) {
      const std::string what = "threads " + std::to_string(threads) +
                               " chunk " + std::to_string(chunk);
      ChunkedSampler sampler;
      CountedCallMatchesFree(sampler, t, rows, chunk, what + " warm-up");
      EXPECT_EQ(CountedCallMatchesFree(sampler, t, rows, chunk, what), 0)
          << what;
      EXPECT_EQ(CountedCallMatchesFree(sampler, t, rows, chunk, what), 0)
          << what << " (third call)";
      EXPECT_EQ(CountedCallMatchesFree(sampler, t, 5, chunk, what + " 5 rows"),
                0)
          << what << " 5 rows";
      // The penalised rows' context grows eightfold, as over a response.
      const size_t base = context.size();
      for (int64_t i = 0; i < 300; ++i)
        context.push_back((i * 37 + 11) % vocab);
      EXPECT_EQ(
          CountedCallMatchesFree(sampler, t, rows, chunk, what + " long ctx"),
          0)
          << what << " longer context";
      context.resize(base);
    }
  }
  at::set_num_threads(saved_threads);
}

// The memory bound: a flat top-p row (candidates: most of a 151936-token
// vocabulary) frees its buffers after each draw, so it allocates again on
// the next call, unless the workspace retains a vocabulary's worth; a
// peaked one at the same vocabulary stays below kSamplerRetainedCandidates
// and does not, unless the workspace retains none.
TEST(SamplerTest, ChunkedSamplerFreesCandidateBuffersPastTheCap) {
  if (!core::testing::HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  at::manual_seed(47);
  const int64_t vocab = 151936;
  std::vector<SamplingParams> params(1);
  params[0].top_p = 0.9;
  const at::Tensor flat = at::randn({1, vocab});
  at::Tensor peaked = at::randn({1, vocab}) * 2.0;
  for (int64_t i = 0; i < 20; ++i) peaked[0][(i * 7919) % vocab] = 40.0 + i;
  {
    TwinRows t(flat, params, nullptr);
    ChunkedSampler sampler;
    CountedCallMatchesFree(sampler, t, 1, 4096, "flat warm-up");
    ASSERT_GT(sampler.nucleus_stats()[0].final, kSamplerRetainedCandidates);
    EXPECT_GT(CountedCallMatchesFree(sampler, t, 1, 4096, "flat"), 0);
    // With room for the whole vocabulary (and the vectors' growth beyond
    // it) the flat row does not allocate.
    ChunkedSampler roomy(/*retained_candidates=*/4 * vocab);
    CountedCallMatchesFree(roomy, t, 1, 4096, "flat, roomy warm-up");
    EXPECT_EQ(CountedCallMatchesFree(roomy, t, 1, 4096, "flat, roomy"), 0);
  }
  {
    TwinRows t(peaked.contiguous(), params, nullptr);
    ChunkedSampler sampler;
    CountedCallMatchesFree(sampler, t, 1, 4096, "peaked warm-up");
    ASSERT_LT(sampler.nucleus_stats()[0].peak, kSamplerRetainedCandidates);
    EXPECT_EQ(CountedCallMatchesFree(sampler, t, 1, 4096, "peaked"), 0);
    // Retaining nothing (the free functions' policy) frees them each time.
    ChunkedSampler none(/*retained_candidates=*/0);
    CountedCallMatchesFree(none, t, 1, 4096, "peaked, none warm-up");
    EXPECT_GT(CountedCallMatchesFree(none, t, 1, 4096, "peaked, none"), 0);
  }
}

TEST(SamplingParamsTest, ValidationNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(ValidateSamplingParams(p).ok());
  p.n = 0;
  EXPECT_NE(ValidateSamplingParams(p).message().find("n must"),
            std::string::npos);
  p = {};
  p.temperature = -0.5;
  EXPECT_NE(ValidateSamplingParams(p).message().find("temperature"),
            std::string::npos);
  p = {};
  p.top_p = 0.0;
  EXPECT_NE(ValidateSamplingParams(p).message().find("top_p"),
            std::string::npos);
  p.top_p = 1.5;
  EXPECT_THAT(ValidateSamplingParams(p),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "top_p must be in (0, 1], got 1.5"));
  p = {};
  p.repetition_penalty = 0.0;
  EXPECT_NE(ValidateSamplingParams(p).message().find("repetition_penalty"),
            std::string::npos);
}

}  // namespace
}  // namespace verl::infer
