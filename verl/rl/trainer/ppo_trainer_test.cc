// End-to-end: a few GRPO and PPO (GAE + critic) steps of the embedded
// default, deterministic with a fixed seed, logging verl's metric keys.
#include "verl/rl/trainer/ppo_trainer.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/checkpoint_pt.h"
#include "verl/ckpt/safetensors.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/testing/sharp_tiny_vlm.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"

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

// verl's on-policy shortcut for the first actor mini-batch: without rollout
// log-probs the old-log-prob pass skips those rows and the update provides
// them; with rollout log-probs (rollout correction reads the old ones before
// the update) every row goes through the pass. Both give the same losses and
// metrics (the shortcut's ratio is exactly 1 where the pass's is 1 ± 1e-7),
// with two mini-batches and with one (no pass at all).
TEST(PpoTrainerTest, OnPolicyFirstMiniBatchSkipsItsOldLogProbPass) {
  for (int mini : {2, 4}) {
    std::vector<FitResult> runs;
    for (bool rollout_lp : {false, true}) {
      PpoTrainerConfig config = TinyConfig(
          "grpo", absl::StrCat("on_policy_", mini, rollout_lp ? "_lp" : ""));
      config.mutable_actor_rollout_ref()
          ->mutable_actor()
          ->set_ppo_mini_batch_size(mini);
      config.mutable_actor_rollout_ref()
          ->mutable_rollout()
          ->set_calculate_log_probs(rollout_lp);
      auto r = RunPpo(config, nullptr);
      ASSERT_TRUE(r.ok()) << r.status();
      runs.push_back(*r);
    }
    const auto& shortcut = runs[0].last_step_metrics;
    const auto& full = runs[1].last_step_metrics;
    EXPECT_TRUE(shortcut.count("actor/entropy"));
    EXPECT_TRUE(shortcut.count("timing_s/old_log_prob"));
    EXPECT_FALSE(shortcut.count("training/rollout_probs_diff_mean"));
    for (const auto& [k, v] : shortcut) {
      if (k.rfind("timing", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
      ASSERT_TRUE(full.count(k)) << k;
      EXPECT_NEAR(v, full.at(k), 1e-6 * std::max(1.0, std::abs(v)))
          << k << " mini " << mini;
    }
  }
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

// One step, no validation, scored by an external command printing `score`
// (awk expression of the line number NR, in generation order).
PpoTrainerConfig OneStep(const std::string& estimator,
                         const std::string& experiment,
                         const std::string& score_expr) {
  PpoTrainerConfig config = TinyConfig(estimator, experiment);
  config.mutable_trainer()->set_total_training_steps(1);
  config.mutable_trainer()->set_test_freq(0);
  config.mutable_trainer()->set_val_before_train(false);
  config.mutable_custom_reward_function()->set_path(
      "awk '{print \"{\\\"score\\\": \" (" + score_expr + ") \"}\"}'");
  return config;
}

// actor_rollout_ref.sft_warmup.train_files: the warm start reads its own
// rows. Naming the training rows again is the default run; other rows give
// another warm start (the same RL step on other weights); a missing file
// and a batch larger than the rows are errors naming them.
TEST(PpoTrainerTest, SftWarmupReadsItsOwnTrainFiles) {
  PpoTrainerConfig config = OneStep("grpo", "sft_rows", "NR % 3");
  auto base = RunPpo(config, nullptr);
  ASSERT_TRUE(base.ok()) << base.status();
  auto* w = config.mutable_actor_rollout_ref()->mutable_sft_warmup();
  w->add_train_files(config.data().train_files(0));
  auto same = RunPpo(config, nullptr);
  ASSERT_TRUE(same.ok()) << same.status();
  ExpectSameMetrics(*base, *same);

  w->set_train_files(0, "builtin:arithmetic/train?max_operand=3");
  auto other = RunPpo(config, nullptr);
  ASSERT_TRUE(other.ok()) << other.status();
  int differ = 0;
  for (const auto& [k, v] : base->last_step_metrics) {
    if (k.rfind("timing", 0) == 0 || k.rfind("perf/", 0) == 0) continue;
    differ += other->last_step_metrics.count(k) &&
              other->last_step_metrics.at(k) != v;
  }
  EXPECT_GT(differ, 0);
  EXPECT_NE(other->last_step_metrics.at("actor/entropy"),
            base->last_step_metrics.at("actor/entropy"));

  w->set_train_files(0, "/nonexistent/sft.jsonl");
  auto missing = RunPpo(config, nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/sft.jsonl"),
            std::string::npos)
      << missing.status();
  w->set_train_files(0, "builtin:arithmetic/train?rows=3");
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "exceeds the warm start's 3 rows"));
}

// rollout.multi_turn: the agent loop runs every trajectory (tool_agent with
// verl's tool config); the step logs verl's multi-turn metrics and timing.
TEST(PpoTrainerTest, MultiTurnRolloutRunsThroughTheAgentLoop) {
  PpoTrainerConfig config = OneStep("grpo", "multi_turn", "NR % 3");
  // The tool quickstart's rows (tool_agent, "calculator: a+b=?") and its
  // warm start on the reference trajectories (model turns trained only).
  config.mutable_data()->set_train_files(
      0, "builtin:arithmetic/train?calculator=1");
  config.mutable_data()->set_max_prompt_length(40);
  config.mutable_actor_rollout_ref()->mutable_sft_warmup()->set_response_key(
      "extra_info.answer_trajectory");
  auto* rollout = config.mutable_actor_rollout_ref()->mutable_rollout();
  rollout->mutable_multi_turn()->set_enable(true);
  rollout->mutable_multi_turn()->set_tool_config_path(
      "examples/tools/calculator.yaml");
  rollout->mutable_agent()->set_default_agent_loop("tool_agent");
  auto run = RunPpo(config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const auto& m = run->last_step_metrics;
  // No call from an untrained model: every trajectory is one model turn.
  EXPECT_EQ(m.at("num_turns/mean"), 2.0);
  EXPECT_EQ(m.at("tool_call_counts/max"), 0.0);
  EXPECT_TRUE(m.count("timing_s/agent_loop/generate_sequences/max"));
  EXPECT_TRUE(std::isfinite(m.at("actor/pg_loss")));

  // A trajectory answer without the agent loop is refused up front.
  PpoTrainerConfig single = config;
  single.mutable_actor_rollout_ref()->mutable_rollout()->clear_multi_turn();
  single.mutable_actor_rollout_ref()->mutable_rollout()->clear_agent();
  EXPECT_THAT(RunPpo(single, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "needs the agent loop"));
  rollout->mutable_multi_turn()->set_tool_config_path("/nonexistent.yaml");
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kNotFound,
                                      "/nonexistent.yaml"));
  rollout->mutable_multi_turn()->clear_tool_config_path();
  rollout->mutable_multi_turn()->set_format("gpt-oss");
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "multi_turn.format: 'gpt-oss'"));
}

TEST(PpoTrainerTest, RolloutCorrectionWeightsMasksAndBypass) {
  // One mini-batch: the update's pg_loss is that of the rollout policy's
  // weights, before any optimizer step. ReMax: advantages against a greedy
  // baseline do not sum to zero (group-centred ones do, and with equal
  // response lengths the token-mean loss at ratio 1 would be exactly 0).
  PpoTrainerConfig plain = OneStep("remax", "rc_plain", "NR % 3");
  plain.mutable_actor_rollout_ref()->mutable_actor()->set_ppo_mini_batch_size(
      4);
  auto base = RunPpo(plain, nullptr);
  ASSERT_TRUE(base.ok()) << base.status();
  const auto& m0 = base->last_step_metrics;
  const double pg = m0.at("actor/pg_loss");
  ASSERT_NE(pg, 0.0);
  // Off-policy diagnostics whenever rollout log-probs exist (verl's names).
  for (const char* key :
       {"rollout_corr/kl", "rollout_corr/k3_kl", "rollout_corr/training_ppl",
        "rollout_corr/chi2_token", "rollout_corr/log_ppl_diff"}) {
    EXPECT_TRUE(m0.count(key)) << key;
  }
  EXPECT_FALSE(m0.count("rollout_corr/rollout_is_mean"));

  // Token IS truncated at 0.5: every weight (~1) becomes 0.5, so the loss
  // halves exactly.
  PpoTrainerConfig is = plain;
  auto* rc = is.mutable_algorithm()->mutable_rollout_correction();
  rc->set_rollout_is("token");
  rc->set_rollout_is_threshold(0.5);
  rc->set_rollout_rs("token_k1");
  rc->set_rollout_rs_threshold("2.0");
  auto weighted = RunPpo(is, nullptr);
  ASSERT_TRUE(weighted.ok()) << weighted.status();
  const auto& m1 = weighted->last_step_metrics;
  EXPECT_NEAR(m1.at("actor/pg_loss"), 0.5 * pg, 1e-6 + 1e-5 * std::abs(pg));
  for (const char* key :
       {"rollout_corr/rollout_is_mean", "rollout_corr/rollout_is_max",
        "rollout_corr/rollout_is_eff_sample_size",
        "rollout_corr/rollout_rs_token_k1_masked_fraction",
        "rollout_corr/rollout_rs_masked_fraction"}) {
    EXPECT_TRUE(m1.count(key)) << key;
  }
  EXPECT_NEAR(m1.at("rollout_corr/rollout_is_mean"), 1.0, 1e-2);
  EXPECT_EQ(m1.at("rollout_corr/rollout_rs_masked_fraction"), 0.0);

  // Rejection sampling needs a real train/rollout mismatch: the engine
  // samples with a repetition penalty the trainer's log-probs do not apply.
  // The random tiny model's logits are small, so the mismatch is too: the
  // band is narrow enough to reject some tokens, not all.
  PpoTrainerConfig penalised = plain;
  penalised.mutable_actor_rollout_ref()
      ->mutable_rollout()
      ->set_repetition_penalty(1.5);
  auto unmasked = RunPpo(penalised, nullptr);
  ASSERT_TRUE(unmasked.ok()) << unmasked.status();
  PpoTrainerConfig reject = penalised;
  rc = reject.mutable_algorithm()->mutable_rollout_correction();
  rc->set_rollout_rs("token_k1");
  rc->set_rollout_rs_threshold("0.995_1.005");
  auto rejected = RunPpo(reject, nullptr);
  ASSERT_TRUE(rejected.ok()) << rejected.status();
  const auto& m2 = rejected->last_step_metrics;
  const double frac = m2.at("rollout_corr/rollout_rs_masked_fraction");
  EXPECT_GT(frac, 0.0);
  EXPECT_LT(frac, 1.0);
  EXPECT_GT(m2.at("rollout_corr/rollout_rs_seq_masked_fraction"), 0.0);
  // The rejected tokens left the mask the update is computed on.
  EXPECT_NE(m2.at("actor/pg_loss"),
            unmasked->last_step_metrics.at("actor/pg_loss"));

  // Bypass: old_log_prob := rollout log-probs, no recompute; the loss is
  // bypass_mode's PPO clip, equal to the decoupled one up to the tiny
  // rollout/trainer mismatch.
  PpoTrainerConfig bypass = plain;
  bypass.mutable_algorithm()->mutable_rollout_correction()->set_bypass_mode(
      true);
  auto bypassed = RunPpo(bypass, nullptr);
  ASSERT_TRUE(bypassed.ok()) << bypassed.status();
  const auto& m3 = bypassed->last_step_metrics;
  EXPECT_FALSE(m3.count("timing_s/old_log_prob"));
  EXPECT_TRUE(m3.count("rollout_corr/kl"));
  EXPECT_NEAR(m3.at("actor/pg_loss"), pg, 1e-3);

  // Without the engine's log-probs the correction is a clear error.
  bypass.mutable_actor_rollout_ref()
      ->mutable_rollout()
      ->set_calculate_log_probs(false);
  auto no_lp = RunPpo(bypass, nullptr);
  ASSERT_FALSE(no_lp.ok());
  EXPECT_NE(no_lp.status().message().find("calculate_log_probs"),
            std::string::npos)
      << no_lp.status();
}

TEST(PpoTrainerTest, OptimalTokenBaselineUsesTheActorsSumPiSquared) {
  PpoTrainerConfig config = OneStep("optimal_token_baseline", "otb", "NR % 3");
  // verl asserts the actor computed Σπ²; here it is an up-front error.
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "calculate_sum_pi_squared=true"));
  config.mutable_actor_rollout_ref()
      ->mutable_actor()
      ->set_calculate_sum_pi_squared(true);
  auto run = RunPpo(config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const auto& m = run->last_step_metrics;
  // verl's compute_variance_proxy_metrics, fed by the same Σπ².
  const double grad_norm = m.at("actor/grad_norm");
  EXPECT_NEAR(m.at("variance_proxy/proxy1_signal_strength"),
              grad_norm * grad_norm, 1e-9 * (1 + grad_norm * grad_norm));
  EXPECT_GT(m.at("variance_proxy/proxy2_total_power"), 0.0);
  // W(τ) = Σ_t (1 − 2π_t + Σπ²) ≥ 0 per token since Σπ² ≥ π_t².
  EXPECT_GT(m.at("variance_proxy/expected_w"), 0.0);
  EXPECT_TRUE(m.count("variance_proxy/proxy3_pure_noise"));
}

// A policy whose gradients stay non-finite (an lr of 1e30 blows the weights
// up in step 1): each later optimizer step is skipped as verl does, and the
// run stops with one line after trainer.max_consecutive_nonfinite_steps such
// steps in a row (verl would go on forever); 0 keeps verl's behaviour.
TEST(PpoTrainerTest, ConsecutiveNonFiniteStepsStopTheRun) {
  PpoTrainerConfig config = OneStep("grpo", "nonfinite", "NR % 3");
  config.mutable_trainer()->set_total_training_steps(4);
  config.mutable_trainer()->set_max_consecutive_nonfinite_steps(2);
  config.mutable_actor_rollout_ref()->mutable_actor()->mutable_optim()->set_lr(
      1e30);
  // Step 1's later mini-batches may already see the blown-up weights, so
  // the run stops at step 2 or 3.
  const auto stopped = RunPpo(config, nullptr);
  EXPECT_THAT(stopped,
              core::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                      "2 steps in a row, up to step "));
  EXPECT_NE(
      stopped.status().message().find(
          "had a gradient norm that was not finite (actor/grad_norm nan;"),
      std::string::npos)
      << stopped.status();
  config.mutable_trainer()->set_max_consecutive_nonfinite_steps(0);
  auto run = RunPpo(config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->steps, 4);
  // Every optimizer step (mini-batch) of steps 2-4 at least.
  EXPECT_GE(run->last_step_metrics.at("actor/num_skipped_steps"), 3);
}

// verl's override_config.moe_config.freeze_moe_router on an MoE policy: the
// routers keep their weights through the RL updates (checkpoints of steps 1
// and 2 equal there) while the experts and the rest train; on a dense model
// the key is refused.
TEST(PpoTrainerTest, FreezeMoeRouterKeepsTheRoutersWeights) {
  const std::string ckpt =
      std::string(std::getenv("TEST_TMPDIR")) + "/frozen_router";
  PpoTrainerConfig config = OneStep("grpo", "frozen_router", "NR % 3");
  config.mutable_trainer()->set_total_training_steps(2);
  config.mutable_trainer()->set_save_freq(1);
  config.mutable_trainer()->set_default_local_dir(ckpt);
  auto* model = config.mutable_actor_rollout_ref()->mutable_model();
  (*model->mutable_override_config())["moe_config.freeze_moe_router"] = "True";
  const std::string dense_preset = model->preset();
  model->set_preset("tiny-qwen3-moe");
  auto run = RunPpo(config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  auto step1 = ckpt::LoadPtTensorDict(
      ckpt + "/global_step_1/actor/model_world_size_1_rank_0.pt");
  auto step2 = ckpt::LoadPtTensorDict(
      ckpt + "/global_step_2/actor/model_world_size_1_rank_0.pt");
  ASSERT_TRUE(step1.ok()) << step1.status();
  ASSERT_TRUE(step2.ok()) << step2.status();
  int routers = 0, changed_experts = 0;
  for (const auto& [name, before] : *step1) {
    const at::Tensor& after = step2->at(name);
    if (name.find(".mlp.gate.weight") != std::string::npos) {
      EXPECT_TRUE(after.equal(before)) << name;
      ++routers;
    } else if (name.find(".mlp.experts.") != std::string::npos &&
               !after.equal(before)) {
      ++changed_experts;
    }
  }
  EXPECT_EQ(routers, 4);  // one per layer of tiny-qwen3-moe
  EXPECT_GT(changed_experts, 0);
  model->set_preset(dense_preset);
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "needs an MoE model"));
}

TEST(PpoTrainerTest, FlowRlTrainsWithTheLogZHead) {
  // verl's recipe/flowrl: adv_estimator=flowrl (group-centred reward) and the
  // trajectory-balance loss; the reference policy is created for it.
  PpoTrainerConfig config = OneStep("flowrl", "flowrl", "NR % 3");
  config.mutable_trainer()->set_total_training_steps(2);
  auto* actor = config.mutable_actor_rollout_ref()->mutable_actor();
  actor->mutable_policy_loss()->set_loss_mode("flowrl");
  actor->set_use_kl_loss(false);
  const std::string ckpt_dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/flowrl_ckpt";
  config.mutable_trainer()->set_default_local_dir(ckpt_dir);
  config.mutable_trainer()->set_save_freq(2);
  auto run = RunPpo(config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  // The head is checkpointed beside the actor (model and optimizer shard)
  // and a resumed run loads it.
  const std::string head_dir = ckpt_dir + "/global_step_2/actor_log_z";
  EXPECT_TRUE(std::ifstream(head_dir + "/model_world_size_1_rank_0.pt").good())
      << head_dir;
  EXPECT_TRUE(std::ifstream(head_dir + "/optim_world_size_1_rank_0.pt").good());
  config.mutable_trainer()->set_total_training_steps(3);
  auto resumed = RunPpo(config, nullptr);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(resumed->steps, 3);  // resumed at 2, ran step 3
  const auto& m = run->last_step_metrics;
  for (const char* key :
       {"actor/log_z", "actor/tb_residual", "actor/tb_residual_abs",
        "actor/importance_weight", "actor/ref_kl", "actor/final_loss",
        "actor/pg_loss", "timing_s/ref"}) {
    EXPECT_TRUE(m.count(key)) << key;
  }
  EXPECT_GT(m.at("actor/log_z_grad_norm"), 0.0);
  EXPECT_TRUE(std::isfinite(m.at("actor/pg_loss")));
  // The loss is a mean of w·δ² (w > 0): positive.
  EXPECT_GT(m.at("actor/final_loss"), 0.0);

  actor->mutable_policy_loss()->set_flowrl_variant("flowrl_gspo");
  EXPECT_THAT(RunPpo(config, nullptr),
              core::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                      "flowrl_variant"));
}

TEST(PpoTrainerTest, PfPpoResamplesTheBatchByScore) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  auto dumped_scores = [&](const std::string& dir) {
    std::multiset<double> scores;
    for (const auto& row : ReadLines(dir + "/1.jsonl"))
      scores.insert(row["score"].get<double>());
    return scores;
  };
  // max_min: only the batch's max (8) and min (1) scores have weight.
  PpoTrainerConfig config = OneStep("gae", "pf_max_min", "NR");
  config.mutable_algorithm()->set_use_pf_ppo(true);
  config.mutable_algorithm()->mutable_pf_ppo()->set_reweight_method("max_min");
  config.mutable_trainer()->set_rollout_data_dir(tmp + "/pf_a");
  auto a = RunPpo(config, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  std::multiset<double> sa = dumped_scores(tmp + "/pf_a");
  ASSERT_EQ(sa.size(), 8u);
  for (double v : sa) EXPECT_TRUE(v == 1.0 || v == 8.0) << v;
  // Same seed, same draw.
  config.mutable_trainer()->set_rollout_data_dir(tmp + "/pf_b");
  auto b = RunPpo(config, nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(dumped_scores(tmp + "/pf_b"), sa);
  ExpectSameMetrics(*a, *b);

  // pow: one trajectory scores 1, the others 0 (weight 1e-8): the resampled
  // batch is that trajectory eight times.
  config = OneStep("gae", "pf_pow", "NR == 3 ? 1 : 0");
  config.mutable_algorithm()->set_use_pf_ppo(true);
  config.mutable_trainer()->set_rollout_data_dir(tmp + "/pf_pow");
  auto c = RunPpo(config, nullptr);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(dumped_scores(tmp + "/pf_pow"),
            std::multiset<double>({1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_DOUBLE_EQ(c->last_step_metrics.at("critic/score/mean"), 1.0);

  config.mutable_algorithm()->mutable_pf_ppo()->set_reweight_method("nope");
  auto bad = RunPpo(config, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reweight_method"), std::string::npos);
}

// A value-model HF folder whose score head ignores the input: weight 0,
// bias `bias`.
std::string SaveConstantRewardModel(const std::string& name, float bias) {
  models::ModelConfig config = *models::MakePreset(
      "tiny-qwen2", models::MakeBuiltinTokenizer().vocab_size());
  config.is_value_model = true;
  auto model = models::CreateModel(config, 5);
  models::HfCheckpoint ckpt;
  ckpt.config = config;
  for (const auto& item : model->named_parameters()) {
    at::Tensor t = item.value().detach().clone();
    if (item.key() == "score.weight") t.zero_();
    if (item.key() == "score.bias") t.fill_(bias);
    ckpt.tensors[item.key()] = t;
  }
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());
  return dir;
}

TEST(PpoTrainerTest, RewardModelScoresReplaceTheRuleReward) {
  PpoTrainerConfig config = OneStep("grpo", "rm", "1");
  config.mutable_reward_model()->set_enable(true);
  config.mutable_reward_model()->set_micro_batch_size_per_gpu(3);
  config.mutable_reward_model()->mutable_model()->set_path(
      SaveConstantRewardModel("rm_const", 0.25f));
  auto result = RunPpo(config, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  const auto& m = result->last_step_metrics;
  // verl's reward managers return rm_scores as they are (the rule scorer,
  // which would give 1, is not used); one score per trajectory.
  EXPECT_FLOAT_EQ(m.at("critic/score/mean"), 0.25);
  EXPECT_FLOAT_EQ(m.at("critic/score/max"), 0.25);
  EXPECT_FLOAT_EQ(m.at("critic/score/min"), 0.25);
  EXPECT_TRUE(m.count("timing_s/reward"));

  config.mutable_reward_model()->mutable_model()->set_path("/nonexistent/rm");
  auto bad = RunPpo(config, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/nonexistent/rm"), std::string::npos)
      << bad.status();
}

TEST(PpoTrainerTest, LoraActorTrainsWithTheBaseAsReference) {
  PpoTrainerConfig config = OneStep("grpo", "lora", "NR % 3");
  auto* model = config.mutable_actor_rollout_ref()->mutable_model();
  model->set_lora_rank(4);
  model->set_lora_alpha(8);
  model->set_enable_gradient_checkpointing(true);
  config.mutable_trainer()->set_total_training_steps(2);
  auto a = RunPpo(config, nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  const auto& m = a->last_step_metrics;
  EXPECT_GT(m.at("actor/grad_norm"), 0.0);
  // After a step the adapters are non-zero: the actor differs from its
  // reference (the base), and the synced engine samples from the merged
  // policy, so its log-probs still match the recomputed ones.
  EXPECT_GT(m.at("actor/kl_loss"), 0.0);
  EXPECT_LT(m.at("training/rollout_probs_diff_max"), 1e-3);
  auto b = RunPpo(config, nullptr);
  ASSERT_TRUE(b.ok());
  ExpectSameMetrics(*a, *b);

  // A checkpoint of a LoRA actor has verl's PEFT folder actor/lora_adapter/.
  const std::string ckpt =
      std::string(std::getenv("TEST_TMPDIR")) + "/lora_ckpt";
  config.mutable_trainer()->set_default_local_dir(ckpt);
  config.mutable_trainer()->set_save_freq(2);
  ASSERT_TRUE(RunPpo(config, nullptr).ok());
  const std::string adapter = ckpt + "/global_step_2/actor/lora_adapter";
  std::ifstream cfg_in(adapter + "/adapter_config.json");
  ASSERT_TRUE(cfg_in.good()) << adapter;
  const nlohmann::json adapter_cfg = nlohmann::json::parse(cfg_in);
  EXPECT_EQ(adapter_cfg["r"], 4);
  EXPECT_EQ(adapter_cfg["lora_alpha"], 8.0);
  std::ifstream weights(adapter + "/adapter_model.safetensors");
  std::string bytes((std::istreambuf_iterator<char>(weights)),
                    std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find("base_model.model.model.layers.0.self_attn.q_proj."
                       "lora_A.weight"),
            std::string::npos);

  model->clear_target_modules();
  model->add_target_modules("q_proj");
  model->add_target_modules("no_such_module");
  auto bad = RunPpo(config, nullptr);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("no_such_module"), std::string::npos);
}

// GRPO on 16 rows of the built-in geo_map task (map images), plus `extra`.
std::vector<std::string> VlmGeoMapOverrides(
    const std::string& experiment, const std::vector<std::string>& extra) {
  return testing::WithOverrides(
      testing::WithOverrides(
          testing::TinyPpoOverrides("grpo", experiment),
          {"data.train_files=[builtin:geo_map/train?rows=16]",
           "data.val_files=[builtin:geo_map/test?rows=4]",
           "data.val_max_samples=4", "data.max_prompt_length=192"}),
      extra);
}

// LoRA on a vision-language policy (verl's lora_rank with Qwen2.5-VL):
// "all-linear" puts adapters on the language model's and the vision tower's
// Linear layers (PEFT's rule: every Linear but the output head), the engine
// samples from the merged weights, the base is the reference.
TEST(PpoTrainerTest, VisionLanguageLoraActor) {
  const std::string ckpt =
      std::string(std::getenv("TEST_TMPDIR")) + "/vlm_lora_ckpt";
  auto config = LoadPpoTrainerConfig(
      "", VlmGeoMapOverrides(
              "vlm_lora",
              {"actor_rollout_ref.model.preset=tiny-qwen2.5-vl",
               "actor_rollout_ref.model.lora_rank=4",
               "actor_rollout_ref.model.lora_alpha=8",
               "actor_rollout_ref.actor.optim.lr=1e-2", "trainer.save_freq=2",
               "trainer.default_local_dir=" + ckpt}));
  ASSERT_TRUE(config.ok()) << config.status();
  // Rewards that differ within each group (the random policy scores 0 on
  // geo_map), so GRPO's advantages and the adapters' gradients are non-zero.
  config->mutable_custom_reward_function()->set_path(
      "awk '{print \"{\\\"score\\\": \" (NR % 3) \"}\"}'");
  ASSERT_TRUE(ValidatePpoTrainerConfig(*config).ok());
  auto run = RunPpo(*config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  const auto& m = run->last_step_metrics;
  EXPECT_GT(m.at("actor/grad_norm"), 0.0);
  EXPECT_GT(m.at("actor/kl_loss"), 0.0);  // the adapters moved off the base
  EXPECT_LT(m.at("training/rollout_probs_diff_max"), 1e-3);
  auto adapter = ckpt::LoadSafetensors(
      ckpt + "/global_step_2/actor/lora_adapter/adapter_model.safetensors");
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  // lora_B starts at zero: non-zero B in both towers means the update
  // reached the vision adapters through the images as well.
  for (const char* name :
       {"base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
        "base_model.model.visual.blocks.0.attn.qkv.lora_B.weight",
        "base_model.model.visual.merger.mlp.0.lora_B.weight"}) {
    ASSERT_TRUE(adapter->count(name)) << name;
    EXPECT_GT(adapter->at(name).abs().max().item<float>(), 0.0f) << name;
  }

  // freeze_vision_tower freezes the tower's adapters too (verl freezes
  // `visual` on the PEFT model): their B stays zero, the text's moves.
  config->mutable_actor_rollout_ref()->mutable_actor()->set_freeze_vision_tower(
      true);
  config->mutable_trainer()->set_default_local_dir(ckpt + "_frozen");
  ASSERT_TRUE(RunPpo(*config, nullptr).ok());
  auto frozen = ckpt::LoadSafetensors(
      ckpt +
      "_frozen/global_step_2/actor/lora_adapter/adapter_model.safetensors");
  ASSERT_TRUE(frozen.ok()) << frozen.status();
  int text = 0, visual = 0;
  for (const auto& [name, t] : *frozen) {
    if (name.find("lora_B") == std::string::npos) continue;
    const bool moved = t.abs().max().item<float>() > 0.0f;
    if (name.find(".visual.") != std::string::npos) {
      EXPECT_FALSE(moved) << name;
      ++visual;
    } else {
      text += moved;
    }
  }
  EXPECT_GT(visual, 10);
  EXPECT_GT(text, 10);
}

// Vision-language GRPO on the built-in geo_map task (map images): the
// tiny-qwen2.5-vl policy warm-starts and takes 2 GRPO steps with its vision
// tower frozen. The engine's log-probs equal the actor's recomputation, which
// holds only if both see the same images (pixel values spliced at the same
// pads, same M-RoPE positions); the checkpoint shows the tower unchanged and
// the language model updated.
TEST(PpoTrainerTest, VisionLanguageGrpoWithImagesAndFrozenTower) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string ckpt = tmp + "/vlm_ckpt";
  // The policy as an HF folder (the trainer's model.path route), with
  // attention sharp enough that the images move the log-probs (measured:
  // max |rollout - actor| 2.6e-6 with the images, 2.4e-5 when the actor's
  // recomputation leaves them out).
  auto init = models::vlm::testing::MakeSharpTinyVlm(/*seed=*/11);
  const models::vlm::VlmConfig& preset = init->vlm_config();
  const models::Tokenizer tok = *models::vlm::MakeVlmTokenizer(preset);
  models::vlm::VlmSaveOptions save;
  save.tokenizer = &tok;
  ASSERT_TRUE(models::vlm::SaveVlmCheckpoint(
                  tmp + "/tiny_vl", *init, models::vlm::ImageProcessorConfig(),
                  {}, save)
                  .ok());
  auto config = LoadPpoTrainerConfig(
      "",
      VlmGeoMapOverrides(
          "vlm", {"actor_rollout_ref.model.path=" + tmp + "/tiny_vl",
                  "actor_rollout_ref.actor.freeze_vision_tower=true",
                  "actor_rollout_ref.actor.checkpoint.save_contents=[model,"
                  "optimizer,extra,hf_model]",
                  "trainer.save_freq=2", "trainer.default_local_dir=" + ckpt}));
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(ValidatePpoTrainerConfig(*config).ok());
  auto run = RunPpo(*config, nullptr);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->steps, 2);
  const auto& m = run->last_step_metrics;
  for (const char* key : {"actor/pg_loss", "actor/kl_loss", "actor/grad_norm",
                          "critic/score/mean", "response_length/mean",
                          "val-core/geo_map/reward/mean@1"}) {
    EXPECT_TRUE(m.count(key)) << key;
  }
  EXPECT_GT(m.at("actor/grad_norm"), 0.0);
  EXPECT_GT(m.at("prompt_length/mean"), 100.0);  // template + 9 image pads
  // The engine and the actor saw the same images (pixel values spliced at
  // the same pads, same M-RoPE positions).
  EXPECT_LT(m.at("training/rollout_probs_diff_max"), 1e-5);

  // The saved actor: vision tower as loaded, language model trained.
  auto saved = ckpt::LoadPtTensorDict(
      ckpt + "/global_step_2/actor/model_world_size_1_rank_0.pt");
  ASSERT_TRUE(saved.ok()) << saved.status();
  int vision = 0, changed_text = 0;
  for (const auto& item : init->named_parameters()) {
    ASSERT_TRUE(saved->count(item.key())) << item.key();
    const at::Tensor& now = saved->at(item.key());
    if (item.key().rfind("visual.", 0) == 0) {
      EXPECT_TRUE(now.equal(item.value())) << item.key();
      ++vision;
    } else if (!now.equal(item.value())) {
      ++changed_text;
    }
  }
  EXPECT_GT(vision, 40);
  EXPECT_GT(changed_text, 10);

  // hf_model: huggingface/ is a Qwen2.5-VL folder (config with
  // vision_config, the processor's files) that loads back with the saved
  // weights and the policy's chat template.
  const std::string hf = ckpt + "/global_step_2/actor/huggingface";
  auto reloaded = models::vlm::LoadVlmCheckpoint(hf);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ(reloaded->config_json.value("model_type", ""), "qwen2_5_vl");
  EXPECT_TRUE(reloaded->config_json.contains("vision_config"));
  int compared = 0;
  for (const auto& item : reloaded->model->named_parameters()) {
    ASSERT_TRUE(saved->count(item.key())) << item.key();
    EXPECT_TRUE(item.value().equal(saved->at(item.key()))) << item.key();
    ++compared;
  }
  EXPECT_EQ(compared, static_cast<int>(saved->size()));
  EXPECT_TRUE(std::filesystem::exists(hf + "/preprocessor_config.json"));
  ASSERT_TRUE(reloaded->tokenizer.has_value());
  EXPECT_EQ(reloaded->tokenizer->chat_templates().at("default"),
            tok.chat_templates().at("default"));

  // PPO with a critic: the value model is the policy's two towers with a
  // value head, checkpointed with its vision-language config.
  config->mutable_algorithm()->set_adv_estimator("gae");
  config->mutable_trainer()->set_default_local_dir(ckpt + "_gae");
  auto gae = RunPpo(*config, nullptr);
  ASSERT_TRUE(gae.ok()) << gae.status();
  for (const char* key : {"critic/vf_loss", "critic/values/mean",
                          "critic/grad_norm", "critic/vf_explained_var"}) {
    EXPECT_TRUE(gae->last_step_metrics.count(key)) << key;
  }
  EXPECT_GT(gae->last_step_metrics.at("critic/grad_norm"), 0.0);
  auto critic_cfg = core::ReadJsonFile(
      ckpt + "_gae/global_step_2/critic/huggingface/config.json");
  ASSERT_TRUE(critic_cfg.ok()) << critic_cfg.status();
  EXPECT_TRUE(critic_cfg->contains("vision_config"));
  auto critic_saved = ckpt::LoadPtTensorDict(
      ckpt + "_gae/global_step_2/critic/model_world_size_1_rank_0.pt");
  ASSERT_TRUE(critic_saved.ok()) << critic_saved.status();
  EXPECT_TRUE(critic_saved->count("score.weight"));
  EXPECT_TRUE(critic_saved->count("visual.merger.mlp.0.weight"));

  // What a vision-language policy cannot do yet is refused with the key.
  config->mutable_critic()->set_strategy(Strategy::megatron);
  auto megatron = RunPpo(*config, nullptr);
  ASSERT_FALSE(megatron.ok());
  EXPECT_NE(megatron.status().message().find("critic.strategy=megatron"),
            std::string::npos)
      << megatron.status();
}

}  // namespace
}  // namespace verl::rl
