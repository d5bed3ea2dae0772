// File: verl/rl/algos/agg_loss_test.cc
#include "verl/rl/algos/agg_loss.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::Mat;

double Agg(const at::Tensor& l, const at::Tensor& m, const std::string& mode,
           const AggOptions& o = {}) {
  absl::StatusOr<at::Tensor> r = AggLoss(l, m, mode, o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->item<double>() : NAN;
}

// ℓ = [[1,2,3],[4,5,6],[7,8,9]], m = [[1,1,0],[1,0,0],[0,0,0]].
class AggLossHandTest : public ::testing::Test {
 protected:
  at::Tensor l_ = Mat({{1, 2, 3}, {4, 5, 6}, {7, 8, 9}});
  at::Tensor m_ = Mat({{1, 1, 0}, {1, 0, 0}, {0, 0, 0}});
};

TEST_F(AggLossHandTest, TokenMean) {
  EXPECT_NEAR(Agg(l_, m_, kTokenMean), (1 + 2 + 4) / 3.0, 1e-12);
}

TEST_F(AggLossHandTest, SeqMeanTokenSumSkipsEmptyRows) {
  // Sequence sums 3 and 4; the all-masked row is not a sequence.
  EXPECT_NEAR(Agg(l_, m_, kSeqMeanTokenSum), 3.5, 1e-12);
}

TEST_F(AggLossHandTest, SeqMeanTokenMean) {
  // Per-sequence means 1.5 and 4 (÷(len+1e-8)).
  EXPECT_NEAR(Agg(l_, m_, kSeqMeanTokenMean), (1.5 + 4.0) / 2.0, 1e-7);
}

TEST_F(AggLossHandTest, SeqMeanTokenSumNormUsesScaleFactor) {
  EXPECT_NEAR(Agg(l_, m_, kSeqMeanTokenSumNorm), 7.0 / 3.0, 1e-12);
  AggOptions o;
  o.loss_scale_factor = 7.0;
  EXPECT_NEAR(Agg(l_, m_, kSeqMeanTokenSumNorm, o), 1.0, 1e-12);
}

TEST_F(AggLossHandTest, GlobalCountsAndDpSize) {
  AggOptions o;
  o.batch_num_tokens = 14.0;
  o.dp_size = 2.0;
  EXPECT_NEAR(Agg(l_, m_, kTokenMean, o), 7.0 / 14.0 * 2.0, 1e-12);
  o.global_batch_size = 4.0;
  EXPECT_NEAR(Agg(l_, m_, kSeqMeanTokenSum, o), 7.0 / 4.0 * 2.0, 1e-12);
}

TEST(AggLossTest, UnknownModeIsAnError) {
  absl::StatusOr<at::Tensor> r = AggLoss(Mat({{1}}), Mat({{1}}), "token-sum");
  ASSERT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "loss_agg_mode: unknown value 'token-sum'"));
  EXPECT_NE(r.status().message().find("token-sum"), std::string::npos);
}

// A mini-batch split over 2 ranks × 2 micro-batches: with global counts and
// dp_size, Σ_micro per rank then the DP mean (gradient all-reduce) equals the
// full-batch loss; the same holds for the gradient.
TEST(AggLossTest, GlobalNormalisationInvariantToMicroBatchesAndRanks) {
  at::manual_seed(3);
  const int64_t B = 8, T = 6, dp = 2, micro = 2;
  at::Tensor logits = at::randn({B, T}, at::kDouble);
  at::Tensor mask = (at::rand({B, T}, at::kDouble) > 0.4).to(at::kDouble);
  mask[5].zero_();  // an empty sequence
  mask[0][0] = 1.0;
  for (const char* mode : {kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean}) {
    at::Tensor w_full = logits.clone().requires_grad_(true);
    at::Tensor full = *AggLoss(w_full * w_full, mask, mode);
    full.backward();

    AggOptions o;
    o.dp_size = dp;
    o.batch_num_tokens = mask.sum().item<double>();
    o.global_batch_size = (mask.sum(-1) > 0).sum().item<double>();
    at::Tensor w = logits.clone().requires_grad_(true);
    at::Tensor total = at::zeros({}, at::kDouble);
    const int64_t per_rank = B / dp, per_micro = per_rank / micro;
    for (int64_t r = 0; r < dp; ++r) {
      at::Tensor rank_loss = at::zeros({}, at::kDouble);
      for (int64_t k = 0; k < micro; ++k) {
        const int64_t lo = r * per_rank + k * per_micro;
        at::Tensor wm = w.slice(0, lo, lo + per_micro);
        rank_loss =
            rank_loss +
            *AggLoss(wm * wm, mask.slice(0, lo, lo + per_micro), mode, o);
      }
      total = total + rank_loss / static_cast<double>(dp);  // DP average
    }
    total.backward();
    EXPECT_NEAR(total.item<double>(), full.item<double>(), 1e-10) << mode;
    EXPECT_TRUE(at::allclose(w.grad(), w_full.grad(), 1e-10, 1e-12)) << mode;
  }
}

TEST(AggLossTest, SumNormInvariantToMicroBatches) {
  at::manual_seed(4);
  at::Tensor l = at::randn({6, 5}, at::kDouble);
  at::Tensor m = (at::rand({6, 5}, at::kDouble) > 0.3).to(at::kDouble);
  AggOptions o;
  o.loss_scale_factor = 5.0;
  double parts = 0.0;
  for (int64_t lo = 0; lo < 6; lo += 2)
    parts += Agg(l.slice(0, lo, lo + 2), m.slice(0, lo, lo + 2),
                 kSeqMeanTokenSumNorm, o);
  EXPECT_NEAR(parts, Agg(l, m, kSeqMeanTokenSumNorm, o), 1e-12);
}

}  // namespace
}  // namespace verl::rl
