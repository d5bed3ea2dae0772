// File: verl/rl/algos/kl_test.cc
#include "verl/rl/algos/kl.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <cmath>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::ExpectTensorNear;
using testing::Mat;
using testing::Vec;

// logp = (−1, −2), ref = (−1.5, −1): d = (0.5, −1).
class KlEstimatorTest : public ::testing::Test {
 protected:
  at::Tensor logp_ = Vec({-1.0, -2.0});
  at::Tensor ref_ = Vec({-1.5, -1.0});
  at::Tensor Kl(const std::string& type) {
    absl::StatusOr<at::Tensor> r = KlPenalty(logp_, ref_, type);
    EXPECT_TRUE(r.ok()) << r.status();
    return *r;
  }
};

TEST_F(KlEstimatorTest, K1AbsK2) {
  ExpectTensorNear(Kl("kl"), Vec({0.5, -1.0}));
  ExpectTensorNear(Kl("k1"), Vec({0.5, -1.0}));
  ExpectTensorNear(Kl("abs"), Vec({0.5, 1.0}));
  ExpectTensorNear(Kl("mse"), Vec({0.125, 0.5}));
  ExpectTensorNear(Kl("k2"), Vec({0.125, 0.5}));
}

TEST_F(KlEstimatorTest, K3) {
  // x = ref − logp = (−0.5, 1): eˣ − x − 1.
  const at::Tensor expected =
      Vec({std::exp(-0.5) + 0.5 - 1.0, std::exp(1.0) - 2.0});
  ExpectTensorNear(Kl("low_var_kl"), expected, 1e-12);
  ExpectTensorNear(Kl("k3"), expected, 1e-12);
}

TEST(KlTest, K3ClampsRatioAndValue) {
  at::Tensor r = *KlPenalty(Vec({0.0, -30.0}), Vec({-30.0, 0.0}), "k3");
  // x clamped to −20: e^−20 + 19 → clamped to 10; x = +20: huge → 10.
  ExpectTensorNear(r, Vec({10.0, 10.0}));
  at::Tensor small = *KlPenalty(Vec({0.0}), Vec({-5.0}), "k3");
  EXPECT_NEAR(small.item<double>(), std::exp(-5.0) + 4.0, 1e-12);
}

TEST(KlTest, StraightThroughValueOfEstimatorGradientOfK2) {
  for (const char* type : {"k1+", "k3+", "low_var_kl+", "abs+"}) {
    at::Tensor logp = Vec({-1.0, -2.0}).requires_grad_(true);
    at::Tensor ref = Vec({-1.5, -1.0});
    at::Tensor out = *KlPenalty(logp, ref, type);
    std::string base(type);
    base.pop_back();
    ExpectTensorNear(out, *KlPenalty(logp.detach(), ref, base), 1e-12);
    out.sum().backward();
    // d(½d²)/dlogp = d.
    ExpectTensorNear(logp.grad(), Vec({0.5, -1.0}), 1e-12);
  }
}

TEST(KlTest, UnknownAndFullAreErrors) {
  EXPECT_EQ(KlPenalty(Vec({0}), Vec({0}), "full").status().code(),
            absl::StatusCode::kUnimplemented);
  absl::StatusOr<at::Tensor> r = KlPenalty(Vec({0}), Vec({0}), "k4");
  ASSERT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "kl_penalty: unknown estimator 'k4'"));
  EXPECT_NE(r.status().message().find("k4"), std::string::npos);
}

TEST(KlTest, FixedAndAdaptiveControllers) {
  auto fixed = *MakeKlController("fixed", 0.001);
  fixed->Update(5.0, 100);
  EXPECT_DOUBLE_EQ(fixed->value(), 0.001);

  auto adaptive = *MakeKlController("adaptive", 0.1, 0.1, 100);
  adaptive->Update(0.2, 10);  // error clipped to +0.2 → ×(1 + 0.2·10/100)
  EXPECT_NEAR(adaptive->value(), 0.1 * 1.02, 1e-12);
  adaptive->Update(0.09, 10);  // error −0.1 → ×(1 − 0.1·10/100)
  EXPECT_NEAR(adaptive->value(), 0.1 * 1.02 * 0.99, 1e-12);

  EXPECT_THAT(
      MakeKlController("adaptive", 0.1, 0.1, 0),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "algorithm.kl_ctrl.horizon must be > 0 for the adaptive"));
  EXPECT_THAT(MakeKlController("pid", 0.1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "algorithm.kl_ctrl.type: unknown value 'pid'"));
}

TEST(KlTest, ApplyKlPenaltyInReward) {
  at::Tensor scores = Mat({{0, 0, 1}, {0, 2, 0}});
  at::Tensor old_lp = Mat({{-1, -1, -1}, {-1, -1, -1}});
  at::Tensor ref_lp = Mat({{-1.5, -1, -1}, {-1, -0.5, -1}});
  at::Tensor mask = Mat({{1, 1, 1}, {1, 1, 0}});
  FixedKlController ctrl(0.1);
  KlInRewardResult r =
      *ApplyKlPenalty(scores, old_lp, ref_lp, mask, ctrl, "kl");
  // kld = (0.5,0,0 | 0,−0.5,0); rewards = scores − 0.1·kld.
  ExpectTensorNear(r.token_level_rewards, Mat({{-0.05, 0, 1}, {0, 2.05, 0}}),
                   1e-12);
  EXPECT_NEAR(r.metrics["actor/reward_kl_penalty"],
              (0.5 / 3.0 - 0.5 / 2.0) / 2.0, 1e-8);
  EXPECT_DOUBLE_EQ(r.metrics["actor/reward_kl_penalty_coeff"], 0.1);
}

TEST(ComputeRewardsTest, ScoresMinusRatioTimesK1) {
  // verl's compute_rewards: 1 − 0.5·(−1 − −2) = 0.5; 0 − 0.5·(−3 − −1) = 1.
  ExpectTensorNear(
      ComputeRewards(Mat({{1, 0}}), Mat({{-1, -3}}), Mat({{-2, -1}}), 0.5),
      Mat({{0.5, 1.0}}), 1e-12);
}

}  // namespace
}  // namespace verl::rl
