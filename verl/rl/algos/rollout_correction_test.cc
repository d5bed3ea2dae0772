// File: verl/rl/algos/rollout_correction_test.cc
#include "verl/rl/algos/rollout_correction.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>

#include <cmath>

#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using testing::ExpectTensorNear;
using testing::Mat;

// λ = old − rollout = (ln 3, ln 0.6, 0) on row 0; row 1 λ = 0 everywhere.
class RolloutCorrectionTest : public ::testing::Test {
 protected:
  at::Tensor rollout_ = at::full({2, 3}, -1.0, at::kDouble);
  at::Tensor old_ =
      rollout_ + Mat({{std::log(3.0), std::log(0.6), 0}, {0, 0, 0}});
  at::Tensor mask_ = Mat({{1, 1, 1}, {1, 1, 0}});
  RolloutCorrectionOutput Run(const RolloutCorrectionConfig& c) {
    absl::StatusOr<RolloutCorrectionOutput> r =
        ComputeRolloutCorrection(old_, rollout_, mask_, c);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }
};

TEST_F(RolloutCorrectionTest, TokenIsWeightsTruncated) {
  RolloutCorrectionConfig c;
  c.rollout_is = "token";
  RolloutCorrectionOutput out = Run(c);
  ExpectTensorNear(out.rollout_is_weights, Mat({{2, 0.6, 1}, {1, 1, 0}}),
                   1e-12);
  ExpectTensorNear(out.response_mask, mask_);
  EXPECT_NEAR(out.metrics["rollout_corr/rollout_is_max"], 3.0, 1e-9);
  EXPECT_NEAR(out.metrics["rollout_corr/rollout_is_ratio_fraction_high"], 0.2,
              1e-8);
  EXPECT_TRUE(out.metrics.count("rollout_corr/chi2_token"));
  EXPECT_NEAR(out.metrics["rollout_corr/kl"], -std::log(1.8) / 5, 1e-8);
}

TEST_F(RolloutCorrectionTest, SequenceIsWeightsAndBatchNormalize) {
  RolloutCorrectionConfig c;
  c.rollout_is = "sequence";
  c.rollout_is_threshold = 10.0;
  RolloutCorrectionOutput out = Run(c);
  // Row 0: exp(ln 3 + ln 0.6) = 1.8; row 1: 1.
  ExpectTensorNear(out.rollout_is_weights, Mat({{1.8, 1.8, 1.8}, {1, 1, 0}}),
                   1e-12);
  c.rollout_is_batch_normalize = true;
  ExpectTensorNear(
      Run(c).rollout_is_weights,
      Mat({{1.8 / 1.4, 1.8 / 1.4, 1.8 / 1.4}, {1 / 1.4, 1 / 1.4, 0}}), 1e-6);
}

TEST_F(RolloutCorrectionTest, RejectionModes) {
  RolloutCorrectionConfig c;
  c.rollout_rs = "token_k1";
  c.rollout_rs_threshold = "2";  // keep ratio in [0.5, 2]: 3 out
  RolloutCorrectionOutput out = Run(c);
  ExpectTensorNear(out.response_mask, Mat({{0, 1, 1}, {1, 1, 0}}));
  EXPECT_NEAR(out.metrics["rollout_corr/rollout_rs_masked_fraction"], 0.2,
              1e-8);
  EXPECT_NEAR(out.metrics["rollout_corr/rollout_rs_seq_masked_fraction"], 0.5,
              1e-12);

  c.rollout_rs = "seq_sum_k1";
  c.rollout_rs_threshold = "0.8_1.2";  // sequence ratio 1.8 → rejected
  ExpectTensorNear(Run(c).response_mask, Mat({{0, 0, 0}, {1, 1, 0}}));

  c.rollout_rs = "token_k2";
  c.rollout_rs_threshold = "0.1";  // ½ln²3 = 0.60, ½ln²0.6 = 0.13 rejected
  ExpectTensorNear(Run(c).response_mask, Mat({{0, 0, 1}, {1, 1, 0}}));

  c.rollout_rs = "seq_mean_k3,seq_max_k2";
  c.rollout_rs_threshold = "100,0.5";  // max k2 = 0.60 > 0.5 → row 0 out
  ExpectTensorNear(Run(c).response_mask, Mat({{0, 0, 0}, {1, 1, 0}}));
}

TEST_F(RolloutCorrectionTest, ConfigErrorsNameTheKey) {
  RolloutCorrectionConfig c;
  c.rollout_rs = "token_k9";
  c.rollout_rs_threshold = "2";
  absl::StatusOr<RolloutCorrectionOutput> r =
      ComputeRolloutCorrection(old_, rollout_, mask_, c);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("rollout_rs"), std::string::npos);
  c.rollout_rs = "token_k1";
  c.rollout_rs_threshold = "3_1";
  EXPECT_FALSE(ComputeRolloutCorrection(old_, rollout_, mask_, c).ok());
  c = RolloutCorrectionConfig();
  c.rollout_is = "geometric";
  EXPECT_FALSE(ComputeRolloutCorrection(old_, rollout_, mask_, c).ok());
  EXPECT_FALSE(ComputeRolloutCorrection(old_, rollout_, at::zeros_like(mask_),
                                        RolloutCorrectionConfig())
                   .ok());
}

}  // namespace
}  // namespace verl::rl
