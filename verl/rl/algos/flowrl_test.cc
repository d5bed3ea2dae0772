// File: verl/rl/algos/flowrl_test.cc
//
// FlowRL's loss against the formula evaluated by hand on fixed tensors,
// its gradients against the closed form, each variant's weights, and the
// recipe's group-centred advantage.
#include "verl/rl/algos/flowrl.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "verl/core/test_util.h"
#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;
using testing::ExpectTensorNear;
using testing::Mat;

// Row 0: 3 tokens, row 1: 2 tokens (last masked).
struct Fixture {
  at::Tensor mask = Mat({{1, 1, 1}, {1, 1, 0}});
  at::Tensor logp = Mat({{-1.0, -0.5, -2.0}, {-0.3, -1.2, -9.0}});
  at::Tensor old_lp = Mat({{-1.1, -0.4, -2.0}, {-0.3, -1.0, -5.0}});
  at::Tensor ref_lp = Mat({{-0.9, -0.7, -1.5}, {-0.5, -1.1, -4.0}});
  at::Tensor adv = Mat({{0.5, 0.5, 0.5}, {-0.5, -0.5, 0.0}});
  at::Tensor log_z = Mat({{0.3, -0.2}}).reshape({2});
  FlowRlInputs Inputs() const {
    return {logp, old_lp, ref_lp, log_z, adv, mask, at::Tensor()};
  }
};

// verl's masked_mean divides by (count + 1e-8): hand values agree to ~1e-8.
constexpr double kTol = 1e-6;

// δ_i and w_i by hand for the fixture (β = 15).
struct Hand {
  double delta[2];
  double w_raw[2];
};
Hand HandValues() {
  Hand h;
  // Row 0: mean logp −3.5/3, mean ref −3.1/3, r̂ 0.5, log_z 0.3.
  h.delta[0] = 0.3 + (-3.5 / 3) - 15 * 0.5 - (-3.1 / 3);
  // Row 1: mean logp −1.5/2, mean ref −1.6/2, r̂ −0.5, log_z −0.2.
  h.delta[1] = -0.2 + (-1.5 / 2) - 15 * -0.5 - (-1.6 / 2);
  h.w_raw[0] = std::exp((-1.0 + 1.1) + (-0.5 + 0.4) + 0.0);
  h.w_raw[1] = std::exp(0.0 + (-1.2 + 1.0));
  return h;
}

TEST(FlowRlTest, LossAndMetricsMatchTheFormula) {
  Fixture f;
  const Hand h = HandValues();
  for (const std::string variant : {"vanilla", "flowrl_clip"}) {
    FlowRlConfig c;
    c.variant = variant;
    auto out = ComputeFlowRlLoss(f.Inputs(), c);
    ASSERT_TRUE(out.ok()) << out.status();
    double expected = 0;
    for (int i = 0; i < 2; ++i) {
      double w = h.w_raw[i];
      if (variant == "flowrl_clip") w = std::min(std::max(w, 0.8), 1.28);
      expected += w * h.delta[i] * h.delta[i] / 2;
    }
    EXPECT_NEAR(out->loss.item<double>(), expected, kTol) << variant;
    EXPECT_NEAR(out->metrics.at("actor/log_z"), 0.05, 1e-12);
    EXPECT_NEAR(out->metrics.at("actor/tb_residual"),
                (h.delta[0] + h.delta[1]) / 2, kTol);
    EXPECT_NEAR(out->metrics.at("actor/final_loss"), expected, kTol);
  }
  // w_raw[1] = e^-0.2 = 0.82 stays, w_raw[0] = 1 stays: clip changes nothing
  // here; a larger ratio is clipped to 1.28.
  Fixture big;
  big.logp = big.old_lp + 0.5 * big.mask;
  FlowRlConfig c;
  auto clipped = ComputeFlowRlLoss(big.Inputs(), c);
  ASSERT_TRUE(clipped.ok());
  EXPECT_NEAR(clipped->metrics.at("actor/importance_weight"), 1.28, 1e-12);
  EXPECT_NEAR(clipped->metrics.at("actor/importance_weight_raw"),
              (std::exp(1.5) + std::exp(1.0)) / 2, 1e-9);
}

TEST(FlowRlTest, GradientsAreTheClosedForm) {
  Fixture f;
  const Hand h = HandValues();
  at::Tensor logp = f.logp.clone().requires_grad_(true);
  at::Tensor log_z = f.log_z.clone().requires_grad_(true);
  FlowRlInputs in = f.Inputs();
  in.log_prob = logp;
  in.log_z = log_z;
  FlowRlConfig c;
  c.variant = "vanilla";
  AggOptions agg;
  agg.global_batch_size = 4;  // this rank's 2 rows of a global 4, dp = 2
  agg.dp_size = 2;
  auto out = ComputeFlowRlLoss(in, c, agg);
  ASSERT_TRUE(out.ok());
  out->loss.backward();
  // L = Σ w δ² / 4 · 2 with w detached: ∂L/∂logZ_i = w_i δ_i, and
  // ∂L/∂logp_it = w_i δ_i / |y_i| on valid tokens.
  at::Tensor gz = log_z.grad();
  EXPECT_NEAR(gz[0].item<double>(), h.w_raw[0] * h.delta[0], kTol);
  EXPECT_NEAR(gz[1].item<double>(), h.w_raw[1] * h.delta[1], kTol);
  const double g0 = h.w_raw[0] * h.delta[0] / 3,
               g1 = h.w_raw[1] * h.delta[1] / 2;
  ExpectTensorNear(logp.grad(), Mat({{g0, g0, g0}, {g1, g1, 0}}), kTol);
}

TEST(FlowRlTest, TruncatedImportanceSamplingVariant) {
  Fixture f;
  FlowRlInputs in = f.Inputs();
  in.rollout_log_probs =
      f.old_lp - 0.1 * f.mask;  // π_old/π_rollout = e^0.1 per token
  FlowRlConfig c;
  c.variant = "flowrl_clip_tis";
  c.tis_imp_ratio_cap = 1.2;
  auto out = ComputeFlowRlLoss(in, c);
  ASSERT_TRUE(out.ok()) << out.status();
  const Hand h = HandValues();
  // Row 0: TIS e^0.3 = 1.35 → 1.2; row 1: e^0.2 = 1.22 → 1.2.
  const double expected = (h.w_raw[0] * 1.2 * h.delta[0] * h.delta[0] +
                           h.w_raw[1] * 1.2 * h.delta[1] * h.delta[1]) /
                          2;
  EXPECT_NEAR(out->loss.item<double>(), expected, kTol);
  in.rollout_log_probs = at::Tensor();
  EXPECT_THAT(
      ComputeFlowRlLoss(in, c),
      StatusIs(absl::StatusCode::kInvalidArgument, "calculate_log_probs=true"));
  c.variant = "flowrl_gspo";
  EXPECT_THAT(ComputeFlowRlLoss(f.Inputs(), c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unknown value 'flowrl_gspo'"));
  FlowRlInputs no_ref = f.Inputs();
  no_ref.ref_log_prob = at::Tensor();
  EXPECT_THAT(ComputeFlowRlLoss(no_ref, FlowRlConfig()),
              StatusIs(absl::StatusCode::kInvalidArgument, "ref_log_prob"));
}

TEST(FlowRlTest, AdvantageIsTheGroupCentredScore) {
  AdvantageInputs in;
  in.token_level_rewards = Mat({{0, 0, 1}, {0, 0, 0}, {0, 2, 0}, {3, 0, 0}});
  in.response_mask = Mat({{1, 1, 1}, {1, 1, 0}, {1, 1, 1}, {1, 0, 0}});
  in.index = {"a", "a", "a", "b"};
  auto out = ComputeAdvantage("flowrl", in, AdvantageConfig());
  ASSERT_TRUE(out.ok()) << out.status();
  // Group a: scores 1, 0, 2 (mean 1); group b alone: mean taken as 0.
  ExpectTensorNear(out->advantages,
                   Mat({{0, 0, 0}, {-1, -1, 0}, {1, 1, 1}, {3, 0, 0}}), 1e-12);
  ExpectTensorNear(out->returns, out->advantages, 0);
}

}  // namespace
}  // namespace verl::rl
