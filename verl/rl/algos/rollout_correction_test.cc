// File: verl/rl/algos/rollout_correction_test.cc
#include "verl/rl/algos/rollout_correction.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros_like.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"
#include "verl/rl/algos/testing/rollout_correction_golden.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;
using testing::ExpectTensorNear;
using testing::Mat;

at::Tensor FromGolden(const std::vector<double>& v) {
  return at::tensor(v, at::kDouble)
      .reshape({testing::kGoldenRows, testing::kGoldenCols});
}

// Every case of verl's own helper (rollout_correction_golden.h): same
// weights, same mask, and the same metric names with the same values.
TEST(RolloutCorrectionVerlParity, MatchesVerlOnFixedInputs) {
  at::Tensor old_lp = FromGolden(testing::kGoldenOldLogProb);
  at::Tensor rollout_lp = FromGolden(testing::kGoldenRolloutLogProb);
  at::Tensor mask = FromGolden(testing::kGoldenMask);
  for (const testing::RolloutCorrectionGoldenCase& gc :
       testing::GoldenCases()) {
    RolloutCorrectionConfig c;
    c.rollout_is = gc.rollout_is;
    c.rollout_is_threshold = gc.rollout_is_threshold;
    c.rollout_is_batch_normalize = gc.rollout_is_batch_normalize;
    c.rollout_rs = gc.rollout_rs;
    c.rollout_rs_threshold = gc.rollout_rs_threshold;
    SCOPED_TRACE(absl::StrCat("is=", c.rollout_is, " rs=", c.rollout_rs));
    absl::StatusOr<RolloutCorrectionOutput> out =
        ComputeRolloutCorrection(old_lp, rollout_lp, mask, c);
    ASSERT_TRUE(out.ok()) << out.status();
    if (gc.weights.empty()) {
      EXPECT_FALSE(out->rollout_is_weights.defined());
    } else {
      ExpectTensorNear(out->rollout_is_weights, FromGolden(gc.weights), 1e-9);
    }
    ExpectTensorNear(out->response_mask, FromGolden(gc.mask));
    std::set<std::string> expected_names;
    for (const auto& [name, value] : gc.metrics) {
      expected_names.insert(name);
      auto it = out->metrics.find(name);
      ASSERT_NE(it, out->metrics.end()) << "missing metric " << name;
      // verl computes the fractions in float32 (.float().mean()).
      EXPECT_NEAR(it->second, value, 1e-7 * std::max(1.0, std::abs(value)))
          << name;
    }
    for (const auto& [name, value] : out->metrics) {
      EXPECT_TRUE(expected_names.count(name)) << "metric verl lacks: " << name;
    }
  }
}

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

  // k1 bounds are on exp(k1) = π_rollout/π_old, as verl compares them; row 0
  // has (1/3, 1/0.6, 1): [0.5, 3] rejects 1/3, [0.2, 1.2] rejects 1/0.6.
  c.rollout_rs = "token_k1";
  c.rollout_rs_threshold = "0.5_3";
  ExpectTensorNear(Run(c).response_mask, Mat({{0, 1, 1}, {1, 1, 0}}));
  c.rollout_rs_threshold = "0.2_1.2";  // 1/0.6 = 1.67 > 1.2 rejected
  ExpectTensorNear(Run(c).response_mask, Mat({{1, 0, 1}, {1, 1, 0}}));

  c.rollout_rs = "seq_mean_k3,seq_max_k2";
  c.rollout_rs_threshold = "100,0.5";  // max k2 = 0.60 > 0.5 → row 0 out
  ExpectTensorNear(Run(c).response_mask, Mat({{0, 0, 0}, {1, 1, 0}}));
}

TEST_F(RolloutCorrectionTest, ConfigErrorsNameTheKey) {
  RolloutCorrectionConfig c;
  c.rollout_rs = "token_k9";
  c.rollout_rs_threshold = "2";
  const absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "rollout_rs: unknown mode 'token_k9'"));
  c.rollout_rs = "token_k1";
  c.rollout_rs_threshold = "3_1";  // lower > upper
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "rollout_rs_threshold: cannot parse '3_1'"));
  c.rollout_rs = "token_k2";
  c.rollout_rs_threshold = "0.1_2";  // k2 takes one upper bound
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "expected one positive upper bound"));
  c.rollout_rs_threshold = "1,2";  // two thresholds for one mode
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "2 values for 1 rollout_rs modes"));
  c = RolloutCorrectionConfig();
  c.rollout_is = "geometric";
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "rollout_is: unknown value 'geometric'"));
  c.rollout_is = "token";
  c.rollout_is_threshold = 0.0;
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, mask_, c),
              StatusIs(kInvalid, "rollout_is_threshold must be > 0"));
  EXPECT_THAT(ComputeRolloutCorrection(old_, rollout_, at::zeros_like(mask_),
                                       RolloutCorrectionConfig()),
              StatusIs(kInvalid, "no valid token"));
}

}  // namespace
}  // namespace verl::rl
