// File: verl/rl/algos/advantage_test.cc
#include "verl/rl/algos/advantage.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/rand.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::ExpectTensorNear;
using testing::Mat;
using testing::Vec;

// Outcome rewards: score s_i at the last valid token of row i.
at::Tensor OutcomeRewards(const std::vector<double>& s, int64_t T,
                          const std::vector<int64_t>& lens = {}) {
  at::Tensor r = at::zeros({static_cast<int64_t>(s.size()), T}, at::kDouble);
  for (size_t i = 0; i < s.size(); ++i)
    r[i][lens.empty() ? T - 1 : lens[i] - 1] = s[i];
  return r;
}

// Per-row advantage (column 0) as a vector.
std::vector<double> Col0(const at::Tensor& a) {
  std::vector<double> v;
  for (int64_t i = 0; i < a.size(0); ++i) v.push_back(a[i][0].item<double>());
  return v;
}

// Naive whitening over valid entries (unbiased var, 1e-8) for references.
at::Tensor NaiveWhiten(const at::Tensor& x, const at::Tensor& m) {
  double n = 0, s = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (m.reshape(-1)[i].item<double>() > 0) {
      n += 1;
      s += x.reshape(-1)[i].item<double>();
    }
  const double mu = s / n;
  double ss = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (m.reshape(-1)[i].item<double>() > 0) {
      const double d = x.reshape(-1)[i].item<double>() - mu;
      ss += d * d;
    }
  const double var = ss / (n - 1);
  return (x - mu) / std::sqrt(var + 1e-8);
}

TEST(GaeTest, HandComputedReturnsAndWhitenedAdvantages) {
  // γ=0.9, λ=0.8, V=0.5, r=(0,0,1): g2 = 0.5, g1 = −0.05 + 0.72·0.5 = 0.31,
  // g0 = −0.05 + 0.72·0.31 = 0.1732.
  at::Tensor r = Mat({{0, 0, 1}, {0, 0, 1}});
  at::Tensor v = Mat({{0.5, 0.5, 0.5}, {0.5, 9.0, 0.5}});
  // Row 1 masks its middle token (a tool token): GAE carries through it.
  at::Tensor m = Mat({{1, 1, 1}, {1, 0, 1}});
  AdvantageOutput out = *ComputeGaeAdvantageReturn(r, v, m, 0.9, 0.8);
  at::Tensor raw = Mat({{0.1732, 0.31, 0.5}, {0.31, 0.5, 0.5}});
  ExpectTensorNear(out.returns, raw + v, 1e-12);
  ExpectTensorNear(out.advantages * m, NaiveWhiten(raw, m) * m, 1e-6);
}

class GrpoTest : public ::testing::Test {
 protected:
  // Group a: scores 1,0,1; group b: 0.5,0.5; group c (singleton): 2.
  std::vector<std::string> uids_ = {"a", "b", "a", "c", "b", "a"};
  std::vector<double> s_ = {1, 0.5, 0, 2, 0.5, 1};
  at::Tensor r_ = OutcomeRewards(s_, 3);
  at::Tensor m_ = at::ones({6, 3}, at::kDouble);
};

TEST_F(GrpoTest, HandComputed) {
  AdvantageOutput out = ComputeGrpoOutcomeAdvantage(r_, m_, uids_, true);
  // Group a: μ = 2/3, σ = sqrt((1/9 + 4/9 + 1/9)/2) = sqrt(1/3).
  const double sa = std::sqrt(1.0 / 3.0) + 1e-6;
  std::vector<double> expected = {(1 - 2.0 / 3) / sa, 0.0, (0 - 2.0 / 3) / sa,
                                  2.0 / (1 + 1e-6),   0.0, (1 - 2.0 / 3) / sa};
  std::vector<double> got = Col0(out.advantages);
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], expected[i], 1e-9);
  ExpectTensorNear(out.returns, out.advantages);
}

TEST_F(GrpoTest, DrGrpoSumsToZeroPerGroup) {
  at::manual_seed(0);
  at::Tensor r = at::randn({6, 3}, at::kDouble);
  AdvantageOutput out = ComputeGrpoOutcomeAdvantage(r, m_, uids_, false);
  std::vector<double> a = Col0(out.advantages);
  EXPECT_NEAR(a[0] + a[2] + a[5], 0.0, 1e-12);
  EXPECT_NEAR(a[1] + a[4], 0.0, 1e-12);
  EXPECT_NEAR(a[3], r[3].sum().item<double>(), 1e-12);  // singleton: μ = 0
}

TEST_F(GrpoTest, MaskZeroesPadding) {
  at::Tensor m =
      Mat({{1, 1, 0}, {1, 0, 0}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}});
  AdvantageOutput out = ComputeGrpoOutcomeAdvantage(r_, m, uids_, true);
  EXPECT_EQ(out.advantages[0][2].item<double>(), 0.0);
  EXPECT_EQ(out.advantages[1][1].item<double>(), 0.0);
}

// Grouping is by uid, not position: permuting rows permutes the output.
TEST(AdvantageInvariantTest, GroupingByUidIsPermutationEquivariant) {
  at::manual_seed(1);
  std::vector<std::string> uids;
  for (int g = 0; g < 4; ++g)
    for (int k = 0; k < 4; ++k) uids.push_back("uid" + std::to_string(g));
  at::Tensor r = at::randn({16, 5}, at::kDouble);
  at::Tensor m = (at::rand({16, 5}, at::kDouble) > 0.2).to(at::kDouble);
  std::vector<int64_t> perm(16);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(7));
  at::Tensor p = at::tensor(perm, at::kLong);
  std::vector<std::string> uids_p;
  for (int64_t i : perm) uids_p.push_back(uids[i]);
  for (const char* name : {"grpo", "grpo_vectorized", "rloo", "rloo_vectorized",
                           "opo", "gpg", "reinforce_plus_plus_baseline"}) {
    AdvantageInputs in{r, m, uids};
    AdvantageInputs in_p{r.index_select(0, p), m.index_select(0, p), uids_p};
    AdvantageOutput a = *ComputeAdvantage(name, in, {});
    AdvantageOutput b = *ComputeAdvantage(name, in_p, {});
    EXPECT_TRUE(
        at::allclose(a.advantages.index_select(0, p), b.advantages, 1e-9, 1e-9))
        << name;
  }
}

TEST_F(GrpoTest, VectorizedMatchesLoopWhenVarianceAboveEpsilon) {
  at::manual_seed(2);
  at::Tensor r = at::randn({6, 3}, at::kDouble);
  for (bool norm : {true, false}) {
    AdvantageOutput a = ComputeGrpoOutcomeAdvantage(r, m_, uids_, norm);
    AdvantageOutput b =
        ComputeGrpoVectorizedOutcomeAdvantage(r, m_, uids_, norm);
    ExpectTensorNear(a.advantages, b.advantages, 1e-9);
  }
  // Zero-variance group b: both give 0 (vectorized floors var at eps).
  AdvantageOutput c =
      ComputeGrpoVectorizedOutcomeAdvantage(r_, m_, uids_, true);
  EXPECT_NEAR(c.advantages[1][0].item<double>(), 0.0, 1e-12);
}

TEST(GrpoPasskTest, OnlyBestGetsMarginAndSingletonIsError) {
  std::vector<std::string> uids = {"a", "a", "a", "b", "b"};
  at::Tensor r = OutcomeRewards({1, 0, 0.5, 0.2, 0.7}, 2);
  at::Tensor m = at::ones({5, 2}, at::kDouble);
  AdvantageOutput out = *ComputeGrpoPasskOutcomeAdvantage(r, m, uids, false);
  std::vector<double> a = Col0(out.advantages);
  EXPECT_NEAR(a[0], 0.5, 1e-12);
  EXPECT_EQ(a[1], 0.0);
  EXPECT_EQ(a[2], 0.0);
  EXPECT_EQ(a[3], 0.0);
  EXPECT_NEAR(a[4], 0.5, 1e-12);
  AdvantageOutput n = *ComputeGrpoPasskOutcomeAdvantage(r, m, uids, true);
  EXPECT_NEAR(n.advantages[0][0].item<double>(), 0.5 / (0.5 + 1e-6), 1e-9);
  EXPECT_THAT(
      ComputeGrpoPasskOutcomeAdvantage(r, m, {"a", "a", "a", "b", "c"}, true),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "grpo_passk needs at least 2 responses per uid; uid 'b' has"));
}

TEST(RlooTest, LeaveOneOutAndSingletons) {
  std::vector<std::string> uids = {"a", "a", "a", "s"};
  at::Tensor r = OutcomeRewards({1, 0, 0.5, 2}, 2);
  at::Tensor m = at::ones({4, 2}, at::kDouble);
  std::vector<double> a =
      Col0(ComputeRlooOutcomeAdvantage(r, m, uids).advantages);
  EXPECT_NEAR(a[0], 1 - 0.25, 1e-12);
  EXPECT_NEAR(a[1], 0 - 0.75, 1e-12);
  EXPECT_NEAR(a[2], 0.5 - 0.5, 1e-12);
  EXPECT_NEAR(a[3], 2.0, 1e-12);  // rloo keeps a singleton's raw score
  std::vector<double> v =
      Col0(ComputeRlooVectorizedOutcomeAdvantage(r, m, uids).advantages);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(v[i], a[i], 1e-12);
  EXPECT_EQ(v[3], 0.0);  // rloo_vectorized zeroes it
}

TEST(ReinforcePlusPlusTest, DiscountedReturnsResetAtPaddingThenWhiten) {
  at::Tensor r = Mat({{0, 0, 1}, {0, 1, 0}});
  at::Tensor m = Mat({{1, 1, 1}, {1, 1, 0}});
  AdvantageOutput out = *ComputeReinforcePlusPlusOutcomeAdvantage(r, m, 0.5);
  at::Tensor returns = Mat({{0.25, 0.5, 1}, {0.5, 1, 0}});
  ExpectTensorNear(out.returns, returns, 1e-12);
  ExpectTensorNear(out.advantages, NaiveWhiten(returns, m) * m, 1e-6);
}

TEST(ReinforcePlusPlusBaselineTest, GroupCenteredThenBatchWhitened) {
  std::vector<std::string> uids = {"a", "a", "b"};
  at::Tensor r = OutcomeRewards({1, 0, 3}, 2);
  at::Tensor m = Mat({{1, 1}, {1, 0}, {1, 1}});
  AdvantageOutput out =
      *ComputeReinforcePlusPlusBaselineOutcomeAdvantage(r, m, uids);
  at::Tensor tiled = Mat({{0.5, 0.5}, {-0.5, 0}, {3, 3}});  // singleton μ = 0
  ExpectTensorNear(out.advantages, NaiveWhiten(tiled, m) * m, 1e-6);
}

TEST(WhitenedEstimatorsTest, OneValidTokenIsAnErrorNamingTheEstimator) {
  // Batch whitening needs 2 valid tokens (verl's masked_var raises); the
  // estimators return the error instead of aborting the process.
  AdvantageInputs in;
  in.token_level_rewards = Mat({{1, 0}});
  in.response_mask = Mat({{1, 0}});
  in.values = Mat({{0, 0}});
  in.index = {"a"};
  for (const char* name :
       {"gae", "reinforce_plus_plus", "reinforce_plus_plus_baseline"}) {
    absl::StatusOr<AdvantageOutput> out =
        ComputeAdvantage(name, in, AdvantageConfig{});
    ASSERT_THAT(out,
                StatusIs(absl::StatusCode::kInvalidArgument, "adv_estimator"))
        << name;
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find(name), std::string::npos)
        << out.status();
    EXPECT_NE(out.status().message().find("at least 2 valid"),
              std::string::npos)
        << out.status();
  }
}

TEST(RemaxTest, ReturnsMinusGreedyBaseline) {
  AdvantageOutput out = ComputeRemaxOutcomeAdvantage(
      Mat({{0, 1, 2}}), Vec({0.5}), Mat({{1, 1, 0}}));
  ExpectTensorNear(out.returns, Mat({{1, 1, 0}}));
  ExpectTensorNear(out.advantages, Mat({{0.5, 0.5, 0}}));
}

TEST(OpoTest, LengthWeightedBaseline) {
  // Lengths 2 and 3, scores 1 and 0: b = (2·1 + 3·0)/5 = 0.4.
  at::Tensor r = OutcomeRewards({1, 0, 5}, 3, {2, 3, 1});
  at::Tensor m = Mat({{1, 1, 0}, {1, 1, 1}, {1, 0, 0}});
  std::vector<double> a =
      Col0(ComputeOpoOutcomeAdvantage(r, m, {"g", "g", "s"}).advantages);
  EXPECT_NEAR(a[0], 0.6, 1e-12);
  EXPECT_NEAR(a[1], -0.4, 1e-12);
  EXPECT_NEAR(a[2], 5.0, 1e-12);
}

TEST(GroupMeanStdTest, HandComputedGroupsAndSingletonFallback) {
  // Group 0: (1, 3, 5) → μ 3, σ 2; group 1: (2) → singleton μ 0, σ 1;
  // group 2: (4, 4) → var 0 floored at eps → σ = sqrt(1e-6) = 1e-3.
  GroupStats g = GroupMeanStd(Vec({1, 2, 3, 4, 5, 4}),
                              at::tensor({0, 1, 0, 2, 0, 2}, at::kLong));
  ExpectTensorNear(g.mean, Vec({3, 0, 4}), 1e-12);
  ExpectTensorNear(g.std, Vec({2, 1, 1e-3}), 1e-12);
  ExpectTensorNear(g.count, Vec({3, 1, 2}), 1e-12);
}

TEST(GpgTest, AlphaScalesByNonzeroFraction) {
  at::Tensor r = OutcomeRewards({1, 0, 1, 0}, 2);
  at::Tensor m = at::ones({4, 2}, at::kDouble);
  std::vector<double> a =
      Col0(ComputeGpgOutcomeAdvantage(r, m, {"a", "a", "b", "b"}).advantages);
  // α = 4/2; μ = 0.5 in both groups.
  EXPECT_NEAR(a[0], 1.0, 1e-12);
  EXPECT_NEAR(a[1], -1.0, 1e-12);
  EXPECT_NEAR(a[2], 1.0, 1e-12);
  EXPECT_NEAR(a[3], -1.0, 1e-12);
}

TEST(GpgTest, FNormDividesTheAdvantage) {
  // verl's f_norm: α·(s − μ)/f_norm; α = 3/2, μ_a = 1.5, singleton μ = 0.
  AdvantageInputs in;
  in.token_level_rewards = OutcomeRewards({1, 2, 0}, 2);
  in.response_mask = Mat({{1, 1}, {1, 0}, {1, 1}});
  in.index = {"a", "a", "b"};
  AdvantageConfig cfg;
  cfg.gpg_f_norm = 4.0;
  absl::StatusOr<AdvantageOutput> out = ComputeAdvantage("gpg", in, cfg);
  ASSERT_TRUE(out.ok()) << out.status();
  ExpectTensorNear(out->advantages,
                   Mat({{-0.1875, -0.1875}, {0.1875, 0}, {0, 0}}), 1e-12);
}

TEST(OptimalTokenBaselineTest, HandComputedWeightedBaseline) {
  // Row 0: π = 0.5, Σπ² = 0.5 → w = 0.5, W = (0.5, 1).
  // Row 1: π = 0.25, Σπ² = 0.5 → w = 1, W = (1, 2).
  // G0 = (1,1), G1 = (0,0): B_0 = 0.5/1.5, B_1 = 1/3.
  at::Tensor r = Mat({{0, 1}, {0, 0}, {0, 3}});
  at::Tensor m = at::ones({3, 2}, at::kDouble);
  at::Tensor lp = Mat({{std::log(0.5), std::log(0.5)},
                       {std::log(0.25), std::log(0.25)},
                       {0, 0}});
  at::Tensor sp = at::full({3, 2}, 0.5, at::kDouble);
  AdvantageOutput out = ComputeOptimalTokenBaselineAdvantage(
      r, m, lp, sp, {"g", "g", "s"}, at::Tensor(), false);
  ExpectTensorNear(out.advantages,
                   Mat({{2.0 / 3, 2.0 / 3}, {-1.0 / 3, -1.0 / 3}, {3, 3}}),
                   1e-7);
  // IS weights ρ scale w by ρ²: ρ = 2 on row 1 → w = 4, W = (4, 8);
  // B_0 = 0.5/4.5, B_1 = 1/9.
  at::Tensor rho = at::ones({3, 2}, at::kDouble);
  rho[1].fill_(2.0);
  AdvantageOutput w = ComputeOptimalTokenBaselineAdvantage(
      r, m, lp, sp, {"g", "g", "s"}, rho, false);
  EXPECT_NEAR(w.advantages[0][0].item<double>(), 1 - 1.0 / 9, 1e-7);
}

TEST(OptimalTokenBaselineTest, ZeroTailForSingleLongestTrajectory) {
  at::Tensor r = Mat({{0, 0, 1}, {2, 0, 0}});
  at::Tensor m = Mat({{1, 1, 1}, {1, 0, 0}});
  at::Tensor lp = at::full({2, 3}, std::log(0.5), at::kDouble);
  at::Tensor sp = at::full({2, 3}, 0.5, at::kDouble);
  AdvantageOutput out = ComputeOptimalTokenBaselineAdvantage(
      r, m, lp, sp, {"g", "g"}, at::Tensor(), true);
  // t=0: both valid, W=0.5 each → B = (1 + 2)/2 = 1.5; t≥1: only row 0,
  // zero tail beyond the second-longest length (1) → baseline 0.
  ExpectTensorNear(out.advantages, Mat({{-0.5, 1, 1}, {0.5, 0, 0}}), 1e-7);
}

TEST(OptimalTokenBaselineTest, MultiTurnCompactsTrainedTokens) {
  // Row 0 trains positions 0 and 2 (1 is a tool token); row 1 positions 0, 1.
  at::Tensor r = Mat({{0, 5, 1}, {0, 0, 0}});
  at::Tensor m = Mat({{1, 0, 1}, {1, 1, 0}});
  at::Tensor lp = at::full({2, 3}, std::log(0.5), at::kDouble);
  at::Tensor sp = at::full({2, 3}, 0.5, at::kDouble);
  AdvantageOutput tir = ComputeMultiTurnOptimalTokenBaselineAdvantage(
      r, m, lp, sp, {"g", "g"}, at::Tensor(), false);
  // Compacted: both rows have 2 trained tokens, G0 = (1,1), G1 = (0,0), equal
  // weights → B = 0.5 at both compacted positions.
  ExpectTensorNear(tir.advantages, Mat({{0.5, 0, 0.5}, {-0.5, -0.5, 0}}), 1e-7);
  // Returns as verl: (r·m) reverse-cumsum on the whole grid, so the tool
  // token (row 0, position 1) carries the reward-to-go 1 (its reward 5 is
  // masked out).
  ExpectTensorNear(tir.returns, Mat({{1, 1, 1}, {0, 0, 0}}), 1e-12);
}

TEST(OptimalTokenBaselineTest, MultiTurnLeavesZeroLengthResponsesOut) {
  // Row 1 of group g has no trained token: verl drops it from the group, so
  // row 0 is alone (baseline 0) and keeps its reward-to-go as advantage.
  at::Tensor r = Mat({{0, 1}, {0, 0}});
  at::Tensor m = Mat({{1, 1}, {0, 0}});
  at::Tensor lp = at::full({2, 2}, std::log(0.5), at::kDouble);
  at::Tensor sp = at::full({2, 2}, 0.5, at::kDouble);
  AdvantageOutput tir = ComputeMultiTurnOptimalTokenBaselineAdvantage(
      r, m, lp, sp, {"g", "g"}, at::Tensor(), /*handle_zero_tail=*/false);
  ExpectTensorNear(tir.advantages, Mat({{1, 1}, {0, 0}}), 1e-12);
  ExpectTensorNear(tir.returns, Mat({{1, 1}, {0, 0}}), 1e-12);
}

TEST(AdvantageRegistryTest, BuiltinsCustomAndErrors) {
  std::vector<std::string> names = AdvantageEstimatorNames();
  for (const char* n :
       {"gae", "grpo", "grpo_vectorized", "grpo_passk", "rloo",
        "rloo_vectorized", "reinforce_plus_plus",
        "reinforce_plus_plus_baseline", "remax", "opo", "gpg",
        "optimal_token_baseline", "tir_optimal_token_baseline"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
  absl::StatusOr<AdvantageEstimatorFn> missing = GetAdvantageEstimator("ppo2");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("grpo"), std::string::npos);

  ASSERT_TRUE(RegisterAdvantageEstimator(
                  "twice",
                  [](const AdvantageInputs& in, const AdvantageConfig&)
                      -> absl::StatusOr<AdvantageOutput> {
                    at::Tensor a = 2.0 * in.token_level_rewards;
                    return AdvantageOutput{a, a};
                  })
                  .ok());
  EXPECT_THAT(
      RegisterAdvantageEstimator("twice", nullptr),
      StatusIs(absl::StatusCode::kAlreadyExists,
               "algorithm.adv_estimator: 'twice' is already registered"));
  AdvantageInputs in{Mat({{1, 2}}), Mat({{1, 1}}), {"u"}};
  ExpectTensorNear(ComputeAdvantage("twice", in, {})->advantages,
                   Mat({{2, 4}}));

  // Missing inputs are reported, not crashed on.
  EXPECT_THAT(ComputeAdvantage("gae", in, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "adv_estimator 'gae' needs 'values' in the batch"));
  EXPECT_THAT(
      ComputeAdvantage("remax", in, {}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "adv_estimator 'remax' needs 'reward_baselines' in the batch"));
  EXPECT_THAT(ComputeAdvantage("optimal_token_baseline", in, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "adv_estimator 'optimal_token_baseline' needs"));
  AdvantageInputs no_uid{Mat({{1, 2}}), Mat({{1, 1}}), {}};
  EXPECT_THAT(ComputeAdvantage("grpo", no_uid, {}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "adv_estimator 'grpo' needs one uid per row"));
}

}  // namespace
}  // namespace verl::rl
