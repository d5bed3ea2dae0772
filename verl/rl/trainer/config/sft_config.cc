// File: verl/rl/trainer/config/sft_config.cc
#include "verl/rl/trainer/config/sft_config.h"

#include "absl/strings/str_cat.h"
#include "verl/core/config_loader.h"

namespace verl::rl {

const std::string& SftTrainerDefaultsText() {
  static const std::string* const kText = new std::string(
#include "verl/rl/trainer/config/sft_trainer_defaults.inc"
  );
  return *kText;
}

absl::StatusOr<SftTrainerConfig> LoadSftTrainerConfig(
    const std::string& config_file, const std::vector<std::string>& overrides) {
  return core::LoadResolvedConfig<SftTrainerConfig>(
      {SftTrainerDefaultsText(),
       "verl/rl/trainer/config/sft_trainer_defaults.textproto", config_file,
       overrides},
      &ResolveSftTrainerConfig);
}

void ResolveSftTrainerConfig(SftTrainerConfig* config) {
  SftTrainerSection& trainer = *config->mutable_trainer();
  if (!trainer.has_default_local_dir()) {
    trainer.set_default_local_dir(absl::StrCat("checkpoints/",
                                               trainer.project_name(), "/",
                                               trainer.experiment_name()));
  }
  ckpt::CheckpointConfig& checkpoint = *trainer.mutable_checkpoint();
  if (checkpoint.load_contents_size() == 0) {
    *checkpoint.mutable_load_contents() = checkpoint.save_contents();
  }
}

}  // namespace verl::rl
