// File: verl/rl/algos/value_loss_test.cc
#include "verl/rl/algos/value_loss.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::Mat;

TEST(ValueLossTest, ClippedLossAndClipfrac) {
  // c = 0.5. Token 0: V̂=1, V=0.5, R=1.2 → clip 1.0: (0.04, 0.04) → 0.04.
  // Token 1: V̂=0, V=1, R=2 → clip 0.5: (4, 2.25) → 4.
  // Token 2: V̂=2, V=0, R=2 → clip 0.5: (0, 2.25) → 2.25, clipped.
  at::Tensor vpred = Mat({{1.0, 0.0, 2.0}});
  ValueLossOutput out =
      *ComputeValueLoss(vpred, Mat({{0.5, 1.0, 0.0}}), Mat({{1.2, 2.0, 2.0}}),
                        at::ones({1, 3}, at::kDouble), 0.5, kTokenMean);
  EXPECT_NEAR(out.loss.item<double>(), 0.5 * (0.04 + 4.0 + 2.25) / 3, 1e-12);
  EXPECT_NEAR(out.vf_clipfrac, 1.0 / 3, 1e-8);
  EXPECT_THAT(ComputeValueLoss(vpred, vpred, vpred,
                               at::ones({1, 3}, at::kDouble), 0.5, "mean"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "loss_agg_mode: unknown value 'mean'"));
}

TEST(EntropyLossTest, AggregatesWithMode) {
  at::Tensor h = Mat({{1, 3}, {5, 7}});
  at::Tensor m = Mat({{1, 1}, {1, 0}});
  EXPECT_NEAR(ComputeEntropyLoss(h, m, kTokenMean)->item<double>(), 3.0, 1e-12);
  EXPECT_NEAR(ComputeEntropyLoss(h, m, kSeqMeanTokenMean)->item<double>(), 3.5,
              1e-7);
}

}  // namespace
}  // namespace verl::rl
