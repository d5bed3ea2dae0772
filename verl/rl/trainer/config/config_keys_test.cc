// File: verl/rl/trainer/config/config_keys_test.cc
//
// No key is accepted and then ignored: every leaf of the trainer's schema
// is classified (served / no effect / not served), every rule matches a key,
// and start-up validation refuses not-served values with their reason.
#include "verl/rl/trainer/config/config_keys.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/config_loader.h"
#include "verl/rl/trainer/config/config.h"

namespace verl::rl {
namespace {

using ::testing::HasSubstr;

// The whole schema: every leaf key (scalars, lists, maps) of the tree, from
// the proto descriptors (DefaultPpoTrainerConfig materialises every
// section).
std::vector<std::string> SchemaLeaves() {
  std::vector<std::string> keys;
  for (const auto& [key, value] :
       core::FlattenConfig(DefaultPpoTrainerConfig())) {
    keys.push_back(key);
  }
  return keys;
}

TEST(ConfigKeysTest, EveryKeyOfTheSchemaIsClassified) {
  const std::vector<std::string> leaves = SchemaLeaves();
  ASSERT_GT(leaves.size(), 400u);
  std::vector<std::string> unclassified;
  for (const std::string& key : leaves) {
    if (FindKeyRule(key) == nullptr) unclassified.push_back(key);
  }
  EXPECT_TRUE(unclassified.empty())
      << "keys neither read nor listed in config_keys.cc: "
      << ::testing::PrintToString(unclassified);
  // Every rule that is not served says why.
  for (const KeyRule& rule : PpoKeyRules()) {
    if (rule.use != KeyUse::kServed) {
      EXPECT_STRNE(rule.reason, "") << rule.pattern;
    }
  }
}

TEST(ConfigKeysTest, EveryRuleMatchesSomeKey) {
  std::set<const KeyRule*> used;
  for (const std::string& key : SchemaLeaves()) used.insert(FindKeyRule(key));
  for (const KeyRule& rule : PpoKeyRules()) {
    EXPECT_TRUE(used.count(&rule) > 0)
        << "stale or shadowed rule: " << rule.pattern;
  }
}

TEST(ConfigKeysTest, MostSpecificRuleWins) {
  EXPECT_EQ(
      FindKeyRule("actor_rollout_ref.actor.fsdp_config.param_offload")->use,
      KeyUse::kServed);
  EXPECT_EQ(
      FindKeyRule("critic.model.fsdp_config.wrap_policy.min_num_params")->use,
      KeyUse::kNoEffect);
  EXPECT_EQ(FindKeyRule("actor_rollout_ref.rollout.multi_turn.enable")->use,
            KeyUse::kServed);
  EXPECT_EQ(FindKeyRule("actor_rollout_ref.rollout.agent."
                        "agent_loop_config_path")
                ->use,
            KeyUse::kNotServed);
  EXPECT_EQ(FindKeyRule("no_such.key"), nullptr);
}

PpoTrainerConfig Load(const std::vector<std::string>& overrides) {
  auto config = LoadPpoTrainerConfig("examples/grpo_tiny.textproto", overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : PpoTrainerConfig();
}

// A key the trainer does not act on fails at start-up with its reason; all
// such keys are reported in one run; no-effect keys only make a notice.
TEST(ConfigKeysTest, NotServedKeysAreRefusedWithTheirReason) {
  EXPECT_TRUE(ValidatePpoTrainerConfig(Load({})).ok());
  absl::Status s = ValidatePpoTrainerConfig(
      Load({"actor_rollout_ref.rollout.agent.agent_loop_config_path=a.yaml",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
            "data.image_key=pixels",
            "actor_rollout_ref.model.override_config.num_hidden_layers=2"}));
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.rollout.agent.agent_loop_config_"
                           "path=a.yaml' is not available here: custom agent"));
  EXPECT_THAT(m, HasSubstr("tensor_model_parallel_size=2' is not available "
                           "here: tensor-parallel rollout"));
  EXPECT_THAT(m, HasSubstr("'data.image_key=pixels' is not available here: "
                           "vision-language"));
  EXPECT_THAT(m, HasSubstr("override_config={num_hidden_layers: 2}' is not "
                           "available"));

  PpoTrainerConfig inert = Load(
      {"actor_rollout_ref.rollout.gpu_memory_utilization=0.9",
       "actor_rollout_ref.rollout.enforce_eager=true",
       "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params=5"});
  EXPECT_TRUE(ValidatePpoTrainerConfig(inert).ok());
  const KeyUsage usage = CheckKeyUse(inert);
  EXPECT_TRUE(usage.not_served.empty());
  EXPECT_THAT(usage.no_effect,
              ::testing::UnorderedElementsAre(
                  "actor_rollout_ref.rollout.enforce_eager",
                  "actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_"
                  "params"));
  bool listed = false;
  for (const std::string& n : PpoTrainerConfigNotices(inert)) {
    listed = listed ||
             (n.find("accepted with no effect here: ") != std::string::npos &&
              n.find("actor_rollout_ref.rollout.enforce_eager") !=
                  std::string::npos);
  }
  EXPECT_TRUE(listed);
}

// Keys verl interpolates must keep their source's value here.
TEST(ConfigKeysTest, InterpolatedKeysMustFollowTheirSource) {
  absl::Status s = ValidatePpoTrainerConfig(
      Load({"actor_rollout_ref.rollout.prompt_length=7"}));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("'actor_rollout_ref.rollout.prompt_length' (7) must "
                        "equal 'data.max_prompt_length'"));
}

}  // namespace
}  // namespace verl::rl
