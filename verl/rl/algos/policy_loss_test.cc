// File: verl/rl/algos/policy_loss_test.cc
#include "verl/rl/algos/policy_loss.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::ExpectTensorNear;
using testing::Mat;

PolicyLossInputs Inputs(const at::Tensor& log_ratio, const at::Tensor& adv,
                        const at::Tensor& mask) {
  PolicyLossInputs in;
  in.old_log_prob = at::full_like(log_ratio, -1.0);
  in.log_prob = (in.old_log_prob + log_ratio).detach().requires_grad_(true);
  in.advantages = adv;
  in.response_mask = mask;
  return in;
}

PolicyLossOutput RunLoss(const std::string& mode, const PolicyLossInputs& in,
                         const PolicyLossConfig& cfg = {}) {
  absl::StatusOr<PolicyLossFn> fn = GetPolicyLoss(mode);
  EXPECT_TRUE(fn.ok()) << fn.status();
  absl::StatusOr<PolicyLossOutput> out = (*fn)(in, cfg);
  EXPECT_TRUE(out.ok()) << out.status();
  return *out;
}

// Ratios (1.5, 0.5, 1.1, 5) with A = (1, 1, −1, −1), ε = 0.2, c = 3:
//   t0: max(−1.5, −1.2) = −1.2 (clipped)   t1: max(−0.5, −0.8) = −0.5
//   t2: 1.1                                t3: min(3, max(5, 1.2)) = 3 (dual)
class VanillaTest : public ::testing::Test {
 protected:
  at::Tensor ratio_ =
      Mat({{std::log(1.5), std::log(0.5), std::log(1.1), std::log(5.0)}});
  at::Tensor adv_ = Mat({{1, 1, -1, -1}});
  at::Tensor mask_ = at::ones({1, 4}, at::kDouble);
};

TEST_F(VanillaTest, HandComputedLossAndMetrics) {
  PolicyLossInputs in = Inputs(ratio_, adv_, mask_);
  PolicyLossOutput out = RunLoss("vanilla", in);
  EXPECT_NEAR(out.loss.item<double>(), (-1.2 - 0.5 + 1.1 + 3.0) / 4, 1e-12);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 0.25, 1e-8);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac_lower"], 0.25, 1e-8);
  EXPECT_NEAR(out.metrics["actor/ppo_kl"], -std::log(1.5 * 0.5 * 1.1 * 5) / 4,
              1e-8);
  out.loss.backward();
  // Only unclipped tokens carry gradient −A·r/N.
  ExpectTensorNear(in.log_prob.grad(), Mat({{0, -0.5 / 4, 1.1 / 4, 0}}), 1e-12);
}

TEST_F(VanillaTest, ClipHigherAndIsWeights) {
  PolicyLossConfig cfg;
  cfg.clip_ratio_high = 0.28;
  EXPECT_NEAR(
      RunLoss("vanilla", Inputs(ratio_, adv_, mask_), cfg).loss.item<double>(),
      (-1.28 - 0.5 + 1.1 + 3.0) / 4, 1e-12);
  PolicyLossInputs in = Inputs(ratio_, adv_, mask_);
  in.rollout_is_weights = Mat({{2, 1, 1, 1}});
  EXPECT_NEAR(RunLoss("vanilla", in).loss.item<double>(),
              (-2.4 - 0.5 + 1.1 + 3.0) / 4, 1e-12);
}

TEST_F(VanillaTest, DualClipBoundsNegativeAdvantageLoss) {
  at::manual_seed(5);
  at::Tensor lr = 3.0 * at::randn({16, 8}, at::kDouble);
  at::Tensor adv = at::randn({16, 8}, at::kDouble);
  PolicyLossConfig cfg;
  cfg.loss_agg_mode = kSeqMeanTokenSumNorm;
  cfg.agg.loss_scale_factor = 1.0;
  // Per token (B=T=1 slices): loss ≤ |A|·c whenever A < 0.
  for (int64_t i = 0; i < 16; ++i)
    for (int64_t t = 0; t < 8; ++t) {
      at::Tensor one = at::ones({1, 1}, at::kDouble);
      double a = adv[i][t].item<double>();
      PolicyLossOutput o = RunLoss(
          "vanilla",
          Inputs(lr[i][t].reshape({1, 1}), adv[i][t].reshape({1, 1}), one),
          cfg);
      if (a < 0) {
        EXPECT_LE(o.loss.item<double>(), -a * cfg.clip_ratio_c + 1e-12);
      }
    }
  cfg.clip_ratio_c = 1.0;
  EXPECT_THAT(
      GetPolicyLoss("vanilla").value()(Inputs(ratio_, adv_, mask_), cfg),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "actor.clip_ratio_c must be > 1.0 for dual-clip PPO, got 1"));
}

TEST(GspoTest, SequenceRatioAndSeqMeanTokenMean) {
  // Row 0: Δ = (0.1, 0.3) → s = 0.2, A = 1; row 1: Δ = 0 (1 valid), A = −1.
  PolicyLossInputs in = Inputs(Mat({{0.1, 0.3}, {0.0, 7.0}}),
                               Mat({{1, 1}, {-1, -1}}), Mat({{1, 1}, {1, 0}}));
  PolicyLossConfig cfg;
  cfg.clip_ratio = 0.5;
  cfg.loss_agg_mode = kTokenMean;  // ignored: GSPO forces seq-mean-token-mean
  PolicyLossOutput out = RunLoss("gspo", in, cfg);
  EXPECT_NEAR(out.loss.item<double>(), (-std::exp(0.2) + 1.0) / 2, 1e-7);
  out.loss.backward();
  // dℓ_t/dlogp_t = −A·r; ÷2 tokens ÷2 sequences.
  EXPECT_NEAR(in.log_prob.grad()[0][0].item<double>(), -std::exp(0.2) / 4,
              1e-7);
  EXPECT_EQ(out.metrics["actor/pg_clipfrac_lower"], 0.0);
}

TEST(SapoTest, SoftGateAtRatioOne) {
  PolicyLossInputs in =
      Inputs(Mat({{0.0, 0.0}}), Mat({{1, -1}}), at::ones({1, 2}, at::kDouble));
  // gate = sigmoid(0)·4/τ: A>0 → 2, A<0 (τ=1.05) → 2/1.05.
  PolicyLossOutput out = RunLoss("sapo", in);
  EXPECT_NEAR(out.loss.item<double>(), (-2.0 + 2.0 / 1.05) / 2, 1e-7);
}

TEST(GpgLossTest, NoRatio) {
  PolicyLossInputs in =
      Inputs(Mat({{0.0, 0.0}}), Mat({{2, -1}}), at::ones({1, 2}, at::kDouble));
  // logp = −1: ℓ = −logp·A = (2, −1).
  EXPECT_NEAR(RunLoss("gpg", in).loss.item<double>(), 0.5, 1e-12);
}

TEST(CispoTest, StopGradClippedRatioTimesLogProb) {
  PolicyLossInputs in = Inputs(Mat({{std::log(1.5), 0.0}}), Mat({{1, 1}}),
                               at::ones({1, 2}, at::kDouble));
  PolicyLossOutput out = RunLoss("cispo", in);
  const double lp0 = -1.0 + std::log(1.5);
  EXPECT_NEAR(out.loss.item<double>(), (-1.2 * lp0 + 1.0) / 2, 1e-12);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 0.5, 1e-8);
  // verl reports pg_clipfrac_lower = 0 for CISPO (no dual clip).
  ASSERT_TRUE(out.metrics.count("actor/pg_clipfrac_lower"));
  EXPECT_EQ(out.metrics["actor/pg_clipfrac_lower"], 0.0);
  out.loss.backward();
  ExpectTensorNear(in.log_prob.grad(), Mat({{-1.2 / 2, -1.0 / 2}}), 1e-12);
}

TEST(ClipCovTest, DropsGradientOfHighCovarianceToken) {
  // A = (3,0,0,0), logp = (0,−2,−2,−2): cov_0 = 2.25·1.5 = 3.375 ∈ (1, 5).
  PolicyLossInputs in;
  in.log_prob = Mat({{0, -2, -2, -2}}).requires_grad_(true);
  in.old_log_prob = in.log_prob.detach().clone();
  in.advantages = Mat({{3, 0, 0, 0}});
  in.response_mask = at::ones({1, 4}, at::kDouble);
  PolicyLossOutput out = RunLoss("clip_cov", in);
  EXPECT_NEAR(out.loss.item<double>(), 0.0, 1e-12);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 0.25, 1e-8);
}

TEST(KlCovTest, AddsKlPenaltyToTopCovarianceToken) {
  PolicyLossInputs in;
  in.log_prob = Mat({{0, -2, -2, -2}}).requires_grad_(true);
  in.old_log_prob = in.log_prob.detach() - 0.1;
  in.advantages = Mat({{3, 0, 0, 0}});
  in.response_mask = at::ones({1, 4}, at::kDouble);
  PolicyLossConfig cfg;
  cfg.kl_cov_ratio = 0.25;  // k = 1
  PolicyLossOutput out = RunLoss("kl_cov", in, cfg);
  EXPECT_NEAR(out.loss.item<double>(), (-3 * std::exp(0.1) + 0.1 * 0.1) / 4,
              1e-12);
  EXPECT_NEAR(out.metrics["actor/ppo_kl"], 0.1, 1e-8);
}

TEST(GeoMeanTest, LogSpaceClipAndPlainMean) {
  // A = 1: Δ' = (min(0.5, 0.2), −0.1) → mean 0.05 → R = e^0.05.
  PolicyLossInputs in =
      Inputs(Mat({{0.5, -0.1}, {0.0, 0.0}}), Mat({{1, 1}, {-2, -2}}),
             at::ones({2, 2}, at::kDouble));
  PolicyLossOutput out = RunLoss("geo_mean", in);
  EXPECT_NEAR(out.loss.item<double>(), (-std::exp(0.05) + 2.0) / 2, 1e-7);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac"], 0.25, 1e-8);
  EXPECT_NEAR(out.metrics["actor/pg_clipfrac_lower"], 0.0, 1e-8);
}

TEST(BypassModeTest, PpoClipEqualsVanillaAndReinforceUsesIsWeights) {
  at::Tensor lr = Mat({{std::log(1.5), std::log(0.5), std::log(3.0)}});
  at::Tensor adv = Mat({{1, -1, 1}});
  at::Tensor mask = at::ones({1, 3}, at::kDouble);
  PolicyLossConfig cfg;
  EXPECT_NEAR(
      RunLoss("bypass_mode", Inputs(lr, adv, mask), cfg).loss.item<double>(),
      RunLoss("vanilla", Inputs(lr, adv, mask), cfg).loss.item<double>(),
      1e-12);
  cfg.rollout_correction.loss_type = "reinforce";
  cfg.rollout_correction.rollout_is = "token";
  cfg.rollout_correction.rollout_is_threshold = 2.0;
  PolicyLossInputs in = Inputs(lr, adv, mask);
  PolicyLossOutput out = RunLoss("bypass_mode", in, cfg);
  // w = (1.5, 0.5, 3 → 2); ℓ = −A·logp·w with logp = −1 + Δ.
  const double l0 = -1.0 + std::log(1.5), l1 = -1.0 + std::log(0.5),
               l2 = -1.0 + std::log(3.0);
  EXPECT_NEAR(out.loss.item<double>(), (-(1.5 * l0) + 0.5 * l1 - 2.0 * l2) / 3,
              1e-9);
  EXPECT_TRUE(out.metrics.count("rollout_corr/rollout_is_mean"));
  // verl's REINFORCE loss: ppo_kl = masked mean of −(log π − log π_rollout).
  ASSERT_TRUE(out.metrics.count("actor/ppo_kl"));
  EXPECT_NEAR(out.metrics["actor/ppo_kl"], -std::log(1.5 * 0.5 * 3.0) / 3,
              1e-9);
  cfg.rollout_correction.loss_type = "bogus";
  EXPECT_THAT(
      GetPolicyLoss("bypass_mode").value()(in, cfg),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "actor.policy_loss.rollout_correction.loss_type: unknown"));
}

TEST(PolicyLossRegistryTest, NamesAndUnknown) {
  std::vector<std::string> names = PolicyLossNames();
  for (const char* n : {"vanilla", "gspo", "sapo", "gpg", "clip_cov", "kl_cov",
                        "geo_mean", "cispo", "bypass_mode"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  EXPECT_EQ(GetPolicyLoss("ppo").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      RegisterPolicyLoss("vanilla", ComputePolicyLossGpg),
      StatusIs(absl::StatusCode::kAlreadyExists,
               "actor.policy_loss.loss_mode: 'vanilla' is already registered"));
}

}  // namespace
}  // namespace verl::rl
