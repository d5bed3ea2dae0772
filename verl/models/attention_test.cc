// File: verl/models/attention_test.cc
//
// VarlenCausalAttention and CausalAttention against a per-head reference
// with an explicit mask (GQA by repeating k/v heads), including the
// query-suffix form the rollout engine uses for decode / chunked prefill.
#include "verl/models/attention.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace verl::models {
namespace {

// q [L, H, d], k/v [L, Hkv, d]; query i at position i; full reference.
at::Tensor Reference(const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v, int64_t window) {
  const int64_t L = q.size(0), H = q.size(1), Hkv = k.size(1), d = q.size(2);
  at::Tensor out = at::zeros_like(q);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / (H / Hkv);
    at::Tensor s =
        at::matmul(q.select(1, h), k.select(1, g).t()) / std::sqrt(double(d));
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < L; ++j) {
        if (j > i || (window > 0 && i - j >= window)) {
          s[i][j] = -std::numeric_limits<double>::infinity();
        }
      }
    }
    out.select(1, h).copy_(at::matmul(at::softmax(s, -1), v.select(1, g)));
  }
  return out;
}

TEST(AttentionTest, VarlenMatchesPerSequenceReference) {
  at::manual_seed(0);
  const std::vector<int64_t> cu = {0, 4, 4, 11,
                                   20};  // includes an empty sequence
  at::Tensor q = at::randn({20, 6, 8}, at::kDouble);
  at::Tensor k = at::randn({20, 2, 8}, at::kDouble);
  at::Tensor v = at::randn({20, 2, 8}, at::kDouble);
  VarlenCausalAttention attn(cu, {0, 3});
  for (int64_t layer : {0, 1}) {
    at::Tensor out = attn.Attend(layer, q, k, v);
    ASSERT_EQ(out.sizes(), q.sizes());
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t len = cu[s + 1] - cu[s];
      if (len == 0) continue;
      at::Tensor ref =
          Reference(q.narrow(0, cu[s], len), k.narrow(0, cu[s], len),
                    v.narrow(0, cu[s], len), layer == 1 ? 3 : 0);
      EXPECT_TRUE(at::allclose(out.narrow(0, cu[s], len), ref, 1e-10, 1e-12))
          << "layer " << layer << " seq " << s;
    }
  }
}

TEST(AttentionTest, QuerySuffixEqualsLastRows) {
  at::manual_seed(1);
  at::Tensor q = at::randn({9, 4, 16}, at::kDouble);
  at::Tensor k = at::randn({9, 4, 16}, at::kDouble);
  at::Tensor v = at::randn({9, 4, 16}, at::kDouble);
  for (int64_t window : {0, 4}) {
    at::Tensor full = Reference(q, k, v, window);
    for (int64_t lq : {1, 3}) {
      at::Tensor part = CausalAttention(q.narrow(0, 9 - lq, lq), k, v, window);
      EXPECT_TRUE(at::allclose(part, full.narrow(0, 9 - lq, lq), 1e-10, 1e-12))
          << "lq " << lq << " window " << window;
    }
  }
}

TEST(AttentionTest, Bf16CloseToFp32) {
  at::manual_seed(2);
  at::Tensor q = at::randn({12, 4, 16}), k = at::randn({12, 2, 16}),
             v = at::randn({12, 2, 16});
  at::Tensor ref = CausalAttention(q, k, v, 0);
  at::Tensor out = CausalAttention(q.to(at::kBFloat16), k.to(at::kBFloat16),
                                   v.to(at::kBFloat16), 0);
  EXPECT_EQ(out.scalar_type(), at::kBFloat16);
  EXPECT_LT((out.to(at::kFloat) - ref).abs().max().item<double>(), 0.05);
}

// Gradients through the padded groups with a window shorter than the
// padding of a short sequence: padding query rows that see no key must not
// turn the real tokens' gradients into NaN. Per-sequence reference
// gradients in double; the fp32 (fused) path against the same.
TEST(AttentionTest, WindowedGradientsWithPaddedGroupsMatchReference) {
  at::manual_seed(3);
  const std::vector<int64_t> cu = {0, 1, 13, 16};
  const at::Tensor q0 = at::randn({16, 4, 8}, at::kDouble);
  const at::Tensor k0 = at::randn({16, 2, 8}, at::kDouble);
  const at::Tensor v0 = at::randn({16, 2, 8}, at::kDouble);
  const at::Tensor gy = at::randn({16, 4, 8}, at::kDouble);
  auto grads = [&](bool fused, at::ScalarType dtype) {
    at::Tensor q = q0.to(dtype).detach().clone().requires_grad_(true);
    at::Tensor k = k0.to(dtype).detach().clone().requires_grad_(true);
    at::Tensor v = v0.to(dtype).detach().clone().requires_grad_(true);
    VarlenCausalAttention attn(cu, {2}, fused);
    (attn.Attend(0, q, k, v) * gy.to(dtype)).sum().backward();
    return std::vector<at::Tensor>{q.grad().to(at::kDouble),
                                   k.grad().to(at::kDouble),
                                   v.grad().to(at::kDouble)};
  };
  std::vector<at::Tensor> ref(3);
  {
    at::Tensor q = q0.clone().requires_grad_(true);
    at::Tensor k = k0.clone().requires_grad_(true);
    at::Tensor v = v0.clone().requires_grad_(true);
    at::Tensor loss = at::zeros({}, at::kDouble);
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t len = cu[s + 1] - cu[s];
      loss = loss + (Reference(q.narrow(0, cu[s], len), k.narrow(0, cu[s], len),
                               v.narrow(0, cu[s], len), 2) *
                     gy.narrow(0, cu[s], len))
                        .sum();
    }
    loss.backward();
    ref = {q.grad(), k.grad(), v.grad()};
  }
  const std::vector<at::Tensor> aten = grads(false, at::kDouble);
  const std::vector<at::Tensor> fused = grads(true, at::kFloat);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(at::allclose(aten[i], ref[i], 1e-10, 1e-12)) << "grad " << i;
    EXPECT_TRUE(at::allclose(fused[i], ref[i], 1e-4, 1e-5)) << "grad " << i;
  }
}

}  // namespace
}  // namespace verl::models
