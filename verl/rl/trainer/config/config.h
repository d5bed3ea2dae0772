// File: verl/rl/trainer/config/config.h
//
// Loading and resolving the PPO/GRPO trainer's configuration tree
// (PpoTrainerConfig, verl/rl/trainer/config/config.proto): verl's defaults,
// then the user's text-proto file, then dotted overrides, then verl's
// interpolations.
#ifndef VERL_RL_TRAINER_CONFIG_H_
#define VERL_RL_TRAINER_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/trainer/config/config.pb.h"

namespace verl::rl {

// The built-in defaults text proto (ppo_trainer_defaults.textproto).
const std::string& PpoTrainerDefaultsText();

// verl's defaults with nothing else applied (resolved).
PpoTrainerConfig DefaultPpoTrainerConfig();

// Defaults, then `config_file` (text proto; empty: none), then `overrides`
// ("a.b.c=value"), then ResolvePpoTrainerConfig. Errors name the file, key
// and, for unknown keys, the nearest valid key.
absl::StatusOr<PpoTrainerConfig> LoadPpoTrainerConfig(
    const std::string& config_file, const std::vector<std::string>& overrides);

// Fills the fields verl derives from others (`${...}` in its YAML) when they
// are still null: rollout.prompt_length <- data.max_prompt_length, the ref's
// and critic's batching <- the actor's, profiler tool/save_path <-
// global_profiler, checkpoint.load_contents <- save_contents,
// trainer.default_local_dir <- checkpoints/{project}/{experiment}, ...
void ResolvePpoTrainerConfig(PpoTrainerConfig* config);

// FailedPrecondition unless ResolvePpoTrainerConfig ran on `config`: derived
// defaults are filled in exactly that one place, and RunPpo takes resolved
// configs only (LoadPpoTrainerConfig and DefaultPpoTrainerConfig resolve).
absl::Status CheckResolved(const PpoTrainerConfig& config);

// verl's need_critic: critic.enable if set, else adv_estimator == "gae".
bool NeedCritic(const PpoTrainerConfig& config);

// verl's need_reference_policy: actor.use_kl_loss or
// algorithm.use_kl_in_reward.
bool NeedReferencePolicy(const PpoTrainerConfig& config);

// Whether rollouts go through verl's agent loop: rollout.multi_turn.enable,
// a default agent other than single_turn_agent, or agent_loop_config_path.
bool UsesAgentLoop(const PpoTrainerConfig& config);

// verl's consistency checks on a resolved config (trainer start-up, not
// --print_config): the range of every size, count, length, rate and
// probability key (> 0, >= 0, [0, 1], ...), finite floating-point values,
// micro-batch sizes set exactly once per role unless dynamic batching
// (ref/critic/reward model only when used), train_batch_size >=
// ppo_mini_batch_size, mini-batches divisible over data-parallel ranks and
// into micro-batches, loss_agg_mode and rollout.mode values, clip_ratio_c > 1,
// remove-padding for Ulysses, validation sampling temperature, adaptive KL
// horizon. Every violation is reported: InvalidArgument with one line per
// violation, each naming the key(s).
absl::Status ValidatePpoTrainerConfig(const PpoTrainerConfig& config);

// The rollout engine names verl scripts use that this build serves:
// `native` (the built-in engine, verl/infer) and `vllm`/`sglang`, names of
// the same engine (a vLLM-class engine: paged KV cache, continuous batching,
// prefix caching).
inline constexpr const char* kRolloutNames[] = {"native", "vllm", "sglang"};

// One-line notices a run prints once before training about keys whose value
// is served differently here (e.g. rollout.name=vllm runs the built-in
// engine).
std::vector<std::string> PpoTrainerConfigNotices(
    const PpoTrainerConfig& config);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_CONFIG_H_
