// File: verl/rl/trainer/config/sft_config.h
//
// Loading the SFT trainer's configuration (SftTrainerConfig,
// verl/rl/trainer/config/sft_config.proto) the same way as the PPO trainer's:
// verl's defaults, the user's text-proto file, dotted overrides,
// interpolations.
#ifndef VERL_RL_TRAINER_SFT_CONFIG_H_
#define VERL_RL_TRAINER_SFT_CONFIG_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "verl/rl/trainer/config/config_keys.h"
#include "verl/rl/trainer/config/sft_config.pb.h"

namespace verl::rl {

// The built-in defaults text proto (sft_trainer_defaults.textproto).
const std::string& SftTrainerDefaultsText();

absl::StatusOr<SftTrainerConfig> LoadSftTrainerConfig(
    const std::string& config_file, const std::vector<std::string>& overrides);

// trainer.default_local_dir <- checkpoints/{project}/{experiment} and
// trainer.checkpoint.load_contents <- save_contents while null.
void ResolveSftTrainerConfig(SftTrainerConfig* config);

// The SFT key table (sft_config_keys.cc): every key of SftTrainerConfig is
// served, has no effect (CheckSftKeyUse().no_effect, for a notice line) or
// is not served (ValidateSftTrainerConfig refuses a non-default value with
// the reason, one line per key).
absl::Span<const KeyRule> SftKeyRules();
KeyUsage CheckSftKeyUse(const SftTrainerConfig& config);
absl::Status ValidateSftTrainerConfig(const SftTrainerConfig& config);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_SFT_CONFIG_H_
