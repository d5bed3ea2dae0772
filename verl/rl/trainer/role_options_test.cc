#include "verl/rl/trainer/role_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/infer/rollout_options.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/trainer/config/config.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;

PpoTrainerConfig Load(const std::vector<std::string>& overrides) {
  auto config = LoadPpoTrainerConfig("", overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

parallel::UlyssesGroups OneRank() {
  auto self = parallel::SingleProcessCommunicator();
  return {self, self};
}

TEST(RoleOptionsTest, ActorKeysMapToActorOptions) {
  PpoTrainerConfig config = Load({
      "actor_rollout_ref.actor.ppo_mini_batch_size=4",
      "actor_rollout_ref.rollout.n=3",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
      "actor_rollout_ref.actor.clip_ratio_low=0.1",
      "actor_rollout_ref.actor.clip_ratio_high=0.3",
      "actor_rollout_ref.actor.ppo_epochs=2",
      "actor_rollout_ref.actor.use_kl_loss=true",
      "actor_rollout_ref.actor.kl_loss_type=k3",
      "actor_rollout_ref.rollout.temperature=0.7",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=5",
  });
  auto ao = ActorOptionsFromConfig(config, OneRank(), /*seed=*/9);
  ASSERT_TRUE(ao.ok()) << ao.status();
  EXPECT_EQ(ao->mini_batch_size, 12);  // 4 prompts x n=3, one rank
  EXPECT_EQ(ao->update_micro.micro_batch_size, 2);
  EXPECT_EQ(ao->log_prob_micro.micro_batch_size, 5);
  EXPECT_DOUBLE_EQ(*ao->policy_loss.clip_ratio_low, 0.1);
  EXPECT_DOUBLE_EQ(*ao->policy_loss.clip_ratio_high, 0.3);
  EXPECT_EQ(ao->policy_loss.clip_cov_seed, 9u);
  EXPECT_EQ(ao->ppo_epochs, 2);
  EXPECT_TRUE(ao->use_kl_loss);
  EXPECT_EQ(ao->kl_loss_type, "k3");
  EXPECT_DOUBLE_EQ(ao->temperature, 0.7);
  EXPECT_EQ(ao->loss_mode, "vanilla");
}

// rollout.temperature=0 is greedy decoding (vLLM/verl): the actor scores
// the unscaled logits instead of dividing by zero.
TEST(RoleOptionsTest, TemperatureZeroIsGreedyWithUnscaledLogProbs) {
  PpoTrainerConfig config = Load({
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
      "actor_rollout_ref.rollout.temperature=0",
  });
  auto ao = ActorOptionsFromConfig(config, OneRank(), /*seed=*/1);
  ASSERT_TRUE(ao.ok()) << ao.status();
  EXPECT_DOUBLE_EQ(ao->temperature, 1.0);
  auto params = infer::SamplingParamsFromRolloutConfig(
      config.actor_rollout_ref().rollout(), /*validation=*/false);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_TRUE(params->greedy());
}

// The critic's batching comes from the actor's keys through config
// resolution only (one place); explicit critic keys win.
TEST(RoleOptionsTest, CriticInheritsTheActorsBatchingThroughResolution) {
  PpoTrainerConfig config = Load({
      "actor_rollout_ref.actor.ppo_mini_batch_size=4",
      "actor_rollout_ref.rollout.n=2",
      "actor_rollout_ref.actor.ppo_epochs=3",
      "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",
      "critic.ppo_micro_batch_size_per_gpu=4",
  });
  CriticOptions co = CriticOptionsFromConfig(config, OneRank(), {});
  EXPECT_EQ(co.mini_batch_size, 8);
  EXPECT_EQ(co.ppo_epochs, 3);
  EXPECT_EQ(co.loss_agg_mode, "seq-mean-token-mean");
  EXPECT_EQ(co.update_micro.micro_batch_size, 4);
  EXPECT_EQ(co.forward_micro.micro_batch_size, 4);

  config = Load({"actor_rollout_ref.actor.ppo_mini_batch_size=4",
                 "critic.ppo_mini_batch_size=2", "critic.ppo_epochs=1"});
  co = CriticOptionsFromConfig(config, OneRank(), {});
  EXPECT_EQ(co.mini_batch_size, 2 * config.actor_rollout_ref().rollout().n());
  EXPECT_EQ(co.ppo_epochs, 1);
}

// use_dynamic_bsz with virtual pipeline stages: micro-batch counts are
// rounded up to a multiple of pp (verl's num_batches_divided_by), for the
// actor's update and log-probs (the reference's pp too) and the critic.
TEST(RoleOptionsTest, InterleavedScheduleRoundsDynamicMicroBatchCounts) {
  PpoTrainerConfig config = Load({
      "actor_rollout_ref.actor.strategy=megatron",
      "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
      "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size="
      "2",
      "actor_rollout_ref.ref.strategy=megatron",
      "actor_rollout_ref.ref.megatron.pipeline_model_parallel_size=3",
      "actor_rollout_ref.ref.megatron.virtual_pipeline_model_parallel_size=2",
      "critic.strategy=megatron",
      "critic.megatron.pipeline_model_parallel_size=4",
      "critic.megatron.virtual_pipeline_model_parallel_size=2",
  });
  auto ao = ActorOptionsFromConfig(config, OneRank(), 1);
  ASSERT_TRUE(ao.ok()) << ao.status();
  EXPECT_EQ(ao->update_micro.num_batches_divided_by, 2);
  EXPECT_EQ(ao->log_prob_micro.num_batches_divided_by, 6);
  CriticOptions co = CriticOptionsFromConfig(config, OneRank(), {});
  EXPECT_EQ(co.update_micro.num_batches_divided_by, 4);
  EXPECT_EQ(co.forward_micro.num_batches_divided_by, 4);
  config = Load({"actor_rollout_ref.actor.strategy=megatron",
                 "actor_rollout_ref.actor.megatron.pipeline_model_parallel_"
                 "size=2"});
  ao = ActorOptionsFromConfig(config, OneRank(), 1);
  ASSERT_TRUE(ao.ok()) << ao.status();
  EXPECT_EQ(ao->update_micro.num_batches_divided_by, 0);  // 1F1B: any count
}

TEST(RoleOptionsTest, RolloutCorrectionNeedsRolloutLogProbs) {
  PpoTrainerConfig config =
      Load({"algorithm.rollout_correction.rollout_is=token"});
  EXPECT_THAT(RolloutCorrectionFromConfig(config),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rollout.calculate_log_probs=true"));
  config = Load({"algorithm.rollout_correction.rollout_is=null"});
  auto off = RolloutCorrectionFromConfig(config);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->rollout_is, "");
}

TEST(RoleOptionsTest, BypassModeSwitchesTheActorLoss) {
  PpoTrainerConfig config =
      Load({"algorithm.rollout_correction.bypass_mode=true",
            "actor_rollout_ref.rollout.calculate_log_probs=true"});
  auto ao = ActorOptionsFromConfig(config, OneRank(), 1);
  ASSERT_TRUE(ao.ok()) << ao.status();
  EXPECT_EQ(ao->loss_mode, "bypass_mode");
  EXPECT_TRUE(ao->policy_loss.rollout_correction.bypass_mode);

  config = Load({"algorithm.rollout_correction.bypass_mode=true",
                 "algorithm.rollout_correction.loss_type=nope",
                 "actor_rollout_ref.rollout.calculate_log_probs=true"});
  EXPECT_THAT(ActorOptionsFromConfig(config, OneRank(), 1),
              StatusIs(absl::StatusCode::kInvalidArgument, "loss_type"));
}

TEST(RoleOptionsTest, EngineContextDefaultsToPromptPlusResponse) {
  PpoTrainerConfig config =
      Load({"data.max_prompt_length=32", "data.max_response_length=16"});
  auto eo = EngineOptionsFromConfig(config, 5);
  ASSERT_TRUE(eo.ok()) << eo.status();
  EXPECT_EQ(eo->max_model_len, 48);
  EXPECT_EQ(eo->seed, 5u);
}

TEST(RoleOptionsTest, CustomRewardCommandScoresBatches) {
  PpoTrainerConfig config = Load({"custom_reward_function.path=/bin/true"});
  EXPECT_EQ(RewardManagerConfigFromConfig(config, "</s>").name, "batch");
  EXPECT_EQ(RewardManagerConfigFromConfig(Load({}), "</s>").name, "naive");
}

// agent_loop_config_path turns the agent loop on and registers its names
// (a file's alias may be the default); a bad file fails naming the key.
TEST(RoleOptionsTest, AgentLoopConfigPathRegistersLoopNames) {
  const models::Tokenizer tok = models::MakeBuiltinTokenizer();
  const std::string dir = ::testing::TempDir();
  const std::string loops = dir + "/loops.yaml";
  ASSERT_TRUE(core::WriteFileAtomic(loops,
                                    "- name: calc_agent\n"
                                    "  _target_: verl.experimental.agent_loop."
                                    "tool_agent_loop.ToolAgentLoop\n")
                  .ok());
  EXPECT_EQ(AgentLoopFromConfig(Load({}), &tok)->get(), nullptr);
  const std::string key =
      "actor_rollout_ref.rollout.agent.agent_loop_config_path=";
  auto loop = AgentLoopFromConfig(
      Load({key + loops,
            "actor_rollout_ref.rollout.agent.default_agent_loop=calc_agent"}),
      &tok);
  ASSERT_TRUE(loop.ok()) << loop.status();
  EXPECT_NE(loop->get(), nullptr);
  EXPECT_TRUE(UsesAgentLoop(Load({key + loops})));
  EXPECT_THAT(
      AgentLoopFromConfig(
          Load({"actor_rollout_ref.rollout.agent.default_agent_loop=calc"}),
          &tok)
          .status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "default_agent_loop: 'calc' is not an agent loop here"));
  ASSERT_TRUE(
      core::WriteFileAtomic(dir + "/custom.yaml",
                            "- name: react\n  _target_: mine.ReactLoop\n")
          .ok());
  EXPECT_THAT(
      AgentLoopFromConfig(Load({key + dir + "/custom.yaml"}), &tok).status(),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "agent_loop_config_path: " + dir +
                   "/custom.yaml: [0]: 'react': _target_ "
                   "mine.ReactLoop is a Python class"));
}

TEST(RoleOptionsTest, RunPpoTakesResolvedConfigsOnly) {
  EXPECT_TRUE(CheckResolved(Load({})).ok());
  EXPECT_TRUE(CheckResolved(DefaultPpoTrainerConfig()).ok());
  EXPECT_THAT(CheckResolved(PpoTrainerConfig()),
              StatusIs(absl::StatusCode::kFailedPrecondition, "not resolved"));
}

}  // namespace
}  // namespace verl::rl
