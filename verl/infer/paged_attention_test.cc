// File: verl/infer/paged_attention_test.cc
#include "verl/infer/paged_attention.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace verl::infer {
namespace {

constexpr int64_t kHeads = 4, kKvHeads = 2, kDim = 8, kBlock = 4;

// Naive reference: query at absolute position `pos` over keys 0..pos (within
// the window), GQA head h uses kv head h / (kHeads / kKvHeads).
at::Tensor NaiveAttention(const at::Tensor& q, const at::Tensor& k,
                          const at::Tensor& v, int64_t first_pos,
                          int64_t window) {
  at::Tensor out = at::zeros_like(q);
  const int64_t group = kHeads / kKvHeads;
  for (int64_t i = 0; i < q.size(0); ++i) {
    const int64_t pos = first_pos + i;
    const int64_t lo = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
    for (int64_t h = 0; h < kHeads; ++h) {
      std::vector<double> s;
      for (int64_t j = lo; j <= pos; ++j) {
        s.push_back((q[i][h] * k[j][h / group]).sum().item<double>() /
                    std::sqrt(double(kDim)));
      }
      const double mx = *std::max_element(s.begin(), s.end());
      double z = 0;
      for (double& x : s) z += x = std::exp(x - mx);
      for (int64_t j = lo; j <= pos; ++j) {
        out[i][h] += v[j][h / group] * (s[j - lo] / z);
      }
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

void RunCase(at::ScalarType dtype) {
  at::manual_seed(1);
  const auto opts = at::TensorOptions().dtype(dtype);
  KvCacheSpec spec;
  spec.num_layers = 2;
  spec.num_kv_heads = kKvHeads;
  spec.head_dim = kDim;
  spec.block_size = kBlock;
  spec.dtype = dtype;
  KvCache cache(spec, 32);
  cache.Allocate();
  PagedAttention attn(&cache, {0, 3});  // layer 1: sliding window 3

  // (history already cached, tokens this step): decode, chunk, fresh prefill,
  // decode with a long history.
  std::vector<Seq> seqs = {{10, 1}, {7, 5}, {0, 6}, {21, 1}};
  std::vector<BlockId> ids(32);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(5));
  size_t next = 0;
  for (Seq& s : seqs) {
    const int64_t n = s.history + s.fresh;
    for (int64_t b = 0; b < (n + kBlock - 1) / kBlock; ++b) {
      s.table.push_back(ids[next++]);
    }
    s.k = at::randn({n, kKvHeads, kDim}, opts);
    s.v = at::randn({n, kKvHeads, kDim}, opts);
    s.k1 = at::randn({n, kKvHeads, kDim}, opts);
    s.v1 = at::randn({n, kKvHeads, kDim}, opts);
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
      q.push_back(at::randn({len, kHeads, kDim}, opts));
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
      at::Tensor want1 = NaiveAttention(qs, s.k1, s.v1, first, 3);
      EXPECT_TRUE(
          at::allclose(out0.narrow(0, m.query_start, len), want0, 1e-4, 1e-5))
          << "layer 0, history " << s.history << " len " << len;
      EXPECT_TRUE(
          at::allclose(out1.narrow(0, m.query_start, len), want1, 1e-4, 1e-5))
          << "layer 1 (window), history " << s.history << " len " << len;
    }
  };
  run(/*history_step=*/true);
  run(/*history_step=*/false);
  // The cache holds every token's K at its slot.
  const Seq& s = seqs[3];
  for (int64_t p = 0; p < s.history + s.fresh; ++p) {
    EXPECT_TRUE(
        at::equal(cache.key(0)[s.table[p / kBlock]][p % kBlock], s.k[p]));
  }
}

TEST(PagedAttentionTest, MatchesNaiveReferenceFp32FusedDecode) {
  RunCase(at::kFloat);
}

TEST(PagedAttentionTest, MatchesNaiveReferenceGatherPath) {
  RunCase(at::kDouble);
}

}  // namespace
}  // namespace verl::infer
