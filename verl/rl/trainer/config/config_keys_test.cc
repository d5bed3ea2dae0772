// File: verl/rl/trainer/config/config_keys_test.cc
//
// No key is accepted and then ignored: every leaf of the trainer's schema
// is classified (served / no effect / not served), every rule matches a key,
// and start-up validation refuses not-served values with their reason.
#include "verl/rl/trainer/config/config_keys.h"

#include <fstream>
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
                        "agent_loop_manager_class")
                ->use,
            KeyUse::kNotServed);
  EXPECT_EQ(FindKeyRule("actor_rollout_ref.rollout.agent."
                        "agent_loop_config_path")
                ->use,
            KeyUse::kServed);
  EXPECT_EQ(FindKeyRule("no_such.key"), nullptr);
}

// Every key of verl's generated trainer configs (testdata, copied from verl)
// is a key of the schema here (a leaf, a section, or an entry of a map
// section) and, unless a section, has a rule.
TEST(ConfigKeysTest, EveryKeyOfVerlsGeneratedConfigIsKnown) {
  const std::vector<std::string> dotted =
      core::DottedKeys(*PpoTrainerConfig::descriptor());
  const std::set<std::string> keys(dotted.begin(), dotted.end());
  std::set<std::string> leaves;
  for (const std::string& k : SchemaLeaves()) leaves.insert(k);
  std::ifstream in("verl/rl/trainer/config/testdata/verl_trainer_keys.txt");
  ASSERT_TRUE(in.good());
  std::vector<std::string> unknown, unclassified;
  int count = 0;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    ++count;
    bool map_entry = false;
    for (size_t dot = line.find('.'); dot != std::string::npos;
         dot = line.find('.', dot + 1)) {
      map_entry = map_entry || keys.count(line.substr(0, dot) + ".<key>") > 0;
    }
    if (!map_entry && keys.count(line) == 0) {
      unknown.push_back(line);
    } else if ((map_entry || leaves.count(line) > 0) &&
               FindKeyRule(line) == nullptr) {
      unclassified.push_back(line);
    }
  }
  EXPECT_GT(count, 600);
  EXPECT_TRUE(unknown.empty())
      << "verl keys unknown here: " << ::testing::PrintToString(unknown);
  EXPECT_TRUE(unclassified.empty())
      << "verl keys without a rule: " << ::testing::PrintToString(unclassified);
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
      Load({"actor_rollout_ref.rollout.agent.agent_loop_manager_class=m.M",
            "actor_rollout_ref.rollout.expert_parallel_size=2",
            "data.video_key=clips",
            "critic.model.override_config.num_hidden_layers=2"}));
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.rollout.agent.agent_loop_"
                           "manager_class=m.M' is not available here: a "
                           "Python class"));
  EXPECT_THAT(m, HasSubstr("expert_parallel_size=2' is not available "
                           "here: expert-parallel rollout"));
  EXPECT_THAT(m, HasSubstr("'data.video_key=clips' is not available here: "
                           "vision-language"));
  EXPECT_THAT(
      m, HasSubstr("'critic.model.override_config={num_hidden_layers: 2}' is "
                   "not available here: the critic is built from the "
                   "actor's model"));

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

// verl's nested model.lora.* is served as the flat LoRA keys (Megatron
// module names mapped to HF ones); conflicting values are refused.
TEST(ConfigKeysTest, NestedLoraIsTheFlatLora) {
  const PpoTrainerConfig nested = Load(
      {"actor_rollout_ref.model.lora.rank=8",
       "actor_rollout_ref.model.lora.alpha=4",
       "actor_rollout_ref.model.lora.target_modules=[linear_qkv,linear_fc2]",
       "actor_rollout_ref.model.lora.exclude_modules=[linear_proj]",
       "critic.model.lora.rank=2"});
  EXPECT_TRUE(ValidatePpoTrainerConfig(nested).ok())
      << ValidatePpoTrainerConfig(nested);
  const PpoTrainerConfig flat =
      Load({"actor_rollout_ref.model.lora_rank=8",
            "actor_rollout_ref.model.lora_alpha=4",
            "actor_rollout_ref.model.target_modules=[q_proj,k_proj,v_proj,"
            "down_proj]",
            "actor_rollout_ref.model.exclude_modules=o_proj",
            "critic.model.lora_rank=2", "critic.model.lora_alpha=32",
            "critic.model.target_modules=[q_proj,k_proj,v_proj,o_proj,gate_"
            "proj,up_proj,down_proj]"});
  for (const char* key :
       {"actor_rollout_ref.model.lora_rank",
        "actor_rollout_ref.model.lora_alpha",
        "actor_rollout_ref.model.target_modules",
        "actor_rollout_ref.model.exclude_modules", "critic.model.lora_rank",
        "critic.model.lora_alpha", "critic.model.target_modules"}) {
    EXPECT_EQ(*core::GetConfigValue(nested, key),
              *core::GetConfigValue(flat, key))
        << key;
  }

  const std::string m(
      ValidatePpoTrainerConfig(
          Load({"actor_rollout_ref.model.lora_rank=4",
                "actor_rollout_ref.model.lora.rank=8",
                "actor_rollout_ref.model.lora.type=dora",
                "critic.model.lora.rank=2", "critic.model.lora.alpha=8",
                "critic.model.lora_rank=2", "critic.enable=true"}))
          .message());
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.model.lora.rank' (8) conflicts "
                           "with 'actor_rollout_ref.model.lora_rank' (4)"));
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.model.lora.type=dora' is not "
                           "available here"));
  EXPECT_THAT(m, HasSubstr("'critic.model.lora.alpha' (8) conflicts with "
                           "'critic.model.lora_alpha' (16)"));
}

// verl's newer spellings served as aliases, and the newer keys refused with
// the feature they need.
TEST(ConfigKeysTest, NewerVerlKeys) {
  const PpoTrainerConfig c =
      Load({"actor_rollout_ref.actor.optim.lr=1e-6",
            "actor_rollout_ref.actor.optim.lr_decay_style=cosine",
            "actor_rollout_ref.actor.optim.min_lr=1e-7",
            "reward_manager.name=dapo", "actor_rollout_ref.actor.rollout_n=4"});
  EXPECT_TRUE(ValidatePpoTrainerConfig(c).ok()) << ValidatePpoTrainerConfig(c);
  EXPECT_EQ(c.actor_rollout_ref().actor().optim().lr_scheduler_type(),
            "cosine");
  EXPECT_NEAR(c.actor_rollout_ref().actor().optim().min_lr_ratio(), 0.1, 1e-12);
  EXPECT_EQ(c.reward_model().reward_manager(), "dapo");
  // Conflicting spellings are refused (never silently undone).
  const std::string conflicts(
      ValidatePpoTrainerConfig(
          Load({"reward_manager.name=dapo", "reward_model.reward_manager=prime",
                "critic.optim.lr_scheduler_type=cosine",
                "critic.optim.lr_decay_style=constant",
                "actor_rollout_ref.actor.optim.lr=1e-6",
                "actor_rollout_ref.actor.optim.min_lr=1e-7",
                "actor_rollout_ref.actor.optim.min_lr_ratio=0.5"}))
          .message());
  EXPECT_THAT(conflicts, HasSubstr("'reward_manager.name' (dapo) conflicts "
                                   "with 'reward_model.reward_manager' "
                                   "(prime)"));
  EXPECT_THAT(conflicts,
              HasSubstr("'critic.optim.lr_decay_style' (constant) "
                        "conflicts with "
                        "'critic.optim.lr_scheduler_type' (cosine)"));
  EXPECT_THAT(conflicts,
              HasSubstr("'actor_rollout_ref.actor.optim.min_lr' (1e-07) "
                        "conflicts with"));

  const std::string m(
      ValidatePpoTrainerConfig(
          Load({"actor_rollout_ref.actor.optim.lr_decay_style=linear",
                "actor_rollout_ref.ref.rollout_n=3",
                "transfer_queue.enable=true",
                "actor_rollout_ref.rollout.quantization=fp8",
                "actor_rollout_ref.actor.router_replay.mode=R3",
                "actor_rollout_ref.model.mtp.enable=true",
                "reward_manager.source=importlib",
                "critic.optim.lr_warmup_init=1e-7"}))
          .message());
  for (const char* want :
       {"'actor_rollout_ref.actor.optim.lr_decay_style=linear' is not "
        "available here: constant and cosine",
        "'actor_rollout_ref.ref.rollout_n' (3) must equal",
        "'transfer_queue.enable=true' is not available here: verl's "
        "TransferQueue",
        "'actor_rollout_ref.rollout.quantization=fp8' is not available",
        "'actor_rollout_ref.actor.router_replay.mode=R3' is not available "
        "here: MoE routing replay",
        "'actor_rollout_ref.model.mtp.enable=true' is not available here: "
        "multi-token prediction",
        "'reward_manager.source=importlib' is not available here: a Python",
        "'critic.optim.lr_warmup_init=1e-07' is not available here"}) {
    EXPECT_THAT(m, HasSubstr(want));
  }
  const KeyUsage inert = CheckKeyUse(
      Load({"actor_rollout_ref.actor.fsdp_config.full_determinism=true",
            "ray_kwargs.ray_init.num_cpus=4"}));
  EXPECT_THAT(inert.no_effect,
              ::testing::UnorderedElementsAre(
                  "actor_rollout_ref.actor.fsdp_config.full_determinism",
                  "ray_kwargs.ray_init.num_cpus"));
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
