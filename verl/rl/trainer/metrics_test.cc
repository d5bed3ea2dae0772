// File: verl/rl/trainer/metrics_test.cc
#include "verl/rl/trainer/metrics.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/log.h>
#include <gtest/gtest.h>

#include <cmath>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using testing::Mat;
using ::verl::core::testing::StatusIs;

// B=3, prompt width 2, T=3. Prompt lengths 2,1,2; response lengths 3,0,1.
DataMetricsInputs Batch() {
  DataMetricsInputs in;
  in.attention_mask = Mat({{1, 1, 1, 1, 1}, {0, 1, 0, 0, 0}, {1, 1, 1, 0, 0}});
  in.response_mask = Mat({{1, 1, 1}, {0, 0, 0}, {1, 0, 0}});
  in.token_level_scores = Mat({{0, 0, 1}, {5, 0, 0}, {0, 0, 0}});
  in.token_level_rewards = Mat({{0, 0, 0.5}, {5, 0, 0}, {-1, 0, 0}});
  in.advantages = Mat({{1, 2, 3}, {9, 9, 9}, {-1, 0, 0}});
  in.returns = Mat({{1, 1, 2}, {0, 0, 0}, {4, 0, 0}});
  in.values = Mat({{0, 1, 1}, {0, 0, 0}, {2, 0, 0}});
  return in;
}

TEST(DataMetricsTest, VerlKeysAndValues) {
  MetricMap m = *ComputeDataMetrics(Batch(), /*use_critic=*/true);
  EXPECT_DOUBLE_EQ(m["critic/score/mean"], 0.5);  // aborted row excluded
  EXPECT_DOUBLE_EQ(m["critic/score/max"], 1.0);
  EXPECT_DOUBLE_EQ(m["critic/rewards/min"], -1.0);
  EXPECT_DOUBLE_EQ(m["critic/advantages/mean"], 5.0 / 4);  // 1,2,3,−1
  EXPECT_DOUBLE_EQ(m["critic/advantages/min"], -1.0);
  EXPECT_DOUBLE_EQ(m["critic/returns/max"], 4.0);
  EXPECT_DOUBLE_EQ(m["critic/values/mean"], 1.0);
  // R−V = (1,0,1,2): var 2/3 (unbiased); R = (1,1,2,4): var 2.
  EXPECT_NEAR(m["critic/vf_explained_var"], 1.0 - (2.0 / 3) / (2.0 + 1e-5),
              1e-12);
  EXPECT_DOUBLE_EQ(m["response_length/mean"], 4.0 / 3);
  EXPECT_DOUBLE_EQ(m["response_length/clip_ratio"], 1.0 / 3);
  EXPECT_DOUBLE_EQ(m["response_length_non_aborted/mean"], 2.0);
  EXPECT_DOUBLE_EQ(m["response_length_non_aborted/min"], 1.0);
  EXPECT_DOUBLE_EQ(m["response/aborted_ratio"], 1.0 / 3);
  EXPECT_DOUBLE_EQ(m["prompt_length/mean"], 5.0 / 3);
  EXPECT_DOUBLE_EQ(m["prompt_length/clip_ratio"], 2.0 / 3);
  EXPECT_EQ(m.count("num_turns/mean"), 0u);

  DataMetricsInputs in = Batch();
  in.num_turns = {1, 3, 2};
  EXPECT_DOUBLE_EQ((*ComputeDataMetrics(in, false))["num_turns/mean"], 2.0);
  EXPECT_EQ(ComputeDataMetrics(in, false)->count("critic/values/mean"), 0u);
  in.attention_mask.slice(1, 2).zero_();
  EXPECT_THAT(ComputeDataMetrics(in, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "every sample in the batch was aborted"));
}

TEST(TimingMetricsTest, PerTokenRules) {
  MetricMap m = ComputeTimingMetrics(
      {{"gen", 2.0}, {"ref", 1.0}, {"step", 5.0}, {"reward", 0.5}}, 100, 400);
  EXPECT_DOUBLE_EQ(m["timing_s/gen"], 2.0);
  EXPECT_DOUBLE_EQ(m["timing_s/step"], 5.0);
  EXPECT_DOUBLE_EQ(m["timing_per_token_ms/gen"], 5.0);
  EXPECT_DOUBLE_EQ(m["timing_per_token_ms/ref"], 2.0);
  EXPECT_EQ(m.count("timing_per_token_ms/reward"), 0u);
  EXPECT_EQ(m.count("timing_per_token_ms/step"), 0u);
}

TEST(ThroughputMetricsTest, Values) {
  MetricMap m = ComputeThroughputMetrics(1000, 2.0, 2);
  EXPECT_DOUBLE_EQ(m["perf/total_num_tokens"], 1000);
  EXPECT_DOUBLE_EQ(m["perf/time_per_step"], 2.0);
  EXPECT_DOUBLE_EQ(m["perf/throughput"], 250.0);
}

TEST(RolloutProbsDiffTest, HandComputed) {
  // Valid probs: actor (0.5, 0.25, 1.0), rollout (0.25, 0.25, 0.5).
  at::Tensor actor = at::log(Mat({{0.5, 0.25}, {1.0, 0.9}}));
  at::Tensor rollout = at::log(Mat({{0.25, 0.25}, {0.5, 0.1}}));
  at::Tensor mask = Mat({{1, 1}, {1, 0}});
  MetricMap m = *ComputeRolloutProbsDiffMetrics(actor, rollout, mask);
  EXPECT_DOUBLE_EQ(m["training/rollout_probs_diff_valid"], 1.0);
  EXPECT_NEAR(m["training/rollout_probs_diff_max"], 0.5, 1e-12);
  EXPECT_NEAR(m["training/rollout_probs_diff_mean"], 0.25, 1e-12);
  // |diff| = (0.25, 0, 0.5): unbiased std = 0.25.
  EXPECT_NEAR(m["training/rollout_probs_diff_std"], 0.25, 1e-12);
  // Pearson of (0.5, 0.25, 1) and (0.25, 0.25, 0.5): deviations
  // (−1/12, −1/3, 5/12) and (−1/12, −1/12, 1/6) → r = 0.2917/0.2999.
  const double num = (1.0 / 144 + 1.0 / 36 + 5.0 / 72);
  const double den = std::sqrt((1.0 / 144 + 1.0 / 9 + 25.0 / 144) *
                               (1.0 / 144 + 1.0 / 144 + 1.0 / 36));
  EXPECT_NEAR(m["training/rollout_actor_probs_pearson_corr"], num / den, 1e-12);
  EXPECT_FALSE(
      ComputeRolloutProbsDiffMetrics(actor, rollout, Mat({{1, 0}, {0, 0}}))
          .ok());
}

// Expected values from verl's own compute_variance_proxy_metrics
// (metric_utils.py) run with torch on these inputs.
TEST(VarianceProxyMetricsTest, MatchesVerl) {
  VarianceProxyInputs in;
  in.old_log_probs = Mat({{-1.0, -0.5, -2.0, -0.1},
                          {-0.2, -1.5, -0.7, -0.9},
                          {-2.5, -0.3, -1.1, -0.6}});
  in.sum_pi_squared = Mat(
      {{0.3, 0.5, 0.2, 0.9}, {0.7, 0.25, 0.4, 0.35}, {0.15, 0.6, 0.3, 0.45}});
  in.advantages = Mat(
      {{1.0, 1.0, 1.0, 0.0}, {-0.5, -0.5, -0.5, -0.5}, {0.8, 0.8, 0.0, 0.0}});
  in.response_mask = Mat({{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}});
  auto expect = [](const MetricMap& m, double signal, double power,
                   double noise, double a2, double w) {
    ASSERT_EQ(m.size(), 5u);
    EXPECT_NEAR(m.at("variance_proxy/proxy1_signal_strength"), signal, 1e-9);
    EXPECT_NEAR(m.at("variance_proxy/proxy2_total_power"), power, 1e-7);
    EXPECT_NEAR(m.at("variance_proxy/proxy3_pure_noise"), noise, 1e-7);
    EXPECT_NEAR(m.at("variance_proxy/expected_a_squared"), a2, 1e-7);
    EXPECT_NEAR(m.at("variance_proxy/expected_w"), w, 1e-7);
  };
  in.grad_norm = 0.7;
  expect(ComputeVarianceProxyMetrics(in), 0.49, 0.979895050489621,
         0.24494752524481053, 0.62999999522777783, 1.5648903465435164);
  in.grad_norm = -1.0;  // unknown: proxies 1 and 3 are 0
  expect(ComputeVarianceProxyMetrics(in), 0.0, 0.979895050489621, 0.0,
         0.62999999522777783, 1.5648903465435164);
  in.grad_norm = 0.3;
  in.rollout_is_weights =
      Mat({{1.5, 0.8, 1.0, 0.0}, {1.1, 0.9, 1.6, 0.7}, {0.5, 1.1, 0.0, 0.0}});
  expect(ComputeVarianceProxyMetrics(in), 0.09, 1.0432016496276948,
         0.47660082481384741, 0.62999999522777783, 1.6011452688714769);
  in.sum_pi_squared = at::Tensor();  // verl: nothing without Σπ²
  EXPECT_TRUE(ComputeVarianceProxyMetrics(in).empty());
}

TEST(DiversityMetricsTest, DistinctCorrectAnswersAndTheirEntropy) {
  ValidationSamples s;
  // Prompt a: 4 samples, correct "x", "x", "y" (one wrong "z").
  // Prompt b: 4 samples, all correct and equal.
  s.uids = {"a", "a", "a", "a", "b", "b", "b", "b"};
  s.data_sources = std::vector<std::string>(8, "task");
  s.responses = {"x", "x", "y", "z", "w", "w", "w", "w"};
  s.numeric["reward"] = {1, 1, 1, 0, 1, 1, 1, 1};
  MetricMap m = ComputeDiversityMetrics(s);
  EXPECT_DOUBLE_EQ(m.at("val-aux/task/diversity/distinct_correct@4"),
                   (2 + 1) / 2.0);
  const double h_a =
      -(2.0 / 3) * std::log(2.0 / 3) - (1.0 / 3) * std::log(1.0 / 3);
  EXPECT_NEAR(m.at("val-aux/task/diversity/correct_entropy@4"), h_a / 2, 1e-12);
  // "acc" wins over "reward" as the notion of correct.
  s.numeric["acc"] = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_DOUBLE_EQ(ComputeDiversityMetrics(s).at(
                       "val-aux/task/diversity/distinct_correct@4"),
                   0.5);
  s.responses.clear();
  EXPECT_TRUE(ComputeDiversityMetrics(s).empty());
}

TEST(ReduceMetricsTest, MaxMinMean) {
  MetricMap m = ReduceMetrics({{"actor/pg_clipfrac", {1, 2, 3}},
                               {"x/max_y", {1, 5}},
                               {"rollout/min_z", {3, 1}}});
  EXPECT_DOUBLE_EQ(m["actor/pg_clipfrac"], 2.0);
  EXPECT_DOUBLE_EQ(m["x/max_y"], 5.0);
  EXPECT_DOUBLE_EQ(m["rollout/min_z"], 1.0);
}

ValidationSamples Samples() {
  ValidationSamples s;
  s.data_sources.assign(8, "src");
  s.uids = {"u1", "u1", "u1", "u1", "u2", "u2", "u2", "u2"};
  s.numeric["acc"] = {1, 0, 0, 0, 1, 1, 1, 1};
  s.numeric["reward"] = {1, 0, 0, 0, 1, 1, 1, 1};
  s.preds = {"a", "b", "b", "c", "x", "x", "x", "x"};
  return s;
}

TEST(ValidationMetricsTest, NamesAndValues) {
  MetricMap m = *ComputeValidationMetrics(Samples());
  EXPECT_DOUBLE_EQ(m.at("val-core/src/acc/mean@4"), (0.25 + 1.0) / 2);
  EXPECT_NEAR(m.at("val-aux/src/acc/std@4"), (std::sqrt(3.0) / 4 + 0) / 2,
              1e-12);
  // P(best of 4 draws hits the single 1 in u1) = 1 − (3/4)^4 ≈ 0.684.
  EXPECT_NEAR(m.at("val-core/src/acc/best@4/mean"),
              (1 - std::pow(0.75, 4) + 1.0) / 2, 0.03);
  EXPECT_NEAR(m.at("val-aux/src/acc/best@2/mean"),
              (1 - std::pow(0.75, 2) + 1.0) / 2, 0.03);
  EXPECT_NEAR(m.at("val-aux/src/acc/worst@4/mean"), (0.0039 + 1.0) / 2, 0.02);
  EXPECT_TRUE(m.count("val-core/src/acc/maj@4/mean"));
  EXPECT_TRUE(m.count("val-aux/src/acc/maj@2/std"));
  // reward is not the core variable when acc exists.
  EXPECT_TRUE(m.count("val-aux/src/reward/mean@4"));
  EXPECT_FALSE(m.count("val-core/src/reward/mean@4"));
  // Deterministic for a seed.
  EXPECT_EQ(m, *ComputeValidationMetrics(Samples()));
}

TEST(MfuMetricsTest, MatchesHandCount) {
  profiler::FlopsModelDims d;
  d.vocab_size = 10;
  d.hidden_size = 4;
  d.intermediate_size = 8;
  d.num_hidden_layers = 2;
  d.num_attention_heads = 2;
  d.num_key_value_heads = 1;
  d.head_dim = 2;
  // N = 2 * (4*(4+2+2+4) + 3*4*8) + 2*10*4 = 368 matmul weights;
  // train = 6*368*(3+5) + 6*(9+25)*2*2*2 = 17664 + 1632 FLOPs.
  const double train = 17664 + 1632;
  const MetricMap m = ComputeMfuMetrics(
      d, {3, 5}, {{"update_actor", 2.0}, {"old_log_prob", 0.5}, {"gen", 1.0}},
      /*actor_epochs=*/2, /*critic_epochs=*/1, /*peak_flops=*/1000,
      /*world_size=*/2);
  EXPECT_DOUBLE_EQ(m.at("perf/mfu/actor"), train * 2 / 2.0 / 2000);
  EXPECT_DOUBLE_EQ(m.at("perf/mfu/actor_infer"), train / 3 / 0.5 / 2000);
  EXPECT_FALSE(m.count("perf/mfu/critic"));  // no update_critic phase
  EXPECT_EQ(ComputeMfuMetrics(d, {3}, {{"update_actor", 1.0}}, 1, 1,
                              /*peak_flops=*/0, 1)
                .at("perf/mfu/actor"),
            0);  // unknown peak
}

TEST(ValidationMetricsTest, SingleResponseAndErrors) {
  ValidationSamples s;
  s.data_sources = {"openai/gsm8k", "openai/gsm8k"};
  s.uids = {"a", "b"};
  s.numeric["reward"] = {1, 0};
  MetricMap m = *ComputeValidationMetrics(s);
  EXPECT_DOUBLE_EQ(m.at("val-core/openai/gsm8k/reward/mean@1"), 0.5);
  EXPECT_EQ(m.size(), 1u);
  s.numeric["reward"] = {1};
  EXPECT_THAT(ComputeValidationMetrics(s),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "variable 'reward' has 1 values for 2 samples"));
}

}  // namespace
}  // namespace verl::rl
