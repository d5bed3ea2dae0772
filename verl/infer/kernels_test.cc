// File: verl/infer/kernels_test.cc
//
// Every ISA variant this CPU can run against double-precision references
// (and so against each other): decode attention over a paged cache, RMSNorm,
// RoPE, the sampler's softmax statistics, the small-batch and panel GEMMs.
#include "verl/infer/kernels.h"

#include <glog/logging.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <tuple>
#include <vector>

namespace verl::infer {
namespace {

std::vector<const KernelTable*> AvailableTables() {
  std::vector<const KernelTable*> out;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (const KernelTable* t = KernelsFor(isa)) out.push_back(t);
  }
  return out;
}

std::vector<float> Random(int64_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

TEST(KernelsTest, DispatchPicksTheActiveIsa) {
  EXPECT_EQ(Kernels().isa, ActiveCpuIsa());
  ASSERT_NE(KernelsFor(CpuIsa::kBaseline), nullptr);
  EXPECT_TRUE(CpuSupports(CpuIsa::kBaseline));
  for (const KernelTable* t : AvailableTables())
    EXPECT_TRUE(CpuSupports(t->isa));
  LOG(INFO) << "detected " << CpuIsaName(DetectCpuIsa()) << ", active "
            << CpuIsaName(ActiveCpuIsa());
}

struct AttnCase {
  int64_t head_dim, num_heads, num_kv_heads, block_size, window;
};

// Paged decode attention of a few sequences (random block tables, lengths
// across block boundaries) against a double reference.
void CheckAttention(const AttnCase& c) {
  std::mt19937 rng(11);
  const int64_t d = c.head_dim, nkv = c.num_kv_heads, bs = c.block_size;
  const std::vector<int64_t> lens = {1, bs - 1, bs, bs + 1, 3 * bs + 2, 77};
  const int64_t width = (77 + bs - 1) / bs + 1;
  const int64_t num_blocks = static_cast<int64_t>(lens.size()) * width;
  std::vector<int32_t> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const int64_t n = static_cast<int64_t>(lens.size());
  std::vector<int32_t> tables(ids.begin(), ids.begin() + n * width);
  std::vector<float> k = Random(num_blocks * bs * nkv * d, rng);
  std::vector<float> v = Random(num_blocks * bs * nkv * d, rng);
  const int64_t q_stride = (c.num_heads + 2 * nkv) * d;  // as in a qkv buffer
  std::vector<float> q = Random(n * q_stride, rng, 2.f);
  std::vector<int64_t> rows(n);
  std::iota(rows.begin(), rows.end(), 0);

  DecodeAttentionArgs a;
  a.block_size = bs;
  a.num_kv_heads = nkv;
  a.head_dim = d;
  a.num_heads = c.num_heads;
  a.window = c.window;
  a.q_stride = q_stride;
  a.scale = 1.f / std::sqrt(static_cast<float>(d));
  a.q = q.data();
  a.k = k.data();
  a.v = v.data();
  a.rows = rows.data();
  a.lens = lens.data();
  a.tables = tables.data();
  a.table_width = width;

  // Reference.
  const int64_t group = c.num_heads / nkv;
  std::vector<double> want(n * c.num_heads * d, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t len = lens[j];
    const int64_t lo = c.window > 0 ? std::max<int64_t>(0, len - c.window) : 0;
    for (int64_t hq = 0; hq < c.num_heads; ++hq) {
      const int64_t h = hq / group;
      auto at = [&](const std::vector<float>& x, int64_t p, int64_t i) {
        const int64_t slot = tables[j * width + p / bs] * bs + p % bs;
        return static_cast<double>(x[(slot * nkv + h) * d + i]);
      };
      std::vector<double> s;
      for (int64_t p = lo; p < len; ++p) {
        double dot = 0;
        for (int64_t i = 0; i < d; ++i) {
          dot += q[j * q_stride + hq * d + i] * at(k, p, i);
        }
        s.push_back(dot / std::sqrt(static_cast<double>(d)));
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += x = std::exp(x - mx);
      for (int64_t p = lo; p < len; ++p) {
        for (int64_t i = 0; i < d; ++i) {
          want[(j * c.num_heads + hq) * d + i] += s[p - lo] / z * at(v, p, i);
        }
      }
    }
  }
  for (const KernelTable* t : AvailableTables()) {
    std::vector<float> out(n * c.num_heads * d, -1.f);
    a.out = out.data();
    t->decode_attention(a, 0, n * nkv);
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      worst = std::max(worst, std::abs(out[i] - want[i]));
    }
    EXPECT_LE(worst, 1e-5) << CpuIsaName(t->isa) << " head_dim " << d
                           << " heads " << c.num_heads << "/" << nkv
                           << " block " << bs << " window " << c.window;
  }
}

TEST(KernelsTest, DecodeAttentionMatchesReferenceOnEveryIsa) {
  // Register-blocked head dims (64, 128, 48 on some ISAs) and the scalar
  // fallback (8, 20); GQA groups 1, 2, 4, 7 (split 4 + 3); sliding window.
  for (const AttnCase& c : std::vector<AttnCase>{{64, 8, 4, 16, 0},
                                                 {64, 8, 2, 16, 0},
                                                 {128, 4, 4, 16, 0},
                                                 {64, 14, 2, 16, 0},
                                                 {48, 4, 2, 5, 0},
                                                 {64, 8, 4, 16, 20},
                                                 {8, 4, 2, 4, 3},
                                                 {20, 2, 1, 3, 0}}) {
    CheckAttention(c);
  }
}

TEST(KernelsTest, RmsNormAndRopeMatchReferenceOnEveryIsa) {
  std::mt19937 rng(3);
  for (int64_t n : {1, 7, 16, 64, 100, 512, 896}) {
    const std::vector<float> x = Random(n, rng), w = Random(n, rng);
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double r = 1.0 / std::sqrt(ss / n + 1e-6);
    for (const KernelTable* t : AvailableTables()) {
      std::vector<float> out(n);
      t->rms_norm_row(x.data(), w.data(), 1e-6f, n, out.data());
      for (int64_t i = 0; i < n; ++i) {
        EXPECT_NEAR(out[i], w[i] * x[i] * r, 1e-5 * (1 + std::abs(out[i])))
            << CpuIsaName(t->isa) << " n " << n << " i " << i;
      }
    }
  }
  for (int64_t d : {8, 20, 48, 64, 128}) {
    const std::vector<float> x = Random(d, rng), c = Random(d, rng),
                             s = Random(d, rng);
    for (const KernelTable* t : AvailableTables()) {
      std::vector<float> y = x;
      t->rope_head(y.data(), c.data(), s.data(), d);
      for (int64_t i = 0; i < d / 2; ++i) {
        const double a = x[i], b = x[i + d / 2];
        EXPECT_NEAR(y[i], a * c[i] - b * s[i], 1e-5);
        EXPECT_NEAR(y[i + d / 2], b * c[i + d / 2] + a * s[i + d / 2], 1e-5);
      }
    }
  }
}

// exp of the fp32 argument the kernels form (its rounding, not exp's error,
// dominates far from the maximum).
double Exp(float x, float m, float inv_t) { return std::exp((x - m) * inv_t); }

TEST(KernelsTest, SoftmaxStatsMatchReferenceOnEveryIsa) {
  std::mt19937 rng(5);
  for (int64_t n : {1, 5, 256, 1000, 8192 + 3}) {
    const std::vector<float> x = Random(n, rng, 4.f);
    for (float inv_t : {1.f, 1.f / 0.7f}) {
      const int64_t chunk = 256, nch = (n + chunk - 1) / chunk;
      const double mx = *std::max_element(x.begin(), x.end());
      for (const KernelTable* t : AvailableTables()) {
        std::vector<float> cmax(nch), csum(nch), w(n);
        t->chunk_softmax_stats(x.data(), n, chunk, inv_t, cmax.data(),
                               csum.data());
        for (int64_t c = 0; c < nch; ++c) {
          const int64_t lo = c * chunk, hi = std::min(n, lo + chunk);
          const double m = *std::max_element(x.begin() + lo, x.begin() + hi);
          double s = 0;
          for (int64_t i = lo; i < hi; ++i) s += Exp(x[i], m, inv_t);
          EXPECT_EQ(cmax[c], m);
          EXPECT_NEAR(csum[c], s, 1e-6 * s) << CpuIsaName(t->isa);
        }
        const double total =
            t->scaled_exp(x.data(), n, static_cast<float>(mx), inv_t, w.data());
        double want_total = 0;
        for (int64_t i = 0; i < n; ++i) {
          const double e = Exp(x[i], mx, inv_t);
          want_total += e;
          EXPECT_NEAR(w[i], e, 1e-6 * (e + 1e-30)) << CpuIsaName(t->isa);
        }
        EXPECT_NEAR(total, want_total, 1e-6 * want_total);
      }
    }
  }
}

// out (+)= x w (+ bias) against a double reference; w is [n, k] when `nt`
// (the nn.Linear layout), else [k, n]; mode 0 plain, 1 bias, 2 accumulate.
std::vector<double> GemmReference(const std::vector<float>& x,
                                  const std::vector<float>& w,
                                  const std::vector<float>& bias,
                                  const std::vector<float>& init, int64_t m,
                                  int64_t k, int64_t n, bool nt, int mode) {
  std::vector<double> want(m * n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double y = mode == 1 ? bias[c] : mode == 2 ? init[r * n + c] : 0;
      for (int64_t i = 0; i < k; ++i) {
        y += double(x[r * k + i]) * (nt ? w[c * k + i] : w[i * n + c]);
      }
      want[r * n + c] = y;
    }
  }
  return want;
}

double WorstError(const std::vector<float>& out,
                  const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    worst = std::max(worst, std::abs(out[i] - want[i]));
  }
  return worst;
}

// The small-batch GEMM (bias, accumulate, split column ranges) against a
// double reference.
TEST(KernelsTest, SmallGemmMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(8);
  for (int64_t m = 1; m <= kMaxSmallGemmRows; ++m) {
    for (auto [k, n] : std::vector<std::pair<int64_t, int64_t>>{
             {64, 1024}, {100, 40}, {512, 200}}) {
      const std::vector<float> x = Random(m * k, rng), w = Random(k * n, rng),
                               bias = Random(n, rng), init = Random(m * n, rng);
      for (int mode = 0; mode < 3; ++mode) {  // plain, bias, accumulate
        const std::vector<double> want =
            GemmReference(x, w, bias, init, m, k, n, /*nt=*/true, mode);
        for (const KernelTable* t : AvailableTables()) {
          std::vector<float> out = init;
          SmallGemmArgs a;
          a.m = m;
          a.k = k;
          a.x = x.data();
          a.ldx = k;
          a.w = w.data();
          a.ldw = k;
          a.bias = mode == 1 ? bias.data() : nullptr;
          a.out = out.data();
          a.ldo = n;
          a.accumulate = mode == 2;
          t->small_gemm_nt(a, 0, n / 3);  // two column ranges, as parallel
          t->small_gemm_nt(a, n / 3, n);  // callers do
          EXPECT_LE(WorstError(out, want), 1e-4)
              << CpuIsaName(t->isa) << " m " << m << " k " << k << " n " << n
              << " mode " << mode;
        }
      }
    }
  }
}

// The panel GEMM over weights packed from two [n_i, k] sources (as the
// engine concatenates q/k/v), at row counts across the row blocks and
// super-blocks, column counts off the panel width, bias / accumulate, split
// panel ranges; against a double reference, and each row bit-equal to the
// same row computed alone (the value does not depend on the batch).
TEST(KernelsTest, PanelGemmMatchesReferenceOnEveryIsa) {
  std::mt19937 rng(9);
  for (auto [k, n0, n1] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {64, 32, 96}, {100, 7, 30}, {1408, 40, 24}, {3, 17, 0}}) {
    const int64_t n = n0 + n1;
    const std::vector<float> w = Random(n * k, rng);  // [n, k]
    std::vector<float> panels(PanelGemmFloats(k, n), 0.f);
    // Source 0: rows [0, n0) packed in two row ranges; source 1: the rest.
    PackRowsIntoPanels(w.data(), k, 0, 0, n0 / 2, panels.data());
    PackRowsIntoPanels(w.data(), k, 0, n0 / 2, n0, panels.data());
    PackRowsIntoPanels(w.data() + n0 * k, k, n0, 0, n1, panels.data());
    for (int64_t m : {1, 5, 12, 13, 64, 131}) {
      const std::vector<float> x = Random(m * k, rng), bias = Random(n, rng),
                               init = Random(m * n, rng);
      for (int mode = 0; mode < 3; ++mode) {
        const std::vector<double> want =
            GemmReference(x, w, bias, init, m, k, n, /*nt=*/true, mode);
        for (const KernelTable* t : AvailableTables()) {
          auto run = [&](int64_t rows, const float* xp, float* op) {
            std::vector<float> xpack(rows * k);
            PanelGemmArgs a;
            a.m = rows;
            a.k = k;
            a.n = n;
            a.x = xp;
            a.ldx = k;
            a.xpack = xpack.data();
            a.w = panels.data();
            a.bias = mode == 1 ? bias.data() : nullptr;
            a.out = op;
            a.ldo = n;
            a.accumulate = mode == 2;
            const int64_t blocks = t->panel_row_blocks(rows);
            t->panel_pack_x(a, 0, blocks / 2);  // split as parallel callers
            t->panel_pack_x(a, blocks / 2, blocks);
            const int64_t p = (n + kGemmPanel - 1) / kGemmPanel;
            t->panel_gemm(a, 0, p / 2);
            t->panel_gemm(a, p / 2, p);
          };
          std::vector<float> out = init;
          run(m, x.data(), out.data());
          EXPECT_LE(WorstError(out, want), 1e-4 * std::sqrt(double(k)))
              << CpuIsaName(t->isa) << " m " << m << " k " << k << " n " << n
              << " mode " << mode;
          const int64_t r = m / 2;
          std::vector<float> alone(init.begin() + r * n,
                                   init.begin() + (r + 1) * n);
          run(1, x.data() + r * k, alone.data());
          EXPECT_TRUE(
              std::equal(alone.begin(), alone.end(), out.begin() + r * n))
              << CpuIsaName(t->isa) << " row " << r << " of " << m;
        }
      }
    }
  }
}

}  // namespace
}  // namespace verl::infer
