// File: verl/rl/trainer/config.cc
#include "verl/rl/trainer/config.h"

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/config_loader.h"
#include "verl/core/status.h"

namespace verl::rl {
namespace {

// `role`'s null tool/save_path <- the global profiler's; null enable/
// all_ranks and empty ranks <- `base` (the actor's, for the rollout) or
// false/empty.
void InheritProfiler(const profiler::GlobalProfilerConfig& global,
                     const profiler::ProfilerConfig* base,
                     profiler::ProfilerConfig* role) {
  if (global.has_tool()) VERL_INHERIT(*role, tool, global.tool());
  if (global.has_save_path()) {
    VERL_INHERIT(*role, save_path, global.save_path());
  }
  VERL_INHERIT(*role, enable, base != nullptr && base->enable());
  VERL_INHERIT(*role, all_ranks, base != nullptr && base->all_ranks());
  if (base != nullptr && role->ranks_size() == 0) {
    *role->mutable_ranks() = base->ranks();
  }
}

void InheritLoadContents(ckpt::CheckpointConfig* checkpoint) {
  if (checkpoint->load_contents_size() == 0) {
    *checkpoint->mutable_load_contents() = checkpoint->save_contents();
  }
}

}  // namespace

const std::string& PpoTrainerDefaultsText() {
  static const std::string* const kText = new std::string(
#include "verl/rl/trainer/ppo_trainer_defaults.inc"
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
  sources.defaults_name = "verl/rl/trainer/ppo_trainer_defaults.textproto";
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
  InheritProfiler(global, nullptr, actor.mutable_profiler());

  VERL_INHERIT(ref, strategy, actor.strategy());
  VERL_INHERIT(ref, use_torch_compile, actor.use_torch_compile());
  VERL_INHERIT(ref, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(ref, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  VERL_INHERIT(ref, ulysses_sequence_parallel_size,
               actor.ulysses_sequence_parallel_size());
  InheritProfiler(global, nullptr, ref.mutable_profiler());

  VERL_INHERIT(rollout, prompt_length, data.max_prompt_length());
  VERL_INHERIT(rollout, response_length, data.max_response_length());
  VERL_INHERIT(rollout, log_prob_use_dynamic_bsz, actor.use_dynamic_bsz());
  VERL_INHERIT(rollout, log_prob_max_token_len_per_gpu,
               actor.ppo_max_token_len_per_gpu());
  InheritProfiler(global, &actor.profiler(), rollout.mutable_profiler());

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
  InheritProfiler(global, nullptr, critic.mutable_profiler());

  VERL_INHERIT(*rm.mutable_model(), input_tokenizer, model.path());
  VERL_INHERIT(rm, use_dynamic_bsz, critic.use_dynamic_bsz());
  VERL_INHERIT(rm, forward_max_token_len_per_gpu,
               critic.forward_max_token_len_per_gpu());
  InheritProfiler(global, nullptr, rm.mutable_profiler());

  TrainerConfig& trainer = *config->mutable_trainer();
  VERL_INHERIT(trainer, default_local_dir,
               absl::StrCat("checkpoints/", trainer.project_name(), "/",
                            trainer.experiment_name()));
}

absl::Status CheckResolved(const PpoTrainerConfig& config) {
  // Fields ResolvePpoTrainerConfig always sets.
  const ActorRolloutRefConfig& arr = config.actor_rollout_ref();
  if (arr.ref().has_strategy() && arr.rollout().has_prompt_length() &&
      config.critic().has_ppo_mini_batch_size() &&
      config.trainer().has_default_local_dir()) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      "the trainer config is not resolved: build it with LoadPpoTrainerConfig "
      "or call ResolvePpoTrainerConfig before RunPpo");
}

bool NeedCritic(const PpoTrainerConfig& config) {
  if (config.critic().has_enable()) return config.critic().enable();
  return config.algorithm().adv_estimator() == "gae";
}

bool NeedReferencePolicy(const PpoTrainerConfig& config) {
  return config.actor_rollout_ref().actor().use_kl_loss() ||
         config.algorithm().use_kl_in_reward() ||
         config.actor_rollout_ref().actor().policy_loss().loss_mode() ==
             "flowrl";
}

namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// verl's check_mutually_exclusive: exactly one of `<role>.<global>` (the
// deprecated global size) and `<role>.<global>_per_gpu` unless dynamic
// batching is on (then neither is needed).
absl::Status CheckMicroBatch(absl::string_view role, absl::string_view name,
                             bool has_global, bool has_per_gpu,
                             bool dynamic_bsz) {
  if (has_global && has_per_gpu) {
    return Invalid(absl::StrCat("remove '", role, ".", name, "': only '", role,
                                ".", name,
                                "_per_gpu' is supported (the former is "
                                "deprecated)"));
  }
  if (!has_global && !has_per_gpu && !dynamic_bsz) {
    return Invalid(absl::StrCat("set '", role, ".", name, "_per_gpu' (or '",
                                role, ".", name, "')"));
  }
  return absl::OkStatus();
}

absl::Status CheckLossAggMode(absl::string_view key, const std::string& mode) {
  for (const char* valid : {"token-mean", "seq-mean-token-sum",
                            "seq-mean-token-mean", "seq-mean-token-sum-norm"}) {
    if (mode == valid) return absl::OkStatus();
  }
  return Invalid(
      absl::StrCat("bad value '", mode, "' for config key '", key,
                   "': expected one of: token-mean, seq-mean-token-sum, "
                   "seq-mean-token-mean, seq-mean-token-sum-norm"));
}

// Mini-batch `mini` prompts (x n trajectories) over the data-parallel ranks
// and into micro-batches of `micro_per_gpu` (when set), as verl's workers
// normalise them.
absl::Status CheckMiniBatch(absl::string_view role, int64_t train_batch_size,
                            int64_t mini, int64_t n, int64_t dp, bool has_micro,
                            int64_t micro_per_gpu) {
  if (mini <= 0) {
    return Invalid(absl::StrCat("'", role, ".ppo_mini_batch_size' (", mini,
                                ") must be > 0"));
  }
  if (train_batch_size < mini) {
    return Invalid(absl::StrCat("'data.train_batch_size' (", train_batch_size,
                                ") must be >= '", role,
                                ".ppo_mini_batch_size' (", mini, ")"));
  }
  if ((mini * n) % dp != 0) {
    return Invalid(absl::StrCat(
        "'", role, ".ppo_mini_batch_size' x rollout.n (", mini * n,
        ") must be divisible by the ", dp, " data-parallel ranks"));
  }
  if (has_micro) {
    if (micro_per_gpu <= 0 || ((mini * n) / dp) % micro_per_gpu != 0) {
      return Invalid(
          absl::StrCat("the per-rank mini-batch (", (mini * n) / dp, " = ",
                       role, ".ppo_mini_batch_size x rollout.n / ", dp,
                       " ranks) must be divisible by '", role,
                       ".ppo_micro_batch_size_per_gpu' (", micro_per_gpu, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePpoTrainerConfig(const PpoTrainerConfig& config) {
  const ActorRolloutRefConfig& arr = config.actor_rollout_ref();
  const ActorConfig& actor = arr.actor();
  const RefConfig& ref = arr.ref();
  const infer::RolloutConfig& rollout = arr.rollout();
  const CriticConfig& critic = config.critic();
  const TrainerConfig& trainer = config.trainer();
  const int64_t n_gpus = trainer.nnodes() * trainer.n_gpus_per_node();
  if (n_gpus <= 0) {
    return Invalid("'trainer.nnodes' x 'trainer.n_gpus_per_node' must be > 0");
  }
  const int64_t n = rollout.n();
  if (n <= 0) return Invalid("'actor_rollout_ref.rollout.n' must be > 0");
  if ((config.data().train_batch_size() * n) % n_gpus != 0) {
    return Invalid(absl::StrCat(
        "'data.train_batch_size' x 'actor_rollout_ref.rollout.n' (",
        config.data().train_batch_size() * n, ") must be divisible by the ",
        n_gpus, " ranks (trainer.nnodes x trainer.n_gpus_per_node)"));
  }
  if (rollout.mode() != "async") {
    return Invalid(absl::StrCat("bad value '", rollout.mode(),
                                "' for config key 'actor_rollout_ref.rollout."
                                "mode': only async is supported"));
  }

  VERL_RETURN_IF_ERROR(CheckMicroBatch(
      "actor_rollout_ref.actor", "ppo_micro_batch_size",
      actor.has_ppo_micro_batch_size(),
      actor.has_ppo_micro_batch_size_per_gpu(), actor.use_dynamic_bsz()));
  VERL_RETURN_IF_ERROR(
      CheckMicroBatch("actor_rollout_ref.rollout", "log_prob_micro_batch_size",
                      rollout.has_log_prob_micro_batch_size(),
                      rollout.has_log_prob_micro_batch_size_per_gpu(),
                      rollout.log_prob_use_dynamic_bsz()));
  if (NeedReferencePolicy(config)) {
    VERL_RETURN_IF_ERROR(
        CheckMicroBatch("actor_rollout_ref.ref", "log_prob_micro_batch_size",
                        ref.has_log_prob_micro_batch_size(),
                        ref.has_log_prob_micro_batch_size_per_gpu(),
                        ref.log_prob_use_dynamic_bsz()));
  }
  const int64_t actor_sp = actor.ulysses_sequence_parallel_size();
  if (actor_sp <= 0 || n_gpus % actor_sp != 0) {
    return Invalid(absl::StrCat(
        "'actor_rollout_ref.actor.ulysses_sequence_parallel_size' (", actor_sp,
        ") must divide the ", n_gpus, " ranks"));
  }
  if (!actor.use_dynamic_bsz()) {
    VERL_RETURN_IF_ERROR(CheckMiniBatch(
        "actor_rollout_ref.actor", config.data().train_batch_size(),
        actor.ppo_mini_batch_size(), n, n_gpus / actor_sp,
        actor.has_ppo_micro_batch_size_per_gpu(),
        actor.ppo_micro_batch_size_per_gpu()));
  }
  VERL_RETURN_IF_ERROR(CheckLossAggMode("actor_rollout_ref.actor.loss_agg_mode",
                                        actor.loss_agg_mode()));
  if (!(actor.clip_ratio_c() > 1.0)) {
    return Invalid(absl::StrCat("'actor_rollout_ref.actor.clip_ratio_c' (",
                                actor.clip_ratio_c(),
                                ") must be > 1 (dual-clip lower bound)"));
  }
  if ((actor_sp > 1 || ref.ulysses_sequence_parallel_size() > 1) &&
      !actor.use_remove_padding()) {
    return Invalid(
        "sequence parallelism (ulysses_sequence_parallel_size > 1) needs "
        "'actor_rollout_ref.model.use_remove_padding=true'");
  }
  if (NeedCritic(config)) {
    VERL_RETURN_IF_ERROR(CheckMicroBatch(
        "critic", "ppo_micro_batch_size", critic.has_ppo_micro_batch_size(),
        critic.has_ppo_micro_batch_size_per_gpu(), critic.use_dynamic_bsz()));
    const int64_t critic_sp = critic.ulysses_sequence_parallel_size();
    if (critic_sp <= 0 || n_gpus % critic_sp != 0) {
      return Invalid(absl::StrCat("'critic.ulysses_sequence_parallel_size' (",
                                  critic_sp, ") must divide the ", n_gpus,
                                  " ranks"));
    }
    if (!critic.use_dynamic_bsz()) {
      VERL_RETURN_IF_ERROR(
          CheckMiniBatch("critic", config.data().train_batch_size(),
                         critic.ppo_mini_batch_size(), n, n_gpus / critic_sp,
                         critic.has_ppo_micro_batch_size_per_gpu(),
                         critic.ppo_micro_batch_size_per_gpu()));
    }
    VERL_RETURN_IF_ERROR(
        CheckLossAggMode("critic.loss_agg_mode", critic.loss_agg_mode()));
  }
  const RewardModelConfig& rm = config.reward_model();
  if (rm.enable()) {
    VERL_RETURN_IF_ERROR(CheckMicroBatch(
        "reward_model", "micro_batch_size", rm.has_micro_batch_size(),
        rm.has_micro_batch_size_per_gpu(), rm.use_dynamic_bsz()));
  }
  const infer::SamplingConfig& val = rollout.val_kwargs();
  if (val.do_sample() && !(val.temperature() > 0)) {
    return Invalid(
        "'actor_rollout_ref.rollout.val_kwargs.temperature' must be > 0 when "
        "val_kwargs.do_sample is true");
  }
  const KlControlConfig& kl_ctrl = config.algorithm().kl_ctrl();
  if (kl_ctrl.type() == KlControllerType::adaptive && kl_ctrl.horizon() <= 0) {
    return Invalid(absl::StrCat("'algorithm.kl_ctrl.horizon' (",
                                kl_ctrl.horizon(),
                                ") must be > 0 for the adaptive controller"));
  }
  return absl::OkStatus();
}

}  // namespace verl::rl
