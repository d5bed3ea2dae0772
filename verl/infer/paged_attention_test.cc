// File: verl/infer/paged_attention_test.cc
#include "verl/infer/paged_attention.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/mv.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>
#include <vector>

namespace verl::infer {
namespace {

// Heads, kv heads, head dim, block size, sliding window of layer 1, and
// per sequence (tokens cached by a first step, tokens of the second step).
struct AttnCase {
  int64_t heads, kv_heads, dim, block, window;
  std::vector<std::pair<int64_t, int64_t>> seqs;
};

// Naive reference in double: query at absolute position `pos` over keys
// 0..pos (within the window), GQA head h uses kv head h / (heads / kv).
at::Tensor NaiveAttention(const at::Tensor& q, const at::Tensor& k,
                          const at::Tensor& v, int64_t first_pos,
                          int64_t window) {
  const at::Tensor qd = q.to(at::kDouble), kd = k.to(at::kDouble),
                   vd = v.to(at::kDouble);
  const int64_t heads = q.size(1), dim = q.size(2);
  at::Tensor out = at::zeros_like(qd);
  const int64_t group = heads / k.size(1);
  for (int64_t i = 0; i < q.size(0); ++i) {
    const int64_t pos = first_pos + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < heads; ++h) {
      const at::Tensor s =
          at::mv(kd.narrow(0, lo, pos - lo + 1).select(1, h / group),
                 qd[i][h]) /
          std::sqrt(double(dim));
      out[i][h] =
          at::mv(vd.narrow(0, lo, pos - lo + 1).select(1, h / group).t(),
                 at::softmax(s, 0));
    }
  }
  return out;
}

struct Seq {
  int64_t history, fresh;
  std::vector<BlockId> table;
  at::Tensor k, v;  // [history + fresh, kv, d], per layer 0 and 1
  at::Tensor k1, v1;
};

// Two packed steps through one PagedAttention (layer 0 full, layer 1 with
// c.window): the histories, then the fresh tokens over the cached
// histories; every row against NaiveAttention (fp32 within 1e-5).
void RunCase(at::ScalarType dtype, const AttnCase& c) {
  at::manual_seed(1);
  const auto opts = at::TensorOptions().dtype(dtype);
  KvCacheSpec spec;
  spec.num_layers = 2;
  spec.num_kv_heads = c.kv_heads;
  spec.head_dim = c.dim;
  spec.block_size = c.block;
  spec.dtype = dtype;
  int64_t num_blocks = 0;
  for (const auto& [history, fresh] : c.seqs) {
    num_blocks += (history + fresh + c.block - 1) / c.block;
  }
  KvCache cache(spec, num_blocks);
  cache.Allocate();
  PagedAttention attn(&cache, {0, c.window});

  std::vector<Seq> seqs;
  for (const auto& [history, fresh] : c.seqs) seqs.push_back({history, fresh});
  std::vector<BlockId> ids(num_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
  size_t next = 0;
  for (Seq& s : seqs) {
    const int64_t n = s.history + s.fresh;
    for (int64_t b = 0; b < (n + c.block - 1) / c.block; ++b) {
      s.table.push_back(ids[next++]);
    }
    s.k = at::randn({n, c.kv_heads, c.dim}, opts);
    s.v = at::randn({n, c.kv_heads, c.dim}, opts);
    s.k1 = at::randn({n, c.kv_heads, c.dim}, opts);
    s.v1 = at::randn({n, c.kv_heads, c.dim}, opts);
  }
  // Step 1: prefill the histories (one packed forward).
  auto run = [&](bool history_step) {
    std::vector<AttentionSequence> meta;
    std::vector<at::Tensor> q, k, v, k1, v1;
    int64_t rows = 0;
    for (Seq& s : seqs) {
      const int64_t first = history_step ? 0 : s.history;
      const int64_t len = history_step ? s.history : s.fresh;
      if (len == 0) continue;
      meta.push_back({rows, len, first + len, &s.table});
      rows += len;
      q.push_back(at::randn({len, c.heads, c.dim}, opts));
      k.push_back(s.k.narrow(0, first, len));
      v.push_back(s.v.narrow(0, first, len));
      k1.push_back(s.k1.narrow(0, first, len));
      v1.push_back(s.v1.narrow(0, first, len));
    }
    attn.Prepare(meta, rows);
    at::Tensor qq = at::cat(q),
               out0 = attn.Attend(0, qq, at::cat(k), at::cat(v));
    at::Tensor out1 = attn.Attend(1, qq, at::cat(k1), at::cat(v1));
    size_t i = 0;
    for (Seq& s : seqs) {
      const int64_t first = history_step ? 0 : s.history;
      const int64_t len = history_step ? s.history : s.fresh;
      if (len == 0) continue;
      const AttentionSequence& m = meta[i];
      const at::Tensor& qs = q[i++];
      at::Tensor want0 = NaiveAttention(qs, s.k, s.v, first, 0);
      at::Tensor want1 = NaiveAttention(qs, s.k1, s.v1, first, c.window);
      const double err0 =
          (out0.narrow(0, m.query_start, len).to(at::kDouble) - want0)
              .abs()
              .max()
              .item<double>();
      const double err1 =
          (out1.narrow(0, m.query_start, len).to(at::kDouble) - want1)
              .abs()
              .max()
              .item<double>();
      EXPECT_LE(err0, 1e-5)
          << "layer 0, history " << s.history << " len " << len << " heads "
          << c.heads << "/" << c.kv_heads << " dim " << c.dim;
      EXPECT_LE(err1, 1e-5) << "layer 1 (window " << c.window << "), history "
                            << s.history << " len " << len << " heads "
                            << c.heads << "/" << c.kv_heads << " dim " << c.dim;
    }
  };
  run(/*history_step=*/true);
  run(/*history_step=*/false);
  // The cache holds every token's K at its slot.
  const Seq& s = seqs.back();
  for (int64_t p = 0; p < s.history + s.fresh; ++p) {
    EXPECT_TRUE(
        at::equal(cache.key(0)[s.table[p / c.block]][p % c.block], s.k[p]));
  }
}

// Decode, a chunk over a cached prefix, a fresh prefill, a long decode;
// head_dim 8 (the kernel's scalar fallback), window 3.
const AttnCase kSmallCase = {4, 2, 8, 4, 3, {{10, 1}, {7, 5}, {0, 6}, {21, 1}}};

TEST(PagedAttentionTest, MatchesNaiveReferenceFp32FusedDecode) {
  RunCase(at::kFloat, kSmallCase);
}

TEST(PagedAttentionTest, MatchesNaiveReferenceGatherPath) {
  RunCase(at::kDouble, kSmallCase);
}

// fp32 prefill through the blocked kernel (register-blocked head_dim 64 on
// every ISA): GQA groups 4 and 7 (sub-groups 4 + 3), block sizes 16 and 5,
// sliding window 20; odd fresh prefills (37, 1 token of prompt), chunks
// over cached prefixes ending inside and at a block boundary (21 + 13,
// 16 + 16), a chunk longer than the window over a long prefix (40 + 29),
// decodes beside them in the same step.
TEST(PagedAttentionTest, PrefillThroughBlockedKernelMatchesNaiveReference) {
  const std::vector<std::pair<int64_t, int64_t>> seqs = {
      {0, 37}, {21, 13}, {16, 16}, {40, 29}, {30, 1}, {0, 1}, {3, 2}};
  RunCase(at::kFloat, {8, 2, 64, 16, 20, seqs});
  RunCase(at::kFloat, {14, 2, 64, 5, 20, seqs});
  RunCase(at::kFloat, {4, 4, 64, 16, 7, seqs});
}

}  // namespace
}  // namespace verl::infer
