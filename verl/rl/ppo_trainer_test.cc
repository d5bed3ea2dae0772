// End-to-end: a few GRPO and PPO (GAE + critic) steps of the embedded
// default, deterministic with a fixed seed, logging verl's metric keys.
#include "verl/rl/ppo_trainer.h"

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/rl/config.h"

namespace verl::rl {
namespace {

PpoTrainerConfig TinyConfig(const std::string& estimator,
                            const std::string& experiment) {
  std::vector<std::string> overrides = {
      "data.train_files=[builtin:arithmetic/train]",
      "data.val_files=[builtin:arithmetic/test]",
      "data.train_batch_size=4",
      "data.val_batch_size=8",
      "data.val_max_samples=8",
      "data.max_prompt_length=32",
      "data.max_response_length=8",
      "data.seed=3",
      "actor_rollout_ref.model.preset=tiny-qwen2",
      "actor_rollout_ref.model.enable_gradient_checkpointing=false",
      "actor_rollout_ref.sft_warmup.steps=2",
      "actor_rollout_ref.sft_warmup.batch_size=4",
      "actor_rollout_ref.actor.ppo_mini_batch_size=2",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
      "actor_rollout_ref.actor.use_kl_loss=true",
      "actor_rollout_ref.actor.optim.lr=1e-3",
      "actor_rollout_ref.rollout.n=2",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
      "actor_rollout_ref.rollout.calculate_log_probs=true",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
      "critic.ppo_micro_batch_size_per_gpu=4",
      "algorithm.adv_estimator=" + estimator,
      "trainer.logger=[file]",
      "trainer.project_name=e2e",
      "trainer.experiment_name=" + experiment,
      "trainer.n_gpus_per_node=1",
      "trainer.total_training_steps=2",
      "trainer.test_freq=2",
  };
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

}  // namespace
}  // namespace verl::rl
