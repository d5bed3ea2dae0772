// File: verl/rl/trainer/config/config_test.cc
#include "verl/rl/trainer/config/config.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "verl/core/cli.h"
#include "verl/core/config_loader.h"
#include "verl/core/test_util.h"
#include "verl/rl/trainer/config/sft_config.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using ::google::protobuf::util::MessageDifferencer;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using KeyValues = std::vector<std::pair<std::string, std::string>>;

std::string WriteFile(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

void ExpectValues(const google::protobuf::Message& config,
                  const KeyValues& expected) {
  for (const auto& [key, value] : expected) {
    absl::StatusOr<std::string> got = core::GetConfigValue(config, key);
    ASSERT_TRUE(got.ok()) << key << ": " << got.status();
    EXPECT_EQ(*got, value) << key;
  }
}

PpoTrainerConfig Load(const std::vector<std::string>& overrides,
                      const std::string& file = "") {
  absl::StatusOr<PpoTrainerConfig> config =
      LoadPpoTrainerConfig(file, overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : PpoTrainerConfig();
}

std::string LoadError(const std::vector<std::string>& overrides,
                      const std::string& file = "") {
  absl::StatusOr<PpoTrainerConfig> config =
      LoadPpoTrainerConfig(file, overrides);
  EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

// verl's defaults (verl/trainer/config/_generated_ppo_trainer.yaml and
// shared/verl_features.md section 10), spelled as overrides would spell them.
TEST(PpoTrainerConfigTest, DefaultsEqualVerls) {
  const KeyValues expected = {
      // data
      {"data.train_batch_size", "1024"},
      {"data.max_prompt_length", "512"},
      {"data.max_response_length", "512"},
      {"data.filter_overlong_prompts", "false"},
      {"data.truncation", "error"},
      {"data.shuffle", "true"},
      {"data.seed", "null"},
      {"data.dataloader_num_workers", "8"},
      {"data.prompt_key", "prompt"},
      {"data.reward_fn_key", "data_source"},
      {"data.val_batch_size", "null"},
      {"data.validation_shuffle", "false"},
      // model
      {"actor_rollout_ref.model.enable_gradient_checkpointing", "true"},
      {"actor_rollout_ref.model.use_remove_padding", "true"},
      {"actor_rollout_ref.model.lora_rank", "0"},
      {"actor_rollout_ref.model.lora_alpha", "16"},
      {"actor_rollout_ref.model.target_modules", "[all-linear]"},
      {"actor_rollout_ref.model.custom_chat_template", "null"},
      {"actor_rollout_ref.model.trust_remote_code", "false"},
      {"actor_rollout_ref.hybrid_engine", "true"},
      {"actor_rollout_ref.nccl_timeout", "600"},
      // actor
      {"actor_rollout_ref.actor.strategy", "fsdp"},
      {"actor_rollout_ref.actor.ppo_mini_batch_size", "256"},
      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "null"},
      {"actor_rollout_ref.actor.use_dynamic_bsz", "false"},
      {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu", "16384"},
      {"actor_rollout_ref.actor.ppo_epochs", "1"},
      {"actor_rollout_ref.actor.shuffle", "false"},
      {"actor_rollout_ref.actor.data_loader_seed", "42"},
      {"actor_rollout_ref.actor.clip_ratio", "0.2"},
      {"actor_rollout_ref.actor.clip_ratio_low", "0.2"},
      {"actor_rollout_ref.actor.clip_ratio_high", "0.2"},
      {"actor_rollout_ref.actor.clip_ratio_c", "3"},
      {"actor_rollout_ref.actor.policy_loss.loss_mode", "vanilla"},
      {"actor_rollout_ref.actor.policy_loss.clip_cov_ratio", "0.0002"},
      {"actor_rollout_ref.actor.policy_loss.clip_cov_lb", "1"},
      {"actor_rollout_ref.actor.policy_loss.clip_cov_ub", "5"},
      {"actor_rollout_ref.actor.policy_loss.kl_cov_ratio", "0.0002"},
      {"actor_rollout_ref.actor.policy_loss.ppo_kl_coef", "0.1"},
      {"actor_rollout_ref.actor.loss_agg_mode", "token-mean"},
      {"actor_rollout_ref.actor.loss_scale_factor", "null"},
      {"actor_rollout_ref.actor.entropy_coeff", "0"},
      {"actor_rollout_ref.actor.calculate_entropy", "false"},
      {"actor_rollout_ref.actor.use_kl_loss", "false"},
      {"actor_rollout_ref.actor.kl_loss_coef", "0.001"},
      {"actor_rollout_ref.actor.kl_loss_type", "low_var_kl"},
      {"actor_rollout_ref.actor.grad_clip", "1"},
      {"actor_rollout_ref.actor.optim.lr", "1e-06"},
      {"actor_rollout_ref.actor.optim.lr_warmup_steps", "-1"},
      {"actor_rollout_ref.actor.optim.lr_warmup_steps_ratio", "0"},
      {"actor_rollout_ref.actor.optim.lr_scheduler_type", "constant"},
      {"actor_rollout_ref.actor.optim.weight_decay", "0.01"},
      {"actor_rollout_ref.actor.optim.betas", "[0.9, 0.999]"},
      {"actor_rollout_ref.actor.optim.min_lr_ratio", "0"},
      {"actor_rollout_ref.actor.optim.num_cycles", "0.5"},
      {"actor_rollout_ref.actor.optim.total_training_steps", "-1"},
      {"actor_rollout_ref.actor.optim.clip_grad", "1"},
      {"actor_rollout_ref.actor.fsdp_config.param_offload", "false"},
      {"actor_rollout_ref.actor.fsdp_config.optimizer_offload", "false"},
      {"actor_rollout_ref.actor.fsdp_config.offload_policy", "false"},
      {"actor_rollout_ref.actor.fsdp_config.reshard_after_forward", "true"},
      {"actor_rollout_ref.actor.fsdp_config.fsdp_size", "-1"},
      {"actor_rollout_ref.actor.fsdp_config.forward_prefetch", "false"},
      {"actor_rollout_ref.actor.fsdp_config.model_dtype", "fp32"},
      {"actor_rollout_ref.actor.fsdp_config.dtype", "bfloat16"},
      {"actor_rollout_ref.actor.fsdp_config.wrap_policy.min_num_params", "0"},
      {"actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size",
       "1"},
      {"actor_rollout_ref.actor.megatron.tensor_model_parallel_size", "1"},
      {"actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", "1"},
      {"actor_rollout_ref.actor.megatron."
       "virtual_pipeline_model_parallel_size",
       "null"},
      {"actor_rollout_ref.actor.megatron.context_parallel_size", "1"},
      {"actor_rollout_ref.actor.megatron.expert_model_parallel_size", "1"},
      {"actor_rollout_ref.actor.megatron.expert_tensor_parallel_size", "null"},
      {"actor_rollout_ref.actor.megatron.sequence_parallel", "true"},
      {"actor_rollout_ref.actor.megatron.use_distributed_optimizer", "true"},
      {"actor_rollout_ref.actor.megatron.param_offload", "false"},
      {"actor_rollout_ref.actor.megatron.seed", "42"},
      {"actor_rollout_ref.actor.megatron.override_transformer_config."
       "recompute_granularity",
       "null"},
      {"actor_rollout_ref.actor.megatron.dtype", "float32"},
      {"actor_rollout_ref.ref.megatron.seed", "42"},
      {"critic.megatron.tensor_model_parallel_size", "1"},
      {"actor_rollout_ref.actor.checkpoint.save_contents",
       "[model, optimizer, extra]"},
      {"actor_rollout_ref.actor.checkpoint.load_contents",
       "[model, optimizer, extra]"},
      {"actor_rollout_ref.actor.checkpoint.async_save", "false"},
      {"actor_rollout_ref.actor.profiler.enable", "false"},
      {"actor_rollout_ref.actor.profiler.all_ranks", "false"},
      {"actor_rollout_ref.actor.profiler.ranks", "[]"},
      {"actor_rollout_ref.actor.profiler.tool_config.torch_memory."
       "trace_alloc_max_entries",
       "100000"},
      {"actor_rollout_ref.actor.profiler.tool_config.torch_memory.stack_depth",
       "32"},
      // ref
      {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "null"},
      {"actor_rollout_ref.ref.fsdp_config.param_offload", "false"},
      {"actor_rollout_ref.ref.strategy", "fsdp"},
      {"actor_rollout_ref.ref.log_prob_max_token_len_per_gpu", "16384"},
      // rollout
      {"actor_rollout_ref.rollout.mode", "async"},
      {"actor_rollout_ref.rollout.n", "1"},
      {"actor_rollout_ref.rollout.temperature", "1"},
      {"actor_rollout_ref.rollout.top_p", "1"},
      {"actor_rollout_ref.rollout.top_k", "-1"},
      {"actor_rollout_ref.rollout.do_sample", "true"},
      {"actor_rollout_ref.rollout.prompt_length", "512"},
      {"actor_rollout_ref.rollout.response_length", "512"},
      {"actor_rollout_ref.rollout.dtype", "bfloat16"},
      {"actor_rollout_ref.rollout.gpu_memory_utilization", "0.5"},
      {"actor_rollout_ref.rollout.ignore_eos", "false"},
      {"actor_rollout_ref.rollout.enforce_eager", "false"},
      {"actor_rollout_ref.rollout.free_cache_engine", "true"},
      {"actor_rollout_ref.rollout.load_format", "dummy"},
      {"actor_rollout_ref.rollout.max_num_batched_tokens", "8192"},
      {"actor_rollout_ref.rollout.max_num_seqs", "256"},
      {"actor_rollout_ref.rollout.max_model_len", "null"},
      {"actor_rollout_ref.rollout.enable_chunked_prefill", "true"},
      {"actor_rollout_ref.rollout.enable_prefix_caching", "true"},
      {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "null"},
      {"actor_rollout_ref.rollout.calculate_log_probs", "false"},
      {"actor_rollout_ref.rollout.val_kwargs.temperature", "0"},
      {"actor_rollout_ref.rollout.val_kwargs.top_p", "1"},
      {"actor_rollout_ref.rollout.val_kwargs.top_k", "-1"},
      {"actor_rollout_ref.rollout.val_kwargs.n", "1"},
      {"actor_rollout_ref.rollout.val_kwargs.do_sample", "false"},
      {"actor_rollout_ref.rollout.multi_turn.enable", "false"},
      {"actor_rollout_ref.rollout.multi_turn.max_assistant_turns", "null"},
      {"actor_rollout_ref.rollout.multi_turn.tool_config_path", "null"},
      {"actor_rollout_ref.rollout.multi_turn.format", "hermes"},
      {"actor_rollout_ref.rollout.multi_turn.max_tool_response_length", "256"},
      {"actor_rollout_ref.rollout.agent.num_workers", "8"},
      {"actor_rollout_ref.rollout.agent.default_agent_loop",
       "single_turn_agent"},
      {"actor_rollout_ref.rollout.checkpoint_engine.backend", "naive"},
      // critic
      {"critic.enable", "null"},
      {"critic.optim.lr", "1e-05"},
      {"critic.cliprange_value", "0.5"},
      {"critic.ppo_max_token_len_per_gpu", "32768"},
      {"critic.forward_max_token_len_per_gpu", "32768"},
      {"critic.ppo_mini_batch_size", "256"},
      {"critic.rollout_n", "1"},
      {"critic.loss_agg_mode", "token-mean"},
      {"critic.grad_clip", "1"},
      {"critic.model.enable_gradient_checkpointing", "true"},
      // reward model / custom reward
      {"reward_model.enable", "false"},
      {"reward_model.reward_manager", "naive"},
      {"reward_model.use_reward_loop", "true"},
      {"reward_model.launch_reward_fn_async", "false"},
      {"reward_model.sandbox_fusion.max_concurrent", "64"},
      {"reward_model.sandbox_fusion.memory_limit_mb", "1024"},
      {"custom_reward_function.path", "null"},
      {"custom_reward_function.name", "compute_score"},
      // algorithm
      {"algorithm.adv_estimator", "gae"},
      {"algorithm.gamma", "1"},
      {"algorithm.lam", "1"},
      {"algorithm.norm_adv_by_std_in_grpo", "true"},
      {"algorithm.use_kl_in_reward", "false"},
      {"algorithm.kl_penalty", "kl"},
      {"algorithm.kl_ctrl.type", "fixed"},
      {"algorithm.kl_ctrl.kl_coef", "0.001"},
      {"algorithm.kl_ctrl.horizon", "10000"},
      {"algorithm.kl_ctrl.target_kl", "0.1"},
      {"algorithm.use_pf_ppo", "false"},
      {"algorithm.pf_ppo.reweight_method", "pow"},
      {"algorithm.pf_ppo.weight_pow", "2"},
      {"algorithm.filter_groups.enable", "false"},
      {"algorithm.rollout_correction.rollout_is", "null"},
      {"algorithm.rollout_correction.rollout_is_threshold", "2"},
      {"algorithm.rollout_correction.rollout_rs", "null"},
      {"algorithm.rollout_correction.bypass_mode", "false"},
      {"algorithm.rollout_correction.loss_type", "ppo_clip"},
      // data (verl's Parquet paths; .parquet and .jsonl both load)
      {"data.train_files", "[~/data/rlhf/gsm8k/train.parquet]"},
      {"data.val_files", "[~/data/rlhf/gsm8k/test.parquet]"},
      // trainer
      {"trainer.total_epochs", "30"},
      {"trainer.total_training_steps", "null"},
      {"trainer.project_name", "verl_examples"},
      {"trainer.experiment_name", "gsm8k"},
      {"trainer.nnodes", "1"},
      {"trainer.n_gpus_per_node", "8"},
      {"trainer.save_freq", "-1"},
      {"trainer.test_freq", "-1"},
      {"trainer.val_before_train", "true"},
      {"trainer.val_only", "false"},
      {"trainer.resume_mode", "auto"},
      {"trainer.resume_from_path", "null"},
      {"trainer.default_local_dir", "checkpoints/verl_examples/gsm8k"},
      {"trainer.max_actor_ckpt_to_keep", "null"},
      {"trainer.balance_batch", "true"},
      {"trainer.critic_warmup", "0"},
      {"trainer.log_val_generations", "0"},
      {"trainer.esi_redundant_time", "0"},
      {"trainer.use_legacy_worker_impl", "auto"},
      {"trainer.ray_wait_register_center_timeout", "300"},
      // global profiler
      {"global_profiler.tool", "null"},
      {"global_profiler.steps", "[]"},
      {"global_profiler.profile_continuous_steps", "false"},
      {"global_profiler.save_path", "outputs/profile"},
      {"global_profiler.global_tool_config.torch_memory."
       "trace_alloc_max_entries",
       "100000"},
      {"global_profiler.global_tool_config.torch_memory.stack_depth", "32"},
      {"global_profiler.global_tool_config.nsys.discrete", "false"},
  };
  ASSERT_GE(expected.size(), 40u);
  ExpectValues(DefaultPpoTrainerConfig(), expected);
}

// Where verl's default cannot work here (docs/config.md lists each).
TEST(PpoTrainerConfigTest, DocumentedDeviations) {
  ExpectValues(
      DefaultPpoTrainerConfig(),
      {
          {"trainer.device", "cpu"},
          {"trainer.logger", "[console]"},
          {"actor_rollout_ref.rollout.name", "native"},
          {"actor_rollout_ref.model.path", ""},
          {"actor_rollout_ref.model.preset", "tiny-qwen2"},
          {"actor_rollout_ref.rollout.tensor_model_parallel_size", "1"},
      });
}

TEST(PpoTrainerConfigTest, OverridesOfEachType) {
  const PpoTrainerConfig c = Load({
      "trainer.total_epochs=2",                                     // int
      "actor_rollout_ref.actor.optim.lr=3e-6",                      // double
      "actor_rollout_ref.actor.fsdp_config.param_offload=True",     // bool
      "actor_rollout_ref.rollout.do_sample=false",                  // bool
      "algorithm.adv_estimator=grpo",                               // string
      "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean",  // dashes
      "data.truncation=left",                                       // enum
      "algorithm.kl_ctrl.type=adaptive",                            // enum
      "actor_rollout_ref.actor.strategy=fsdp2",                     // enum
      "trainer.logger=[console,file]",                              // list
      "global_profiler.steps=[1,2,5]",                              // list
      "actor_rollout_ref.actor.clip_ratio_low=null",                // null
      "actor_rollout_ref.model.override_config.attn_implementation=eager",
  });
  ExpectValues(
      c, {
             {"trainer.total_epochs", "2"},
             {"actor_rollout_ref.actor.optim.lr", "3e-06"},
             {"actor_rollout_ref.actor.fsdp_config.param_offload", "true"},
             {"actor_rollout_ref.rollout.do_sample", "false"},
             {"algorithm.adv_estimator", "grpo"},
             {"actor_rollout_ref.actor.loss_agg_mode", "seq-mean-token-mean"},
             {"data.truncation", "left"},
             {"algorithm.kl_ctrl.type", "adaptive"},
             {"actor_rollout_ref.actor.strategy", "fsdp2"},
             {"trainer.logger", "[console, file]"},
             {"global_profiler.steps", "[1, 2, 5]"},
             {"actor_rollout_ref.actor.clip_ratio_low", "null"},
             {"actor_rollout_ref.model.override_config",
              "{attn_implementation: eager}"},
         });
  EXPECT_EQ(c.data().truncation(), TruncationMode::left);
  EXPECT_FALSE(c.actor_rollout_ref().actor().has_clip_ratio_low());
  EXPECT_TRUE(c.actor_rollout_ref().actor().has_clip_ratio_high());
  // The ref follows the actor's strategy (verl interpolation).
  EXPECT_EQ(c.actor_rollout_ref().ref().strategy(), Strategy::fsdp2);
}

TEST(PpoTrainerConfigTest, InterpolationsFollowOverridesUnlessSet) {
  PpoTrainerConfig c =
      Load({"data.max_prompt_length=1024",
            "actor_rollout_ref.actor.ppo_mini_batch_size=64",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            "actor_rollout_ref.rollout.n=8", "critic.ppo_epochs=3",
            "critic.ppo_micro_batch_size_per_gpu=4", "trainer.project_name=p",
            "global_profiler.tool=torch_memory",
            "actor_rollout_ref.actor.checkpoint.save_contents="
            "[model,hf_model]"});
  ExpectValues(
      c, {
             {"actor_rollout_ref.rollout.prompt_length", "1024"},
             {"actor_rollout_ref.rollout.response_length", "512"},
             {"critic.ppo_mini_batch_size", "64"},
             {"critic.use_dynamic_bsz", "true"},
             {"critic.rollout_n", "8"},
             {"critic.ppo_epochs", "3"},  // set: kept
             {"critic.forward_micro_batch_size_per_gpu", "4"},
             {"actor_rollout_ref.ref.log_prob_use_dynamic_bsz", "true"},
             {"actor_rollout_ref.rollout.log_prob_use_dynamic_bsz", "true"},
             {"reward_model.use_dynamic_bsz", "true"},
             {"trainer.default_local_dir", "checkpoints/p/gsm8k"},
             {"actor_rollout_ref.actor.profiler.tool", "torch_memory"},
             {"critic.profiler.save_path", "outputs/profile"},
             {"actor_rollout_ref.actor.checkpoint.load_contents",
              "[model, hf_model]"},
             {"critic.checkpoint.load_contents", "[model, optimizer, extra]"},
         });
  // The rollout's profiler follows the actor's unless set.
  c = Load({"actor_rollout_ref.actor.profiler.enable=true",
            "actor_rollout_ref.actor.profiler.ranks=[0,1]",
            "actor_rollout_ref.rollout.profiler.all_ranks=true"});
  ExpectValues(c, {
                      {"actor_rollout_ref.rollout.profiler.enable", "true"},
                      {"actor_rollout_ref.rollout.profiler.ranks", "[0, 1]"},
                      {"actor_rollout_ref.rollout.profiler.all_ranks", "true"},
                      {"actor_rollout_ref.actor.profiler.all_ranks", "false"},
                      {"critic.profiler.enable", "false"},
                      {"actor_rollout_ref.ref.profiler.ranks", "[]"},
                  });
  c = Load({"actor_rollout_ref.rollout.prompt_length=7",
            "trainer.default_local_dir=/ckpt"});
  EXPECT_EQ(c.actor_rollout_ref().rollout().prompt_length(), 7);
  EXPECT_EQ(c.trainer().default_local_dir(), "/ckpt");
}

TEST(PpoTrainerConfigTest, FileListsReplaceDefaultsAndOverridesWin) {
  const std::string path =
      WriteFile("replace.textproto",
                "trainer { logger: [\"file\"] total_epochs: 5 }\n"
                "actor_rollout_ref { actor { checkpoint {\n"
                "  save_contents: \"model\" } } }\n");
  const PpoTrainerConfig c = Load({"trainer.total_epochs=6"}, path);
  EXPECT_THAT(c.trainer().logger(), ElementsAre("file"));
  EXPECT_EQ(c.trainer().total_epochs(), 6);
  EXPECT_THAT(c.actor_rollout_ref().actor().checkpoint().save_contents(),
              ElementsAre("model"));
  // Untouched lists keep their defaults.
  EXPECT_THAT(c.critic().checkpoint().save_contents(),
              ElementsAre("model", "optimizer", "extra"));
}

TEST(PpoTrainerConfigTest, UnknownKeysSuggestNearest) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"actor_rollout_ref.actor.fsdp_config.param_ofload=true",
       "unknown config key 'actor_rollout_ref.actor.fsdp_config.param_ofload';"
       " did you mean 'actor_rollout_ref.actor.fsdp_config.param_offload'?"},
      {"trainer.total_epoch=3", "did you mean 'trainer.total_epochs'?"},
      {"algorithm.kl_ctrl.kl_coeff=0.1",
       "did you mean 'algorithm.kl_ctrl.kl_coef'?"},
      {"actor.ppo_epochs=2",
       "did you mean 'actor_rollout_ref.actor.ppo_epochs'?"},
      {"rollout.n=4", "did you mean 'actor_rollout_ref.rollout.n'?"},
  };
  for (const auto& [arg, expected] : cases) {
    EXPECT_THAT(LoadError({arg}), HasSubstr(expected)) << arg;
  }
  // An unrelated key is not suggested; Megatron keys say why they fail.
  // (use_te: not one of verl's megatron.* keys, which docs/megatron.md has.)
  EXPECT_EQ(LoadError({"actor_rollout_ref.actor.megatron.use_te=true"}),
            "unknown config key "
            "'actor_rollout_ref.actor.megatron.use_te': not one of the "
            "megatron.* keys of this build (docs/megatron.md lists them)");
  EXPECT_THAT(LoadError({"actor_rollout_ref.actor.use_mbridge=true"}),
              Not(HasSubstr("did you mean")));
}

TEST(PpoTrainerConfigTest, BadValuesNameKeyAndType) {
  EXPECT_EQ(LoadError({"trainer.total_epochs=many"}),
            "bad value 'many' for config key 'trainer.total_epochs': expected "
            "an integer (int64)");
  EXPECT_THAT(LoadError({"data.truncation=both"}),
              HasSubstr("expected one of: error, left, right, middle"));
  EXPECT_THAT(LoadError({"actor_rollout_ref.actor.use_kl_loss=yes"}),
              HasSubstr("expected a bool (true/false)"));
  EXPECT_THAT(LoadError({"actor_rollout_ref.actor.optim.betas=[0.9,x]"}),
              HasSubstr("bad element 'x'"));
}

TEST(PpoTrainerConfigTest, MalformedTextProtoAndOverrides) {
  const std::vector<std::pair<std::string, std::string>> files = {
      {"trainer {\n  total_epochs: 3\n  total_epoch: 4\n}\n",
       ":3:14: Message type \"verl.rl.TrainerConfig\" has no field named "
       "\"total_epoch\"; did you mean 'trainer.total_epochs'?"},
      // FsdpConfig sits in several roles: the field name only.
      {"critic { model { fsdp_config { param_ofload: true } } }",
       "did you mean 'param_offload'?"},
      {"algorithm { kl_ctrl { kl_coeff: 0.1 } }",
       "did you mean 'algorithm.kl_ctrl.kl_coef'?"},
      {"trainer { total_epochs: \"x\" }\n", ":1:"},
      {"data { truncation: both }\n", ":1:"},
      {"trainer { logger: console }\n", ":1:"},
      {"trainer {\n", ":2:"},
      {"trainer { total_epochs: 1 total_epochs: 2 }\n", ":1:"},
      {"actor_rollout_ref { actor { optim { lr: 1e-6e } } }\n", ":1:"},
  };
  int n = 0;
  for (const auto& [text, expected] : files) {
    const std::string path =
        WriteFile("bad" + std::to_string(n++) + ".textproto", text);
    const std::string error = LoadError({}, path);
    EXPECT_THAT(error, HasSubstr(path + ":")) << text;
    EXPECT_THAT(error, HasSubstr(expected)) << text;
  }
  const std::vector<std::pair<std::string, std::string>> overrides = {
      {"trainer.total_epochs", "is not of the form key=value"},
      {"=1", "is not of the form key=value"},
      {"trainer=1", "'trainer' is a section"},
      {"trainer..total_epochs=1", "unknown config key"},
      {"trainer.total_epochs.x=1", "unknown config key"},
      {"trainer.logger=[console", "expected a list"},
      {"actor_rollout_ref.actor.optim.lr=", "expected a number (double)"},
      {"trainer.total_epochs=1.5", "expected an integer"},
      {"trainer.total_epochs=99999999999999999999", "expected an integer"},
  };
  for (const auto& [arg, expected] : overrides) {
    EXPECT_THAT(LoadError({arg}), HasSubstr(expected)) << arg;
  }
  EXPECT_THAT(std::string(LoadPpoTrainerConfig("/nonexistent.textproto", {})
                              .status()
                              .message()),
              HasSubstr("cannot read config file '/nonexistent.textproto'"));
}

TEST(PpoTrainerConfigTest, FlagfilesNestedWithCommentsFeedOverrides) {
  const std::string base =
      WriteFile("base.textproto", "algorithm { adv_estimator: \"rloo\" }\n");
  const std::string inner =
      WriteFile("inner.flags",
                "# nested flagfile\n--actor_rollout_ref.rollout.n=5\n\n"
                "  --trainer.logger=[console,file]\n");
  const std::string outer = WriteFile(
      "outer.flags", "# top\n--config=" + base + "\n--flagfile=" + inner +
                         "\n--trainer.total_epochs=4\n");
  absl::StatusOr<core::SplitArgs> split = core::SplitCommandLine(
      {"train", "--flagfile=" + outer, "trainer.total_epochs=9"});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(split->absl_args, ElementsAre("train", "--config=" + base));
  const PpoTrainerConfig c = Load(split->overrides, base);
  EXPECT_EQ(c.algorithm().adv_estimator(), "rloo");
  EXPECT_EQ(c.actor_rollout_ref().rollout().n(), 5);
  EXPECT_EQ(c.trainer().total_epochs(), 9);  // later wins
  EXPECT_THAT(c.trainer().logger(), ElementsAre("console", "file"));
}

TEST(PpoTrainerConfigTest, PrintConfigRoundTrips) {
  const PpoTrainerConfig c =
      Load({"algorithm.adv_estimator=grpo",
            "actor_rollout_ref.actor.clip_ratio_low=null",
            "trainer.logger=[console,file]"});
  const std::string text = core::PrintConfig(c);
  EXPECT_THAT(text, HasSubstr("adv_estimator: \"grpo\""));
  EXPECT_THAT(text, HasSubstr("logger: \"console\"\n  logger: \"file\"\n"));
  // null with a non-null default: absent, and listed as a directive.
  EXPECT_THAT(text, Not(HasSubstr("clip_ratio_low:")));
  EXPECT_THAT(text,
              HasSubstr("\n#@null actor_rollout_ref.actor.clip_ratio_low\n"));
  const std::string path = WriteFile("printed.textproto", text);
  const PpoTrainerConfig back = Load({}, path);
  EXPECT_TRUE(MessageDifferencer::Equals(back, c));
}

TEST(PpoTrainerConfigTest, ExampleConfigAndFlagfileLoad) {
  const PpoTrainerConfig c = Load({}, "examples/grpo_tiny.textproto");
  EXPECT_EQ(c.algorithm().adv_estimator(), "grpo");
  EXPECT_EQ(c.actor_rollout_ref().rollout().n(), 4);
  EXPECT_EQ(c.actor_rollout_ref().rollout().prompt_length(), 64);
  absl::StatusOr<core::SplitArgs> split =
      core::SplitCommandLine({"train", "--flagfile=examples/grpo_tiny.flags"});
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(split->absl_args,
              ElementsAre("train", "--config=examples/grpo_tiny.textproto"));
  const PpoTrainerConfig f =
      Load(split->overrides, "examples/grpo_tiny.textproto");
  EXPECT_EQ(f.trainer().total_training_steps(), 10);
}

TEST(ValidatePpoTrainerConfigTest, NeedCriticAndReference) {
  EXPECT_TRUE(NeedCritic(Load({})));  // gae
  EXPECT_FALSE(NeedCritic(Load({"algorithm.adv_estimator=grpo"})));
  EXPECT_TRUE(
      NeedCritic(Load({"algorithm.adv_estimator=grpo", "critic.enable=true"})));
  EXPECT_FALSE(NeedCritic(Load({"critic.enable=false"})));
  EXPECT_FALSE(NeedReferencePolicy(Load({})));
  EXPECT_TRUE(
      NeedReferencePolicy(Load({"actor_rollout_ref.actor.use_kl_loss=true"})));
  EXPECT_TRUE(NeedReferencePolicy(Load({"algorithm.use_kl_in_reward=true"})));
}

TEST(ValidatePpoTrainerConfigTest, ExampleIsValidAndViolationsNameKeys) {
  const std::string example = "examples/grpo_tiny.textproto";
  EXPECT_TRUE(ValidatePpoTrainerConfig(Load({}, example)).ok());
  // verl's defaults leave the micro-batch size to the user.
  EXPECT_THAT(
      std::string(ValidatePpoTrainerConfig(Load({})).message()),
      HasSubstr("set 'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'"));
  // Dynamic batching needs no micro-batch sizes.
  EXPECT_TRUE(ValidatePpoTrainerConfig(
                  Load({"actor_rollout_ref.actor.use_dynamic_bsz=true",
                        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu="
                        "null",
                        "actor_rollout_ref.rollout.log_prob_micro_batch_size_"
                        "per_gpu=null",
                        "actor_rollout_ref.ref.log_prob_micro_batch_size_per_"
                        "gpu=null"},
                       example))
                  .ok());
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"actor_rollout_ref.actor.ppo_micro_batch_size=8",
       "remove 'actor_rollout_ref.actor.ppo_micro_batch_size'"},
      {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=null",
       "set 'actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu'"},
      {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=null",
       "set 'actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu'"},
      {"actor_rollout_ref.actor.ppo_mini_batch_size=32",
       "'data.train_batch_size' (16) must be >= "
       "'actor_rollout_ref.actor.ppo_mini_batch_size' (32)"},
      {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=5",
       "must be divisible by "
       "'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu' (5)"},
      {"trainer.n_gpus_per_node=3", "must be divisible by the 3 ranks"},
      {"actor_rollout_ref.actor.loss_agg_mode=token-sum",
       "'actor_rollout_ref.actor.loss_agg_mode': expected one of"},
      {"actor_rollout_ref.actor.clip_ratio_c=1",
       "'actor_rollout_ref.actor.clip_ratio_c' (1) must be > 1"},
      {"actor_rollout_ref.rollout.mode=sync", "only async is supported"},
      {"actor_rollout_ref.rollout.val_kwargs.do_sample=true",
       "val_kwargs.temperature' must be > 0"},
      {"critic.enable=true", "set 'critic.ppo_micro_batch_size_per_gpu'"},
      {"reward_model.enable=true",
       "set 'reward_model.micro_batch_size_per_gpu'"},
      {"actor_rollout_ref.model.use_remove_padding=false",
       ""},  // valid without sequence parallelism
  };
  for (const auto& [arg, expected] : cases) {
    absl::Status s = ValidatePpoTrainerConfig(Load({arg}, example));
    if (expected.empty()) {
      EXPECT_TRUE(s.ok()) << arg << ": " << s;
      continue;
    }
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << arg;
    EXPECT_THAT(std::string(s.message()), HasSubstr(expected)) << arg;
  }
  absl::Status sp = ValidatePpoTrainerConfig(
      Load({"actor_rollout_ref.model.use_remove_padding=false",
            "actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"},
           example));
  EXPECT_THAT(std::string(sp.message()), HasSubstr("use_remove_padding=true"));
  absl::Status kl = ValidatePpoTrainerConfig(
      Load({"algorithm.kl_ctrl.type=adaptive", "algorithm.kl_ctrl.horizon=0"},
           example));
  EXPECT_THAT(std::string(kl.message()),
              HasSubstr("'algorithm.kl_ctrl.horizon'"));
}

// strategy: megatron validates its megatron.* section: tp must divide the
// ranks, what is not built (vpp, the reference's offload) and what the
// Megatron path lacks (Ulysses, LoRA) are one line each; the sections parse;
// bf16 parameters and the actor's offload keys are served.
TEST(ValidatePpoTrainerConfigTest, MegatronStrategyChecksItsKeys) {
  const std::string example = "examples/grpo_tiny.textproto";
  EXPECT_TRUE(
      ValidatePpoTrainerConfig(
          Load({"trainer.n_gpus_per_node=2",
                "actor_rollout_ref.actor.strategy=megatron",
                "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
                "actor_rollout_ref.actor.megatron.dtype=bfloat16",
                "actor_rollout_ref.actor.megatron.param_offload=true",
                "actor_rollout_ref.actor.megatron.grad_offload=true",
                "actor_rollout_ref.actor.megatron.optimizer_offload=true",
                "actor_rollout_ref.ref.strategy=megatron",
                "actor_rollout_ref.ref.megatron.dtype=bfloat16",
                "actor_rollout_ref.ref.megatron.param_offload=true"},
               example))
          .ok());
  absl::Status s = ValidatePpoTrainerConfig(Load(
      {"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.strategy=megatron",
       "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4",
       "actor_rollout_ref.ref.strategy=megatron",
       "actor_rollout_ref.ref.megatron.grad_offload=true",
       "actor_rollout_ref.model.lora_rank=8", "critic.enable=true",
       "critic.strategy=megatron", "critic.ppo_micro_batch_size_per_gpu=2",
       "critic.ulysses_sequence_parallel_size=2",
       "critic.megatron.virtual_pipeline_model_parallel_size=2"},
      example));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.actor.megatron.tensor_model_"
                           "parallel_size' (4) must divide the 2 ranks"));
  EXPECT_THAT(m, HasSubstr("actor_rollout_ref.ref.megatron.grad_offload="
                           "true: the forward-only reference has no "
                           "gradients"));
  EXPECT_THAT(m, HasSubstr("'actor_rollout_ref.model.lora_rank=8' is not "
                           "available with actor_rollout_ref.actor.strategy="
                           "megatron"));
  EXPECT_THAT(m,
              HasSubstr("critic.megatron.virtual_pipeline_model_parallel_size"
                        "=2: must be >= 1, and > 1 only with "
                        "pipeline_model_parallel_size > 1"));
  // Pipeline stages: served; the rank count must be a multiple of
  // tp x cp x pp.
  EXPECT_TRUE(ValidatePpoTrainerConfig(
                  Load({"trainer.n_gpus_per_node=2", "trainer.save_freq=5",
                        "actor_rollout_ref.actor.strategy=megatron",
                        "actor_rollout_ref.actor.megatron.pipeline_model_"
                        "parallel_size=2"},
                       example))
                  .ok());
  s = ValidatePpoTrainerConfig(
      Load({"trainer.n_gpus_per_node=2", "trainer.save_freq=5",
            "actor_rollout_ref.actor.strategy=megatron",
            "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            "actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2"},
           example));
  EXPECT_THAT(s.message(),
              HasSubstr("'actor_rollout_ref.actor.megatron.pipeline_model_"
                        "parallel_size' (2) x context_parallel_size (1) x "
                        "tensor_model_parallel_size (2) must divide the 2 "
                        "ranks"));

  PpoTrainerConfig c =
      Load({"actor_rollout_ref.ref.megatron.tensor_model_parallel_size=2",
            "critic.megatron.override_transformer_config.recompute_modules="
            "[core_attn,mlp]"});
  EXPECT_EQ(c.actor_rollout_ref().ref().megatron().tensor_model_parallel_size(),
            2);
  EXPECT_EQ(c.critic()
                .megatron()
                .override_transformer_config()
                .recompute_modules_size(),
            2);
  // The MoE keys verl scripts add to override_transformer_config ('+').
  c =
      Load({"+actor_rollout_ref.actor.megatron.override_transformer_config."
            "moe_expert_capacity_factor=1.25",
            "+actor_rollout_ref.actor.megatron.override_transformer_config."
            "moe_token_drop_policy=position",
            "+actor_rollout_ref.actor.megatron.override_transformer_config."
            "moe_router_enable_expert_bias=true"});
  const auto& moe =
      c.actor_rollout_ref().actor().megatron().override_transformer_config();
  EXPECT_EQ(moe.moe_expert_capacity_factor(), 1.25);
  EXPECT_EQ(moe.moe_token_drop_policy(), "position");
  EXPECT_TRUE(moe.moe_router_enable_expert_bias());
  EXPECT_EQ(moe.moe_router_bias_update_rate(), 1e-3);
  // Context parallelism: tp x cp must divide the ranks.
  absl::Status cp = ValidatePpoTrainerConfig(Load(
      {"trainer.n_gpus_per_node=2", "actor_rollout_ref.actor.strategy=megatron",
       "actor_rollout_ref.actor.megatron.context_parallel_size=4"},
      example));
  EXPECT_THAT(std::string(cp.message()),
              HasSubstr("'actor_rollout_ref.actor.megatron.context_parallel_"
                        "size' (4) x tensor_model_parallel_size (1) must "
                        "divide the 2 ranks"));

  // Rollout tensor parallelism: tp divides the ranks, no agent loop; one
  // line naming the key.
  EXPECT_TRUE(
      ValidatePpoTrainerConfig(
          Load({"trainer.n_gpus_per_node=2",
                "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                "actor_rollout_ref.rollout.dtype=float32"},
               example))
          .ok());
  EXPECT_THAT(
      std::string(
          ValidatePpoTrainerConfig(
              Load({"trainer.n_gpus_per_node=2",
                    "actor_rollout_ref.rollout.tensor_model_parallel_size=4",
                    "actor_rollout_ref.rollout.dtype=float32"},
                   example))
              .message()),
      HasSubstr("'actor_rollout_ref.rollout.tensor_model_parallel_size' (4) "
                "must divide the 2 ranks"));
  for (const char* agent_loop :
       {"actor_rollout_ref.rollout.multi_turn.enable=true",
        "actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",
        "actor_rollout_ref.rollout.agent.agent_loop_config_path=loops.yaml"}) {
    EXPECT_THAT(
        std::string(
            ValidatePpoTrainerConfig(
                Load({"trainer.n_gpus_per_node=2",
                      "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
                      agent_loop},
                     example))
                .message()),
        HasSubstr("(2) is not available with agent-loop rollouts"))
        << agent_loop;
  }
}

// Every bad size/count/probability key of a command line is reported in one
// run, one line each (verl ran negative epochs, batch sizes or step counts
// with exit 0, and aborted on a NaN learning rate).
TEST(ValidatePpoTrainerConfigTest, EveryBadKeyIsReportedAtOnce) {
  const std::string example = "examples/grpo_tiny.textproto";
  absl::Status s = ValidatePpoTrainerConfig(
      Load({"data.train_batch_size=-4",
            "actor_rollout_ref.actor.use_dynamic_bsz=true",
            "actor_rollout_ref.actor.ppo_epochs=-1",
            "trainer.total_training_steps=-3", "trainer.total_epochs=0",
            "actor_rollout_ref.actor.optim.lr=nan", "algorithm.gamma=1.5",
            "actor_rollout_ref.rollout.top_p=0",
            "actor_rollout_ref.actor.optim.betas=[0.9,1.5]",
            "actor_rollout_ref.rollout.name=hf"},
           example));
  ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  const std::string m(s.message());
  for (const char* line :
       {"'data.train_batch_size' (-4) must be > 0",
        "'actor_rollout_ref.actor.ppo_epochs' (-1) must be > 0",
        "'trainer.total_training_steps' (-3) must be > 0",
        "'trainer.total_epochs' (0) must be > 0",
        "'actor_rollout_ref.actor.optim.lr' (nan) must be finite",
        "'algorithm.gamma' (1.5) must be in [0, 1]",
        "'actor_rollout_ref.rollout.top_p' (0) must be in (0, 1]",
        "'actor_rollout_ref.actor.optim.betas' (1.5) must be in [0, 1]",
        "bad value 'hf' for config key 'actor_rollout_ref.rollout.name': "
        "expected one of: native, vllm, sglang"}) {
    EXPECT_THAT(m, HasSubstr(line));
  }
  // One line per problem.
  EXPECT_GE(std::count(m.begin(), m.end(), '\n'), 8) << m;
  EXPECT_THAT(
      std::string(ValidatePpoTrainerConfig(
                      Load({"actor_rollout_ref.actor.optim.lr=inf"}, example))
                      .message()),
      HasSubstr("must be finite"));
}

// verl's newer spellings feed the keys the trainer reads.
TEST(PpoTrainerConfigTest, VerlAliasesFeedTheServedKeys) {
  PpoTrainerConfig c = Load({"reward_model.overlong_buffer.enable=true",
                             "reward_model.overlong_buffer.len=64",
                             "reward_model.overlong_buffer.penalty_factor=0.5",
                             "actor_rollout_ref.actor.tau_pos=2.5",
                             "actor_rollout_ref.actor.tau_neg=3.5"});
  const OverlongBufferConfig& o =
      c.reward_model().reward_kwargs().overlong_buffer_cfg();
  EXPECT_TRUE(o.enable());
  EXPECT_EQ(o.len(), 64);
  EXPECT_DOUBLE_EQ(o.penalty_factor(), 0.5);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref().actor().policy_loss().tau_pos(), 2.5);
  EXPECT_DOUBLE_EQ(c.actor_rollout_ref().actor().policy_loss().tau_neg(), 3.5);
  // Unset: the reward_kwargs spelling is kept.
  PpoTrainerConfig d =
      Load({"reward_model.reward_kwargs.overlong_buffer_cfg.len=32"});
  EXPECT_EQ(d.reward_model().reward_kwargs().overlong_buffer_cfg().len(), 32);
}

// verl scripts name vLLM or SGLang: both run the built-in engine, with one
// notice line.
TEST(ValidatePpoTrainerConfigTest, VllmAndSglangNameTheBuiltInEngine) {
  const std::string example = "examples/grpo_tiny.textproto";
  for (const char* name : {"vllm", "sglang", "native"}) {
    PpoTrainerConfig c =
        Load({absl::StrCat("actor_rollout_ref.rollout.name=", name)}, example);
    EXPECT_TRUE(ValidatePpoTrainerConfig(c).ok()) << name;
    const std::vector<std::string> notices = PpoTrainerConfigNotices(c);
    if (std::string(name) == "native") {
      EXPECT_TRUE(notices.empty());
    } else {
      ASSERT_EQ(notices.size(), 1u) << name;
      EXPECT_THAT(notices[0], HasSubstr("served by the built-in engine"));
    }
  }
}

TEST(SftTrainerConfigTest, DefaultsAndOverrides) {
  absl::StatusOr<SftTrainerConfig> c = LoadSftTrainerConfig(
      "",
      {"optim.lr=2e-5", "use_remove_padding=true", "data.truncation=right"});
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectValues(
      *c, {
              {"data.train_batch_size", "256"},
              {"data.micro_batch_size_per_gpu", "4"},
              {"data.max_length", "1024"},
              {"data.truncation", "right"},
              {"data.prompt_key", "question"},
              {"data.response_key", "answer"},
              {"data.multiturn.enable", "false"},
              {"data.multiturn.messages_key", "messages"},
              {"model.strategy", "fsdp2"},
              {"model.fsdp_config.model_dtype", "fp32"},
              {"model.lora_rank", "0"},
              {"model.target_modules", "[all-linear]"},
              {"optim.lr", "2e-05"},
              {"optim.betas", "[0.9, 0.95]"},
              {"optim.weight_decay", "0.01"},
              {"optim.lr_warmup_steps_ratio", "0.1"},
              {"optim.clip_grad", "1"},
              {"optim.lr_scheduler", "cosine"},
              {"use_remove_padding", "true"},
              {"ulysses_sequence_parallel_size", "1"},
              {"trainer.total_epochs", "4"},
              {"trainer.project_name", "gsm8k-sft"},
              {"trainer.experiment_name", "test"},
              {"trainer.seed", "1"},
              {"trainer.default_local_dir", "checkpoints/gsm8k-sft/test"},
              {"trainer.checkpoint.load_contents", "[model, optimizer, extra]"},
          });
  absl::StatusOr<SftTrainerConfig> example =
      LoadSftTrainerConfig("examples/sft_tiny.textproto", {});
  ASSERT_TRUE(example.ok()) << example.status();
  ExpectValues(*example, {
                             {"data.truncation", "right"},
                             {"optim.lr_scheduler", "wsd"},
                             {"optim.betas", "[0.9, 0.95]"},
                             {"trainer.logger", "[console, file]"},
                             {"trainer.default_local_dir",
                              "checkpoints/verl_cpp_examples/sft_tiny"},
                         });
  EXPECT_THAT(std::string(LoadSftTrainerConfig("", {"optim.lr_schedule=wsd"})
                              .status()
                              .message()),
              HasSubstr("did you mean 'optim.lr_scheduler'?"));
}

}  // namespace
}  // namespace verl::rl
