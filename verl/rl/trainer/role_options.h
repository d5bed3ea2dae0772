// File: verl/rl/trainer/role_options.h
//
// Each worker role's options built from a resolved PpoTrainerConfig (verl's
// per-role YAML sections → the settings the actor, critic, rollout, reward
// manager and reward model take). Pure functions of the config and the
// role's parallel groups: the trainer's Init only wires the results.
// Defaults derived from other keys are filled by ResolvePpoTrainerConfig
// (config.h), never here.
#ifndef VERL_RL_TRAINER_ROLE_OPTIONS_H_
#define VERL_RL_TRAINER_ROLE_OPTIONS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/infer/agent/agent_loop.h"
#include "verl/infer/engine.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/parallel/ulysses.h"
#include "verl/rl/algos/rollout_correction.h"
#include "verl/rl/rewards/reward_manager.h"
#include "verl/rl/trainer/config/config.pb.h"
#include "verl/rl/workers/actor.h"
#include "verl/rl/workers/critic.h"
#include "verl/rl/workers/ppo_update.h"
#include "verl/rl/workers/rollout.h"

namespace verl::rl {

// algorithm.rollout_correction; "null"/"None" strings mean off. Errors name
// the key (bad modes or thresholds, bypass loss_type, missing
// rollout.calculate_log_probs).
absl::StatusOr<RolloutCorrectionConfig> RolloutCorrectionFromConfig(
    const PpoTrainerConfig& config);

// actor_rollout_ref.actor.* (and rollout.temperature/log-prob micro-batches)
// for the actor on `groups` (mini-batches per dp rank, token budget x sp).
// Bypass rollout correction switches the loss to bypass_mode.
absl::StatusOr<ActorOptions> ActorOptionsFromConfig(
    const PpoTrainerConfig& config, const parallel::UlyssesGroups& groups,
    uint64_t seed);

// The reference policy's options: the actor's, on the ref's groups.
ActorOptions RefOptionsFromActor(const ActorOptions& actor,
                                 const parallel::UlyssesGroups& groups);

// critic.* on `groups`. Without critic micro-batch sizes the actor's update
// micro-batch size is used.
CriticOptions CriticOptionsFromConfig(const PpoTrainerConfig& config,
                                      const parallel::UlyssesGroups& groups,
                                      const MicroBatchOptions& actor_update);

// actor_rollout_ref.rollout.* for the trainer-side rollout role.
absl::StatusOr<RolloutOptions> RolloutOptionsFromConfig(
    const PpoTrainerConfig& config, int64_t pad_token_id, uint64_t seed);

// verl's agent loop from rollout.multi_turn.* / rollout.agent.* (tools from
// tool_config_path, interactions from interaction_config_path, loop names
// from agent_loop_config_path); null unless UsesAgentLoop. `tokenizer` must
// outlive the loop.
absl::StatusOr<std::shared_ptr<infer::agent::AgentLoop>> AgentLoopFromConfig(
    const PpoTrainerConfig& config, const models::Tokenizer* tokenizer);

// The engine's options: rollout keys through the engine's mapping; context =
// prompt + response length unless max_model_len is set; unset rollout.dtype
// keeps the training model's dtype (docs/config.md); the run's seed unless
// engine_kwargs.vllm.seed.
absl::StatusOr<infer::EngineOptions> EngineOptionsFromConfig(
    const PpoTrainerConfig& config, uint64_t seed);

// reward_model.reward_manager and reward_kwargs (DAPO's overlong buffer).
RewardManagerConfig RewardManagerConfigFromConfig(
    const PpoTrainerConfig& config, const std::string& eos_text);

// reward_model.* micro-batching over `dp` ranks.
MicroBatchOptions RewardModelMicroFromConfig(const PpoTrainerConfig& config,
                                             int64_t dp);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_ROLE_OPTIONS_H_
