// File: verl/rl/config.cc
#include "verl/rl/config.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/config_loader.h"
#include "verl/core/status.h"

namespace verl::rl {
namespace {

// dst.field <- value while dst.field is null (verl's `${...}` defaults).
#define VERL_INHERIT(dst, field, value) \
  if (!(dst).has_##field()) (dst).set_##field(value)

void InheritProfiler(const profiler::GlobalProfilerConfig& global,
                     profiler::ProfilerConfig* role) {
  if (global.has_tool()) VERL_INHERIT(*role, tool, global.tool());
  if (global.has_save_path())
    VERL_INHERIT(*role, save_path, global.save_path());
}

void InheritLoadContents(ckpt::CheckpointConfig* checkpoint) {
  if (checkpoint->load_contents_size() == 0) {
    *checkpoint->mutable_load_contents() = checkpoint->save_contents();
  }
}

}  // namespace

const std::string& PpoTrainerDefaultsText() {
  static const std::string* const kText = new std::string(
#include "verl/rl/ppo_trainer_defaults.inc"
  );
  return *kText;
}

PpoTrainerConfig DefaultPpoTrainerConfig() {
  absl::StatusOr<PpoTrainerConfig> config = LoadPpoTrainerConfig("", {});
  VERL_CHECK_OK(config.status());
  return *std::move(config);
}

absl::StatusOr<PpoTrainerConfig> LoadPpoTrainerConfig(
    const std::string& config_file, const std::vector<std::string>& overrides) {
  core::ConfigSources sources;
  sources.defaults_text = PpoTrainerDefaultsText();
  sources.defaults_name = "verl/rl/ppo_trainer_defaults.textproto";
  sources.config_file = config_file;
  sources.overrides = overrides;
  PpoTrainerConfig config;
  VERL_RETURN_IF_ERROR(core::LoadConfig(sources, &config));
  ResolvePpoTrainerConfig(&config);
  return config;
}

void ResolvePpoTrainerConfig(PpoTrainerConfig* config) {
  const DataConfig& data = config->data();
  ActorRolloutRefConfig& arr = *config->mutable_actor_rollout_ref();
  const models::ModelSettings& model = arr.model();
  ActorConfig& actor = *arr.mutable_actor();
  RefConfig& ref = *arr.mutable_ref();
  infer::RolloutConfig& rollout = *arr.mutable_rollout();
  CriticConfig& critic = *config->mutable_critic();
  RewardModelConfig& rm = *config->mutable_reward_model();
  const profiler::GlobalProfilerConfig& global = config->global_profiler();

  VERL_INHERIT(actor, use_fused_kernels, model.use_fused_kernels());
  VERL_INHERIT(actor, use_remove_padding, model.use_remove_padding());
  InheritLoadContents(actor.mutable_checkpoint());
  InheritProfiler(global, actor.mutable_profiler());

  VERL_INHERIT(ref, strategy, actor.strategy());
  VERL_INHERIT(ref, use_torch_compile, actor.use_torch_compile());
  VERL_INHERIT(ref, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(ref, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  VERL_INHERIT(ref, ulysses_sequence_parallel_size,
               actor.ulysses_sequence_parallel_size());
  InheritProfiler(global, ref.mutable_profiler());

  VERL_INHERIT(rollout, prompt_length, data.max_prompt_length());
  VERL_INHERIT(rollout, response_length, data.max_response_length());
  VERL_INHERIT(rollout, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(rollout, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  InheritProfiler(global, rollout.mutable_profiler());

  VERL_INHERIT(critic, rollout_n, rollout.n());
  VERL_INHERIT(critic, ppo_mini_batch_size, actor.ppo_mini_batch_size());
  VERL_INHERIT(critic, use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(critic, ppo_epochs, actor.ppo_epochs());
  VERL_INHERIT(critic, shuffle, actor.shuffle());
  VERL_INHERIT(critic, loss_agg_mode, actor.loss_agg_mode());
  VERL_INHERIT(critic, forward_max_token_len_per_gpu,
               critic.ppo_max_token_len_per_gpu());
  if (critic.has_ppo_micro_batch_size()) {
    VERL_INHERIT(critic, forward_micro_batch_size,
                 critic.ppo_micro_batch_size());
  }
  if (critic.has_ppo_micro_batch_size_per_gpu()) {
    VERL_INHERIT(critic, forward_micro_batch_size_per_gpu,
                 critic.ppo_micro_batch_size_per_gpu());
  }
  CriticModelConfig& critic_model = *critic.mutable_model();
  VERL_INHERIT(critic_model, path, model.path());
  VERL_INHERIT(critic_model, preset, model.preset());
  VERL_INHERIT(critic_model, tokenizer_path, model.path());
  VERL_INHERIT(critic_model, trust_remote_code, model.trust_remote_code());
  if (model.has_external_lib()) {
    VERL_INHERIT(critic_model, external_lib, model.external_lib());
  }
  InheritLoadContents(critic.mutable_checkpoint());
  InheritProfiler(global, critic.mutable_profiler());

  VERL_INHERIT(*rm.mutable_model(), input_tokenizer, model.path());
  VERL_INHERIT(rm, use_dynamic_bsz, critic.use_dynamic_bsz());
  VERL_INHERIT(rm, forward_max_token_len_per_gpu,
               critic.forward_max_token_len_per_gpu());
  InheritProfiler(global, rm.mutable_profiler());

  TrainerConfig& trainer = *config->mutable_trainer();
  VERL_INHERIT(trainer, default_local_dir,
               absl::StrCat("checkpoints/", trainer.project_name(), "/",
                            trainer.experiment_name()));
}

#undef VERL_INHERIT

}  // namespace verl::rl
