// File: verl/models/logprob_test.cc
//
// Chunked log-prob/entropy (values and gradients) against the naive full
// computation through autograd in double precision.
#include "verl/models/logprob.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <vector>

namespace verl::models {
namespace {

struct Naive {
  at::Tensor logp, ent;
};

Naive NaiveLogProb(const at::Tensor& logits, const at::Tensor& labels,
                   double t) {
  at::Tensor z = logits.to(at::kDouble) / t;
  at::Tensor ls = at::log_softmax(z, -1);
  Naive n;
  n.logp = ls.gather(-1, labels.unsqueeze(-1)).squeeze(-1);
  n.ent = -(at::exp(ls) * ls).sum(-1);
  return n;
}

double MaxDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a.to(at::kDouble) - b.to(at::kDouble)).abs().max().item<double>();
}

TEST(LogProbTest, ValuesAndGradsMatchNaive) {
  at::manual_seed(0);
  for (at::ScalarType dt : {at::kDouble, at::kFloat}) {
    // [3, 13, 50] with chunk 8: several chunks and a partial one.
    at::Tensor base = 3.0 * at::randn({3, 13, 50}, at::kDouble);
    at::Tensor labels = at::randint(0, 50, {3, 13}, at::kLong);
    at::Tensor gl = at::randn({3, 13}, at::kDouble);
    at::Tensor ge = at::randn({3, 13}, at::kDouble);
    const double t = 0.7;

    at::Tensor x = base.to(dt).requires_grad_(true);
    LogProbEntropy r = LogProbsAndEntropy(x, labels, t, true, /*chunk_rows=*/8);
    ASSERT_EQ(r.log_probs.sizes(), (at::IntArrayRef{3, 13}));
    ((r.log_probs.to(at::kDouble) * gl).sum() +
     (r.entropy.to(at::kDouble) * ge).sum())
        .backward();

    at::Tensor xr = base.to(dt).to(at::kDouble).requires_grad_(true);
    Naive n = NaiveLogProb(xr, labels, t);
    ((n.logp * gl).sum() + (n.ent * ge).sum()).backward();

    const double tol = dt == at::kDouble ? 1e-12 : 5e-5;  // fp32: |z| ~ 15
    EXPECT_LT(MaxDiff(r.log_probs, n.logp), tol);
    EXPECT_LT(MaxDiff(r.entropy, n.ent), tol);
    EXPECT_LT(MaxDiff(x.grad(), xr.grad()), tol);
    EXPECT_EQ(x.grad().scalar_type(), dt);
  }
}

TEST(LogProbTest, LogProbOnlyAndEntropyOnlyGrads) {
  at::manual_seed(1);
  at::Tensor base = at::randn({20, 17}, at::kDouble);
  at::Tensor labels = at::randint(0, 17, {20}, at::kLong);
  at::Tensor x = base.clone().requires_grad_(true);
  LogProbsFromLogits(x, labels, 1.3, 6).sum().backward();
  at::Tensor xr = base.clone().requires_grad_(true);
  NaiveLogProb(xr, labels, 1.3).logp.sum().backward();
  EXPECT_LT(MaxDiff(x.grad(), xr.grad()), 1e-12);

  at::Tensor y = base.clone().requires_grad_(true);
  at::Tensor ent = EntropyFromLogits(y, 0.5, 7);
  ent.sum().backward();
  at::Tensor yr = base.clone().requires_grad_(true);
  at::Tensor ent_ref = NaiveLogProb(yr, labels, 0.5).ent;
  ent_ref.sum().backward();
  EXPECT_LT(MaxDiff(ent, ent_ref), 1e-12);
  EXPECT_LT(MaxDiff(y.grad(), yr.grad()), 1e-12);
}

TEST(LogProbTest, SumPiSquaredMatchesSoftmaxSquared) {
  at::manual_seed(3);
  // [2, 5, V] logits, chunks of 3 rows over the 10 flattened rows.
  at::Tensor logits = at::randn({2, 5, 11}, at::kDouble) * 4.0;
  for (double t : {1.0, 0.6}) {
    at::Tensor p = at::softmax(logits / t, -1);
    at::Tensor got = SumPiSquaredFromLogits(logits, t, /*chunk_rows=*/3);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 5}));
    EXPECT_LT(MaxDiff(got, (p * p).sum(-1)), 1e-12) << "temperature " << t;
  }
  // fp32 logits compute in fp32; a one-hot distribution gives exactly 1.
  at::Tensor peaked =
      at::tensor(std::vector<float>{0.f, 0.f, 1e4f, 0.f}).reshape({1, 4});
  EXPECT_NEAR(SumPiSquaredFromLogits(peaked).item<double>(), 1.0, 1e-6);
}

TEST(LogProbTest, Bf16LogitsComputeInFp32) {
  at::manual_seed(2);
  at::Tensor x = (4.0 * at::randn({33, 64})).to(at::kBFloat16);
  at::Tensor labels = at::randint(0, 64, {33}, at::kLong);
  LogProbEntropy r = LogProbsAndEntropy(x, labels, 1.0, true, 2048);
  EXPECT_EQ(r.log_probs.scalar_type(), at::kFloat);
  Naive n = NaiveLogProb(x, labels, 1.0);
  EXPECT_LT(MaxDiff(r.log_probs, n.logp), 1e-5);
  EXPECT_LT(MaxDiff(r.entropy, n.ent), 1e-5);
  // Without grad tracking nothing is saved and results match chunk sizes.
  LogProbEntropy r2 = LogProbsAndEntropy(x, labels, 1.0, true, 5);
  EXPECT_LT(MaxDiff(r.log_probs, r2.log_probs), 1e-6);
}

}  // namespace
}  // namespace verl::models
