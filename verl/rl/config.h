// File: verl/rl/config.h
//
// Loading and resolving the PPO/GRPO trainer's configuration tree
// (PpoTrainerConfig, verl/rl/config.proto): verl's defaults, then the user's
// text-proto file, then dotted overrides, then verl's interpolations.
#ifndef VERL_RL_CONFIG_H_
#define VERL_RL_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/config.pb.h"

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

}  // namespace verl::rl

#endif  // VERL_RL_CONFIG_H_
