// File: verl/infer/sampler.cc
#include "verl/infer/sampler.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "verl/core/parallel_for.h"
#include "verl/infer/kernels.h"

namespace verl::infer {
namespace {

// Vocabulary chunk of the softmax statistics: the draw and the greedy
// search touch one chunk of logits after the single vectorised pass.
constexpr int64_t kChunk = kSamplerSubChunk;
// Tokens the repetition penalty copies to the stack at a time (16 KiB).
constexpr int64_t kPenaltyGroup = 16 * kChunk;

double UnitFromBits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

// SplitMix64's finaliser: the per-chunk uniforms of one token's draw.
uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

double InvTemperature(const SamplingParams& p) {
  return p.greedy() ? 1.0 : 1.0 / p.temperature;
}

bool UsesTopK(const SamplingParams& p, int64_t vocab) {
  return p.top_k > 0 && p.top_k < vocab;
}

// Buffers of SamplingDistribution's unfiltered row.
struct RowScratch {
  std::vector<float> penalized, chunk_max, chunk_sum, weights;
};

// HF / vLLM repetition penalty of one logit: positive logits divided by the
// penalty, negative ones multiplied.
float Penalize(float x, float pen) { return x > 0 ? x / pen : x * pen; }

// The logits a row samples from: `x` itself, or a copy with the repetition
// penalty applied to every token in `context`. Each penalised value is
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
    scratch->penalized[t] = Penalize(x[t], pen);
  }
  return scratch->penalized.data();
}

// Global softmax constants from per-chunk statistics: the maximum (first
// largest chunk maximum) and log of the normaliser sum_c sum[c] *
// exp((max[c] - max) / T).
struct SoftmaxTotals {
  float max = 0.f;
  double total = 0.0, log_total = 0.0;
};
SoftmaxTotals TotalsFromChunks(const std::vector<float>& chunk_max,
                               const std::vector<float>& chunk_sum,
                               float inv_t) {
  SoftmaxTotals t;
  t.max = *std::max_element(chunk_max.begin(), chunk_max.end());
  for (size_t c = 0; c < chunk_max.size(); ++c) {
    t.total += chunk_sum[c] *
               std::exp(static_cast<double>((chunk_max[c] - t.max) * inv_t));
  }
  t.log_total = std::log(t.total);
  return t;
}

// log_softmax(x / T) of a logit x.
float LogProb(float x, const SoftmaxTotals& t, float inv_t) {
  return static_cast<float>((x - t.max) * inv_t - t.log_total);
}

// One row's softmax over temperature-scaled logits of a whole row
// (SamplingDistribution's unfiltered rows).
class RowSoftmax {
 public:
  RowSoftmax(const float* x, int64_t vocab, float inv_t, RowScratch* s)
      : x_(x), vocab_(vocab), inv_t_(inv_t), s_(s) {
    const int64_t nch = (vocab + kChunk - 1) / kChunk;
    s->chunk_max.resize(nch);
    s->chunk_sum.resize(nch);
    Kernels().chunk_softmax_stats(x, vocab, kChunk, inv_t, s->chunk_max.data(),
                                  s->chunk_sum.data());
    t_ = TotalsFromChunks(s->chunk_max, s->chunk_sum, inv_t);
  }

  double total() const { return t_.total; }
  // Weights of all tokens into scratch->weights.
  const float* AllWeights() const {
    s_->weights.resize(vocab_);
    Kernels().scaled_exp(x_, vocab_, t_.max, inv_t_, s_->weights.data());
    return s_->weights.data();
  }

 private:
  const float* x_;
  int64_t vocab_;
  float inv_t_;
  SoftmaxTotals t_;
  RowScratch* s_;
};

// Inverse-CDF draw with uniform u over items [0, n) in order, weighted by
// weight(i); returns the item index.
template <typename WeightFn>
int64_t InverseCdf(int64_t n, double u, WeightFn weight) {
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += weight(i);
  const double target = u * total;
  double cum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    cum += weight(i);
    if (cum > target) return i;
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    if (weight(i) > 0) return i;
  }
  return 0;
}

// A top-k candidate: logit and token id.
struct Cand {
  float x;
  int64_t id;
};
bool Heavier(const Cand& a, const Cand& b) {
  return a.x > b.x || (a.x == b.x && a.id < b.id);
}

// A nucleus candidate (8 bytes: a flat row may keep the whole vocabulary).
struct NucleusCand {
  float x;
  int32_t id;
};
template <typename C>
bool NucleusHeavier(const C& a, const C& b) {
  return a.x > b.x || (a.x == b.x && a.id < b.id);
}
// One with its weight exp((x - max) / T), once the maximum is known.
struct WeightedCand {
  float x;
  int32_t id;
  float w;
};

// Top-p without top-k streams with a candidate buffer: tokens whose
// temperature-scaled (penalised) logit is within `delta` of the running
// maximum, delta = ln(V / (1 - top_p)) + kNucleusMargin. Why that is exact:
// with M the row's maximum and Z = sum_t exp((x_t - M) / T) >= 1 (the
// maximum weighs 1), a token with (x - M) / T < -delta weighs less than
// e^-delta = e^-margin * (1 - top_p) / V, so all dropped tokens together
// weigh less than e^-margin * (1 - top_p) <= (1 - top_p) * Z. The
// candidates therefore hold more than top_p * Z, and since every candidate
// is heavier than every dropped token, the nucleus (heaviest first, ties
// lower id first, until the mass reaches top_p * Z) lies inside them. A
// token dropped against an earlier, lower running maximum is below the
// final threshold too, so after a last filter against M the candidates are
// exactly {x >= M - delta * T} in id order, however the row was chunked;
// the full-row path runs the same code, so both give the same tokens. The
// margin (e^-2) absorbs the rounding of the float threshold and weights.
constexpr double kNucleusMargin = 2.0;

// Sampling state of one row fed the row's logits in vocabulary order, a
// chunk at a time (RowSampler.Consume), so the row never has to exist in
// full. Per 256-token chunk it keeps the softmax statistics (max, exp-sum);
// besides them:
//  - greedy: a copy of the first chunk holding the maximum;
//  - top-k (with or without top-p): every token at or above the k-th
//    heaviest candidate so far, pruned to k by partial selection;
//  - top-p without top-k: the nucleus candidates (kNucleusMargin), pruned
//    when the buffer has doubled since the last prune and the running
//    maximum has risen since; the nucleus and the draw inside it are then
//    found by quickselect on the candidates' mass (HeaviestPrefix, expected
//    linear), never sorting the vocabulary;
//  - unfiltered draws: the chunk chosen by a sequential weighted reservoir
//    over the chunks' masses (chunk c replaces the choice with probability
//    mass_c / mass_{0..c}, uniform c derived from the token's one generator
//    draw), then an inverse-CDF draw inside it; P(token) = mass_c / total *
//    w_t / mass_c, the softmax.
// The full-logits path (SampleTokens) runs the same class, so both paths
// give the same tokens and log-probs for the same logits.
// A RowSampler is reused across calls (Reset): its buffers keep their
// capacity, except candidate buffers past `retain` candidates, which are
// freed after the draw (ReleaseIfLarge).
class RowSampler {
 public:
  // Starts a row: `p` and `context` must outlive Consume and Finish.
  void Reset(const SamplingParams& p, const std::vector<int64_t>* context,
             int64_t vocab, SeqRng* rng,
             int64_t retain = kSamplerRetainedCandidates) {
    p_ = &p;
    retain_ = retain;
    vocab_ = vocab;
    inv_t_ = static_cast<float>(InvTemperature(p));
    mode_ = p.greedy()           ? Mode::kGreedy
            : UsesTopK(p, vocab) ? Mode::kTopK
            : p.top_p < 1.0      ? Mode::kNucleus
                                 : Mode::kUnfiltered;
    span_ = 0.f;
    if (mode_ == Mode::kNucleus) {
      CHECK_LE(vocab, std::numeric_limits<int32_t>::max());
      const double delta =
          std::log(static_cast<double>(vocab) / (1.0 - p.top_p)) +
          kNucleusMargin;
      span_ = static_cast<float>(delta / inv_t_);
    }
    const int64_t nch = (vocab + kChunk - 1) / kChunk;
    chunk_max_.resize(nch);
    chunk_sum_.resize(nch);
    any_penalized_ = false;
    if (p.repetition_penalty != 1.0 && context != nullptr &&
        !context->empty()) {
      // A bitmap over the vocabulary: its size does not grow with the
      // context, and a token repeated in the context is penalised once.
      penalized_.assign((vocab + 63) / 64, 0);
      for (int64_t t : *context) {
        if (t < 0 || t >= vocab) continue;
        penalized_[t / 64] |= uint64_t{1} << (t % 64);
        any_penalized_ = true;
      }
    }
    draw_ = 0;
    if (mode_ != Mode::kGreedy && rng != nullptr) draw_ = (*rng)();
    keep_c_ = -1;
    kept_.clear();
    cum_ = 0.0;
    ref_ = 0.f;
    cands_.clear();
    threshold_ = -std::numeric_limits<float>::infinity();
    xs_.clear();
    weights_.clear();
    nuc_.clear();
    work_.clear();
    blocks_.clear();
    run_max_ = -std::numeric_limits<float>::infinity();
    pruned_max_ = -std::numeric_limits<float>::infinity();
    pruned_size_ = peak_ = final_ = prunes_ = 0;
  }

  // Logits of tokens [v0, v0 + n) (v0 a multiple of 256). Penalised
  // tokens are penalised in a copy on the stack, up to 4096 tokens at a
  // time (each value from the original logit), so the caller's logits stay
  // as they are and nothing is allocated.
  void Consume(const float* seg, int64_t v0, int64_t n) {
    CHECK_EQ(v0 % kChunk, 0);
    if (!AnyPenalized(v0, v0 + n)) {
      Absorb(seg, v0, n);
      return;
    }
    const float pen = static_cast<float>(p_->repetition_penalty);
    float copy[kPenaltyGroup];
    for (int64_t g0 = 0; g0 < n; g0 += kPenaltyGroup) {
      const int64_t len = std::min(kPenaltyGroup, n - g0), t0 = v0 + g0;
      const float* x = seg + g0;
      if (AnyPenalized(t0, t0 + len)) {
        std::copy(x, x + len, copy);
        for (int64_t w = t0 / 64; w * 64 < t0 + len; ++w) {
          for (uint64_t bits = penalized_[w]; bits != 0; bits &= bits - 1) {
            const int64_t i = w * 64 + __builtin_ctzll(bits) - t0;
            copy[i] = Penalize(x[i], pen);
          }
        }
        x = copy;
      }
      Absorb(x, t0, len);
    }
  }

  // The token and its log-probability once every chunk was consumed.
  SampledToken Finish() {
    const SoftmaxTotals t = TotalsFromChunks(chunk_max_, chunk_sum_, inv_t_);
    auto logprob = [&](float x) { return LogProb(x, t, inv_t_); };
    switch (mode_) {
      case Mode::kGreedy: {
        // First maximum of the (penalised) logits; NaN rows give token 0.
        for (size_t i = 0; i < kept_.size(); ++i) {
          if (kept_[i] == t.max) {
            return {keep_c_ * kChunk + static_cast<int64_t>(i),
                    logprob(kept_[i])};
          }
        }
        return {0, std::numeric_limits<float>::quiet_NaN()};
      }
      case Mode::kUnfiltered: {
        if (keep_c_ < 0) return {0, std::numeric_limits<float>::quiet_NaN()};
        const int64_t n = static_cast<int64_t>(kept_.size());
        weights_.resize(n);
        Kernels().scaled_exp(kept_.data(), n, chunk_max_[keep_c_], inv_t_,
                             weights_.data());
        const int64_t i =
            InverseCdf(n, SamplerUniform(draw_, -1),
                       [&](int64_t j) { return double{weights_[j]}; });
        return {keep_c_ * kChunk + i, logprob(kept_[i])};
      }
      case Mode::kTopK: {
        const int64_t n = FilteredCandidates(t);
        const double u = UnitFromBits(draw_);
        const int64_t i =
            p_->top_p < 1.0
                ? InverseCdf(n, u,
                             [&](int64_t j) { return double{weights_[j]}; })
                : InverseCdf(n, u, [&](int64_t j) {
                    return std::exp(
                        static_cast<double>((cands_[j].x - t.max) * inv_t_));
                  });
        const SampledToken out{cands_[i].id, logprob(cands_[i].x)};
        ReleaseIfLarge(&cands_);
        ReleaseIfLarge(&xs_);
        ReleaseIfLarge(&weights_);
        return out;
      }
      case Mode::kNucleus: {
        double mass = 0.0;
        const int64_t n = NucleusCandidates(t, &mass);
        if (n == 0) return {0, std::numeric_limits<float>::quiet_NaN()};
        // Inverse CDF in heaviness order: the first token whose cumulative
        // weight exceeds u * mass (rounding: the lightest), searched only in
        // the settled range of the nucleus search that holds it.
        const double target = UnitFromBits(draw_) * mass;
        int64_t lo = 0, hi = n;
        double acc = 0.0;
        for (const Block& b : blocks_) {
          if (b.cum > target) {
            hi = b.end;
            break;
          }
          lo = b.end;
          acc = b.cum;
        }
        double cum = 0.0;
        int64_t i =
            lo < hi ? HeaviestPrefix(lo, hi, acc, target, true, &cum, nullptr)
                    : 0;
        if (i > 0) {
          --i;
        } else {
          i = std::min_element(
                  work_.begin(), work_.begin() + n,
                  [](const WeightedCand& a, const WeightedCand& b) {
                    return NucleusHeavier(b, a);
                  }) -
              work_.begin();
        }
        const SampledToken out{work_[i].id, logprob(work_[i].x)};
        ReleaseIfLarge(&work_);
        return out;
      }
    }
    return {0, 0.f};
  }

  // Top-p rows after Finish's totals: the nucleus, the n heaviest
  // candidates (in no particular order), in work_[0, n) with their float
  // weights exp((x - max) / T) (the draw's and SamplingDistribution's) and
  // their mass in *mass. Returns n.
  int64_t NucleusCandidates(const SoftmaxTotals& t, double* mass) {
    // The last filter, against the row's maximum (see kNucleusMargin).
    const float thr = t.max - span_;
    nuc_.erase(
        std::remove_if(nuc_.begin(), nuc_.end(),
                       [thr](const NucleusCand& c) { return !(c.x >= thr); }),
        nuc_.end());
    final_ = static_cast<int64_t>(nuc_.size());
    const int64_t size = final_;
    xs_.resize(size);
    weights_.resize(size);
    for (int64_t i = 0; i < size; ++i) xs_[i] = nuc_[i].x;
    Kernels().scaled_exp(xs_.data(), size, t.max, inv_t_, weights_.data());
    work_.resize(size);
    for (int64_t i = 0; i < size; ++i) {
      work_[i] = {nuc_[i].x, nuc_[i].id, weights_[i]};
    }
    ReleaseIfLarge(&nuc_);  // a flat row's is the vocabulary
    ReleaseIfLarge(&xs_);
    ReleaseIfLarge(&weights_);
    *mass = 0.0;
    blocks_.clear();
    if (size == 0) return 0;
    const int64_t n = HeaviestPrefix(0, size, 0.0, p_->top_p * t.total, false,
                                     mass, &blocks_);
    if (n > 0) return n;
    // All candidates short of top_p * Z: only float rounding (Z and the
    // weights are float sums) or a non-finite row may do that.
    CHECK(!(t.total > 0 && std::isfinite(t.total)) ||
          *mass >= p_->top_p * t.total - 1e-4 * t.total)
        << "nucleus candidates hold " << *mass << " of Z = " << t.total
        << " < top_p * Z";
    return size;  // keep all candidates
  }

  const std::vector<WeightedCand>& nucleus() const { return work_; }

  NucleusBufferStats nucleus_stats() const { return {peak_, final_, prunes_}; }

  // Top-k rows after Finish's totals: the top-k (then top-p) candidates,
  // heaviest first, in cands_[0, n); with top-p their float weights
  // exp((x - max) / T) in weights_. Returns n.
  int64_t FilteredCandidates(const SoftmaxTotals& t) {
    const int64_t k = p_->top_k;
    if (static_cast<int64_t>(cands_.size()) > k) {
      std::nth_element(cands_.begin(), cands_.begin() + (k - 1), cands_.end(),
                       Heavier);
      cands_.resize(k);
    }
    std::sort(cands_.begin(), cands_.end(), Heavier);
    const int64_t n = static_cast<int64_t>(cands_.size());
    if (p_->top_p >= 1.0) return n;
    xs_.resize(n);
    weights_.resize(n);
    for (int64_t i = 0; i < n; ++i) xs_[i] = cands_[i].x;
    Kernels().scaled_exp(xs_.data(), n, t.max, inv_t_, weights_.data());
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) total += weights_[i];
    double cum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      cum += weights_[i];
      if (cum >= p_->top_p * total) return i + 1;
    }
    return n;  // rounding: keep all candidates
  }

  SoftmaxTotals Totals() const {
    return TotalsFromChunks(chunk_max_, chunk_sum_, inv_t_);
  }
  const std::vector<Cand>& candidates() const { return cands_; }

 private:
  enum class Mode { kGreedy, kTopK, kNucleus, kUnfiltered };

  // Tokens [v0, v0 + n) with any penalty applied: the statistics in one
  // vectorised pass (per 256-token sub-chunk, so any split gives the same
  // values), then each sub-chunk's mode step.
  void Absorb(const float* x, int64_t v0, int64_t n) {
    const int64_t c0 = v0 / kChunk;
    Kernels().chunk_softmax_stats(x, n, kChunk, inv_t_, &chunk_max_[c0],
                                  &chunk_sum_[c0]);
    for (int64_t i0 = 0; i0 < n; i0 += kChunk) {
      Step(c0 + i0 / kChunk, x + i0, std::min(kChunk, n - i0));
    }
  }

  // Whether a token of [t0, t1) (t0 a multiple of 64) is penalised.
  bool AnyPenalized(int64_t t0, int64_t t1) const {
    if (!any_penalized_) return false;
    for (int64_t w = t0 / 64; w * 64 < t1; ++w) {
      if (penalized_[w] != 0) return true;
    }
    return false;
  }

  // Sub-chunk c's (penalised) logits, once its statistics are in.
  void Step(int64_t c, const float* sub, int64_t len) {
    switch (mode_) {
      case Mode::kGreedy:
        if (keep_c_ < 0 || chunk_max_[c] > chunk_max_[keep_c_]) {
          Keep(c, sub, len);
        }
        break;
      case Mode::kUnfiltered:
        ReservoirStep(c, sub, len);
        break;
      case Mode::kTopK: {
        const float thr = threshold_;  // Prune moves it after the scan
        if (!(chunk_max_[c] >= thr)) break;
        for (int64_t i = 0; i < len; ++i) {
          if (sub[i] >= thr) cands_.push_back({sub[i], c * kChunk + i});
        }
        if (static_cast<int64_t>(cands_.size()) >= 2 * p_->top_k + kChunk) {
          Prune();
        }
        break;
      }
      case Mode::kNucleus:
        NucleusStep(c, sub, len);
        break;
    }
  }

  // Frees a candidate buffer that grew past the retained size (a flat
  // row's can be the vocabulary); smaller ones keep their room.
  template <typename T>
  void ReleaseIfLarge(std::vector<T>* v) const {
    if (static_cast<int64_t>(v->capacity()) > retain_) {
      std::vector<T>().swap(*v);
    }
  }

  // Over work_[lo, hi), after heavier candidates of weight `acc` (not
  // reaching `target`): the smallest c in (lo, hi] such that acc plus the
  // weights of the c - lo heaviest of work_[lo, hi) reach target (exceed it
  // with `strict`), or 0 if none does. Leaves the c-th heaviest at c - 1
  // with every heavier one before it, and acc plus their weights in *cum
  // (plus all of them if none reached). Expected O(hi - lo): quickselect by
  // the mass of the heavier side (median-of-three pivot, one partition pass
  // summing that side's weights; nth_element halving after 64 levels), a
  // sort of the last <= 64. With `blocks`, appends the settled ranges
  // before the answer as (end, cumulative weight), each heavier than all
  // after it, so the draw can skip to its range. Every sum runs in an order
  // that depends only on work_'s order on entry (id order: the same on
  // both paths).
  struct Block {
    int64_t end;
    double cum;
  };
  int64_t HeaviestPrefix(int64_t lo, int64_t hi, double acc, double target,
                         bool strict, double* cum, std::vector<Block>* blocks) {
    auto reached = [&](double m) { return strict ? m > target : m >= target; };
    auto heavier = [](const WeightedCand& a, const WeightedCand& b) {
      return NucleusHeavier(a, b);
    };
    WeightedCand* a = work_.data();
    for (int depth = 0; hi - lo > 64; ++depth) {
      int64_t k = lo;
      double m = 0.0;
      if (depth < 64) {
        const int64_t i0 = lo, i1 = lo + (hi - lo) / 2, i2 = hi - 1;
        int64_t p;
        if (heavier(a[i0], a[i1])) {
          p = heavier(a[i1], a[i2]) ? i1 : heavier(a[i0], a[i2]) ? i2 : i0;
        } else {
          p = heavier(a[i0], a[i2]) ? i0 : heavier(a[i1], a[i2]) ? i2 : i1;
        }
        std::swap(a[p], a[hi - 1]);
        const WeightedCand pivot = a[hi - 1];
        for (int64_t i = lo; i < hi - 1; ++i) {
          if (heavier(a[i], pivot)) {
            m += a[i].w;
            std::swap(a[i], a[k++]);
          }
        }
        std::swap(a[k], a[hi - 1]);
      } else {  // guaranteed linear
        k = lo + (hi - lo) / 2;
        std::nth_element(a + lo, a + k, a + hi, heavier);
        for (int64_t i = lo; i < k; ++i) m += a[i].w;
      }
      // a[lo, k) are heavier than a[k], the heaviest of a[k, hi).
      if (k > lo && reached(acc + m)) {
        hi = k;
        continue;
      }
      acc += m;
      if (blocks != nullptr && k > lo) blocks->push_back({k, acc});
      acc += a[k].w;
      if (reached(acc)) {
        *cum = acc;
        return k + 1;
      }
      lo = k + 1;
      if (blocks != nullptr) blocks->push_back({lo, acc});
    }
    std::sort(a + lo, a + hi, heavier);
    for (int64_t i = lo; i < hi; ++i) {
      acc += a[i].w;
      if (reached(acc)) {
        *cum = acc;
        return i + 1;
      }
    }
    *cum = acc;
    return 0;
  }

  // Top-p: adds the sub-chunk's tokens within span_ of the running maximum.
  void NucleusStep(int64_t c, const float* sub, int64_t len) {
    const float m = chunk_max_[c];
    if (m > run_max_) run_max_ = m;
    const float thr = run_max_ - span_;
    if (!(m >= thr)) return;
    const int32_t base = static_cast<int32_t>(c * kChunk);
    for (int64_t i = 0; i < len; ++i) {
      if (sub[i] >= thr)
        nuc_.push_back({sub[i], base + static_cast<int32_t>(i)});
    }
    const int64_t size = static_cast<int64_t>(nuc_.size());
    peak_ = std::max(peak_, size);
    // Amortised O(1) per token: only once the buffer has doubled, and only
    // if the threshold has risen since the last prune (else none would go).
    if (size >= 2 * pruned_size_ + kChunk && run_max_ > pruned_max_) {
      nuc_.erase(
          std::remove_if(nuc_.begin(), nuc_.end(),
                         [thr](const NucleusCand& x) { return !(x.x >= thr); }),
          nuc_.end());
      pruned_size_ = static_cast<int64_t>(nuc_.size());
      pruned_max_ = run_max_;
      ++prunes_;
    }
  }

  void Keep(int64_t c, const float* sub, int64_t len) {
    keep_c_ = c;
    kept_.assign(sub, sub + len);
  }

  // Chunk c joins the reservoir with mass sum[c] * exp((max[c] - ref) / T)
  // relative to the running reference maximum `ref`.
  void ReservoirStep(int64_t c, const float* sub, int64_t len) {
    const float m = chunk_max_[c];
    const double s = chunk_sum_[c];
    if (!(s > 0)) return;  // no mass (all -inf) or NaN
    if (cum_ == 0.0) {
      ref_ = m;
    } else if (m > ref_) {
      cum_ *= std::exp(static_cast<double>((ref_ - m) * inv_t_));
      ref_ = m;
    }
    const double mass = s * std::exp(static_cast<double>((m - ref_) * inv_t_));
    cum_ += mass;
    if (SamplerUniform(draw_, c) * cum_ < mass) Keep(c, sub, len);
  }

  // Keeps the k heaviest candidates; later tokens must reach the k-th.
  void Prune() {
    const int64_t k = p_->top_k;
    std::nth_element(cands_.begin(), cands_.begin() + (k - 1), cands_.end(),
                     Heavier);
    cands_.resize(k);
    threshold_ = cands_[k - 1].x;  // the lightest of the k
  }

  const SamplingParams* p_;
  int64_t retain_ = kSamplerRetainedCandidates;
  int64_t vocab_;
  float inv_t_;
  Mode mode_;
  uint64_t draw_ = 0;
  // Context tokens (penalty != 1): bit t % 64 of word t / 64.
  std::vector<uint64_t> penalized_;
  bool any_penalized_ = false;
  std::vector<float> chunk_max_, chunk_sum_;
  // Greedy / unfiltered: the kept chunk's index and (penalised) logits.
  int64_t keep_c_ = -1;
  std::vector<float> kept_;
  double cum_ = 0.0;  // reservoir mass so far, relative to ref_
  float ref_ = 0.f;
  // Top-k candidates and the bound a token must reach to join them.
  std::vector<Cand> cands_;
  float threshold_ = -std::numeric_limits<float>::infinity();
  std::vector<float> xs_, weights_;
  // Top-p: the candidates (id order until Finish), their logit span
  // delta * T, the running maximum, and the buffer at the last prune.
  std::vector<NucleusCand> nuc_;
  std::vector<WeightedCand> work_;  // Finish: the candidates with weights
  std::vector<Block> blocks_;       // the nucleus search's settled ranges
  float span_ = 0.f;
  float run_max_ = -std::numeric_limits<float>::infinity();
  float pruned_max_ = -std::numeric_limits<float>::infinity();
  int64_t pruned_size_ = 0, peak_ = 0, final_ = 0, prunes_ = 0;
};

void CheckRow(const SampleRow& row) {
  CHECK(row.params != nullptr) << "row without sampling params";
  CHECK(row.params->greedy() || row.rng != nullptr) << "sampled row has no rng";
}

}  // namespace

SeqRng MakeSequenceRng(uint64_t seed, int64_t index) {
  std::seed_seq seq{static_cast<uint32_t>(seed),
                    static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(index),
                    static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32)};
  return SeqRng(seq);
}

double SamplerUniform(uint64_t draw, int64_t index) {
  return UnitFromBits(Mix64(draw ^ Mix64(static_cast<uint64_t>(index) + 1)));
}

// Every buffer only grows (never shrinks with fewer rows), so a warm
// workspace serves any call with as many rows or fewer.
struct ChunkedSampler::State {
  std::vector<RowSampler> samplers;
  std::vector<float> buf;  // one logits chunk, [rows, chunk]
  std::vector<SampledToken> out;
  std::vector<NucleusBufferStats> stats;
  int64_t retain = kSamplerRetainedCandidates;
  int64_t rows = 0;  // of the last call

  // Resets the first rows.size() samplers for `rows`.
  void Start(int64_t vocab, absl::Span<const SampleRow> rows_in) {
    CHECK_GT(vocab, 0);
    rows = static_cast<int64_t>(rows_in.size());
    if (static_cast<int64_t>(samplers.size()) < rows) samplers.resize(rows);
    if (static_cast<int64_t>(out.size()) < rows) out.resize(rows);
    if (static_cast<int64_t>(stats.size()) < rows) stats.resize(rows);
    for (int64_t r = 0; r < rows; ++r) {
      const SampleRow& row = rows_in[r];
      CheckRow(row);
      samplers[r].Reset(*row.params, row.context, vocab, row.rng, retain);
    }
  }

  absl::Span<const SampledToken> Done() {
    for (int64_t r = 0; r < rows; ++r) stats[r] = samplers[r].nucleus_stats();
    return absl::MakeConstSpan(out.data(), rows);
  }
};

ChunkedSampler::ChunkedSampler(int64_t retained_candidates)
    : state_(std::make_unique<State>()) {
  CHECK_GE(retained_candidates, 0);
  state_->retain = retained_candidates;
}
ChunkedSampler::~ChunkedSampler() = default;
ChunkedSampler::ChunkedSampler(ChunkedSampler&&) noexcept = default;
ChunkedSampler& ChunkedSampler::operator=(ChunkedSampler&&) noexcept = default;

absl::Span<const SampledToken> ChunkedSampler::Sample(
    int64_t vocab, LogitChunkFn fill, absl::Span<const SampleRow> rows,
    int64_t chunk) {
  CHECK(chunk > 0 && chunk % kSamplerSubChunk == 0)
      << "chunk " << chunk << " is not a multiple of " << kSamplerSubChunk;
  State& s = *state_;
  s.Start(vocab, rows);
  const int64_t b = s.rows;
  chunk = std::min(chunk, (vocab + kSamplerSubChunk - 1) / kSamplerSubChunk *
                              kSamplerSubChunk);
  if (static_cast<int64_t>(s.buf.size()) < b * chunk) s.buf.resize(b * chunk);
  float* buf = s.buf.data();
  RowSampler* samplers = s.samplers.data();
  // Rows per task: ~32K logits (a chunk's rows are few; both threads
  // should share a step's 64 rows).
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 15) / chunk);
  for (int64_t v0 = 0; v0 < vocab; v0 += chunk) {
    const int64_t n = std::min(chunk, vocab - v0);
    fill(v0, v0 + n, buf);
    core::ParallelFor(0, b, grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        samplers[r].Consume(buf + r * n, v0, n);
      }
    });
  }
  SampledToken* out = s.out.data();
  // A flat top-p row's nucleus sorts up to the vocabulary: one row a task.
  core::ParallelFor(0, b, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) out[r] = samplers[r].Finish();
  });
  return s.Done();
}

absl::Span<const SampledToken> ChunkedSampler::SampleLogits(
    const float* logits, int64_t vocab, absl::Span<const SampleRow> rows) {
  State& s = *state_;
  s.Start(vocab, rows);
  RowSampler* samplers = s.samplers.data();
  SampledToken* out = s.out.data();
  // Rows per task: enough work (~256K logits) to pay for a parallel region.
  const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 18) / vocab);
  core::ParallelFor(0, s.rows, grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      samplers[r].Consume(logits + r * vocab, 0, vocab);
      out[r] = samplers[r].Finish();
    }
  });
  return s.Done();
}

absl::Span<const NucleusBufferStats> ChunkedSampler::nucleus_stats() const {
  return absl::MakeConstSpan(state_->stats.data(), state_->rows);
}

std::vector<SampledToken> SampleTokens(const at::Tensor& logits,
                                       absl::Span<const SampleRow> rows) {
  CHECK_EQ(logits.dim(), 2);
  CHECK_EQ(logits.size(0), static_cast<int64_t>(rows.size()));
  const at::Tensor x = logits.to(at::kFloat).contiguous();
  ChunkedSampler sampler(/*retained_candidates=*/0);  // used once
  const auto out = sampler.SampleLogits(x.data_ptr<float>(), x.size(1), rows);
  return {out.begin(), out.end()};
}

std::vector<SampledToken> SampleTokensChunked(
    int64_t vocab, LogitChunkFn fill, absl::Span<const SampleRow> rows,
    int64_t chunk, std::vector<NucleusBufferStats>* nucleus_stats) {
  ChunkedSampler sampler(/*retained_candidates=*/0);  // used once
  const auto out = sampler.Sample(vocab, fill, rows, chunk);
  if (nucleus_stats != nullptr) {
    nucleus_stats->assign(sampler.nucleus_stats().begin(),
                          sampler.nucleus_stats().end());
  }
  return {out.begin(), out.end()};
}

std::vector<double> SamplingDistribution(const float* logits, int64_t vocab,
                                         const SamplingParams& params,
                                         const std::vector<int64_t>* context) {
  RowScratch scratch;
  std::vector<double> probs(vocab, 0.0);
  RowSampler s;
  s.Reset(params, context, vocab, nullptr);
  s.Consume(logits, 0, vocab);
  if (params.greedy()) {
    probs[s.Finish().token] = 1.0;
    return probs;
  }
  const SoftmaxTotals t = s.Totals();
  const float inv_t = static_cast<float>(InvTemperature(params));
  if (UsesTopK(params, vocab)) {
    const int64_t n = s.FilteredCandidates(t);
    double total = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      total += probs[s.candidates()[i].id] =
          std::exp(static_cast<double>((s.candidates()[i].x - t.max) * inv_t));
    }
    for (int64_t i = 0; i < n; ++i) probs[s.candidates()[i].id] /= total;
    return probs;
  }
  if (params.top_p < 1.0) {
    // The weights the draw uses, renormalised over the nucleus.
    double mass = 0.0;
    const int64_t n = s.NucleusCandidates(t, &mass);
    for (int64_t i = 0; i < n; ++i) {
      probs[s.nucleus()[i].id] = s.nucleus()[i].w / mass;
    }
    return probs;
  }
  const float* x = PenalizedLogits(logits, vocab, params, context, &scratch);
  const RowSoftmax sm(x, vocab, inv_t, &scratch);
  const float* w = sm.AllWeights();
  for (int64_t i = 0; i < vocab; ++i) probs[i] = w[i] / sm.total();
  return probs;
}

}  // namespace verl::infer
