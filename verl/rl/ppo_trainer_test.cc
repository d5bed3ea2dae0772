// End-to-end: a few GRPO and PPO (GAE + critic) steps of the embedded
// default, deterministic with a fixed seed, logging verl's metric keys.
#include "verl/rl/ppo_trainer.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/rl/config.h"
#include "verl/rl/ppo_trainer_testutil.h"

namespace verl::rl {
namespace {

PpoTrainerConfig TinyConfig(const std::string& estimator,
                            const std::string& experiment) {
  std::vector<std::string> overrides =
      testing::TinyPpoOverrides(estimator, experiment);
  auto config = LoadPpoTrainerConfig("", overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(ValidatePpoTrainerConfig(*config).ok())
      << ValidatePpoTrainerConfig(*config);
  return *config;
}

std::vector<nlohmann::json> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

void ExpectSameMetrics(const FitResult& a, const FitResult& b) {
  ASSERT_EQ(a.last_step_metrics.size(), b.last_step_metrics.size());
  for (const auto& [k, v] : a.last_step_metrics) {
    if (k.rfind("timing", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
    EXPECT_DOUBLE_EQ(v, b.last_step_metrics.at(k)) << k;
  }
}

TEST(PpoTrainerTest, GrpoStepsAreDeterministicAndLogVerlKeys) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/logs";
  setenv("VERL_FILE_LOGGER_ROOT", root.c_str(), 1);
  auto first = RunPpo(TinyConfig("grpo", "grpo_a"), nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunPpo(TinyConfig("grpo", "grpo_b"), nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->steps, 2);
  ExpectSameMetrics(*first, *second);

  auto lines = ReadLines(root + "/e2e/grpo_a.jsonl");
  ASSERT_EQ(lines.size(), 3u);  // validation at step 0, then steps 1 and 2
  EXPECT_EQ(lines[0]["step"], 0);
  EXPECT_TRUE(lines[0]["data"].contains("val-core/arithmetic/reward/mean@1"));
  const auto& data = lines[2]["data"];
  for (const char* key : {"actor/pg_loss",
                          "actor/kl_loss",
                          "actor/entropy",
                          "actor/grad_norm",
                          "actor/lr",
                          "actor/pg_clipfrac",
                          "actor/ppo_kl",
                          "critic/score/mean",
                          "critic/rewards/mean",
                          "critic/advantages/mean",
                          "response_length/mean",
                          "prompt_length/mean",
                          "timing_s/gen",
                          "timing_s/old_log_prob",
                          "timing_s/ref",
                          "timing_s/adv",
                          "timing_s/update_actor",
                          "timing_s/step",
                          "timing_per_token_ms/gen",
                          "perf/throughput",
                          "perf/total_num_tokens",
                          "perf/time_per_step",
                          "training/global_step",
                          "training/rollout_probs_diff_mean",
                          "val-core/arithmetic/reward/mean@1"}) {
    EXPECT_TRUE(data.contains(key)) << key;
  }
  // Rollout and recomputed log-probs agree (same weights, fp32).
  EXPECT_LT(data["training/rollout_probs_diff_max"].get<double>(), 1e-3);
}

TEST(PpoTrainerTest, PpoWithCriticRunsAndIsDeterministic) {
  const std::string root = std::string(std::getenv("TEST_TMPDIR")) + "/logs";
  setenv("VERL_FILE_LOGGER_ROOT", root.c_str(), 1);
  auto first = RunPpo(TinyConfig("gae", "ppo_a"), nullptr);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = RunPpo(TinyConfig("gae", "ppo_b"), nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  ExpectSameMetrics(*first, *second);
  const auto& m = first->last_step_metrics;
  for (const char* key : {"critic/vf_loss", "critic/vf_clipfrac",
                          "critic/vpred_mean", "critic/grad_norm", "critic/lr",
                          "critic/values/mean", "critic/vf_explained_var",
                          "timing_s/values", "timing_s/update_critic"}) {
    EXPECT_TRUE(m.count(key)) << key;
  }
}

TEST(PpoTrainerTest, BadConfigIsAClearError) {
  PpoTrainerConfig config = TinyConfig("grpo", "bad");
  config.mutable_algorithm()->set_adv_estimator("no_such_estimator");
  auto result = RunPpo(config, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("no_such_estimator"),
            std::string::npos)
      << result.status();
  config = TinyConfig("grpo", "bad2");
  config.mutable_data()->clear_train_files();
  config.mutable_data()->add_train_files("/nonexistent/train.jsonl");
  result = RunPpo(config, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("/nonexistent/train.jsonl"),
            std::string::npos);
}

TEST(PpoTrainerTest, DumpsRolloutAndValidationGenerations) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  PpoTrainerConfig config = TinyConfig("grpo", "dumps");
  config.mutable_trainer()->set_rollout_data_dir(tmp + "/rollout_dump");
  config.mutable_trainer()->set_validation_data_dir(tmp + "/val_dump");
  auto result = RunPpo(config, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  // verl: {dir}/{global_steps}.jsonl, one line per trajectory.
  for (int step : {1, 2}) {
    auto rows =
        ReadLines(tmp + "/rollout_dump/" + std::to_string(step) + ".jsonl");
    ASSERT_EQ(rows.size(), 4u * 2u) << step;  // train_batch_size x n
    for (const char* key : {"input", "output", "gts", "score", "step"})
      EXPECT_TRUE(rows[0].contains(key)) << key;
    EXPECT_EQ(rows[0]["step"], step);
    EXPECT_NE(rows[0]["input"].get<std::string>().find("=?"),
              std::string::npos);
  }
  // Validation before training (step 0) and at the last step.
  for (int step : {0, 2}) {
    auto rows = ReadLines(tmp + "/val_dump/" + std::to_string(step) + ".jsonl");
    EXPECT_EQ(rows.size(), 8u) << step;  // val_max_samples x val n
  }
}

TEST(PpoTrainerTest, DynamicSamplingFillsTheBatchOrStopsAtTheRoundLimit) {
  PpoTrainerConfig config = TinyConfig("grpo", "filter_groups");
  config.mutable_trainer()->set_total_training_steps(1);
  config.mutable_trainer()->set_test_freq(0);
  config.mutable_data()->set_max_response_length(4);
  auto* fg = config.mutable_algorithm()->mutable_filter_groups();
  fg->set_enable(true);
  fg->set_metric("seq_reward");
  // The barely trained policy scores 0 on (almost) every sample: groups
  // have no reward variance, so one round cannot fill the batch.
  fg->set_max_num_gen_batches(1);
  auto result = RunPpo(config, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("max_num_gen_batches"),
            std::string::npos)
      << result.status();
  fg->set_metric("no_such_metric");
  result = RunPpo(config, nullptr);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("no_such_metric"),
            std::string::npos);

  // An external scorer (one line per sample, in generation order: n=2
  // samples per prompt are adjacent) whose "acc" varies within every other
  // group: each round keeps 2 of 4 prompt groups, so two rounds fill it.
  config.mutable_custom_reward_function()->set_path(
      "awk '{g = int((NR - 1) / 2); a = (g % 2 == 0) ? NR % 2 : 0; "
      "print \"{\\\"score\\\": \" a \", \\\"acc\\\": \" a \"}\"}'");
  fg->set_metric("acc");
  fg->set_max_num_gen_batches(0);
  result = RunPpo(config, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->last_step_metrics.at("train/num_gen_batches"), 2.0);
  // Kept groups only: every group of the training batch has reward variance.
  EXPECT_DOUBLE_EQ(result->last_step_metrics.at("critic/score/mean"), 0.5);
}

}  // namespace
}  // namespace verl::rl
