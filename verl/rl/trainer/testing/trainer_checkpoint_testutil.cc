// File: verl/rl/trainer/testing/trainer_checkpoint_testutil.cc
#include "verl/rl/trainer/testing/trainer_checkpoint_testutil.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"

namespace verl::rl {

absl::StatusOr<PpoTrainerConfig> CheckpointTestConfig(
    const std::string& experiment, int64_t steps, int64_t save_freq,
    const std::string& ckpt_dir, int world_size,
    const std::vector<std::string>& extra) {
  // The per-rank mini-batch is 4 trajectories / world.
  const int64_t micro = std::max(1, 4 / world_size);
  std::vector<std::string> overrides = testing::WithOverrides(
      testing::TinyTaskOverrides(),
      {
          "actor_rollout_ref.sft_warmup.steps=0",
          absl::StrCat("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=",
                       micro),
          "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
          "actor_rollout_ref.actor.optim.lr_warmup_steps=1",
          "actor_rollout_ref.actor.optim.total_training_steps=4",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
          absl::StrCat("critic.ppo_micro_batch_size_per_gpu=", micro),
          "algorithm.adv_estimator=gae",
          "algorithm.use_kl_in_reward=true",
          "algorithm.kl_ctrl.type=adaptive",
          "trainer.project_name=ckpt",
          "trainer.experiment_name=" + experiment,
          absl::StrCat("trainer.n_gpus_per_node=", world_size),
          "trainer.val_before_train=false",
          absl::StrCat("trainer.total_training_steps=", steps),
          absl::StrCat("trainer.save_freq=", save_freq),
          "trainer.default_local_dir=" + ckpt_dir,
          // FSDP on > 1 rank: fp32 compute (Gloo has no bf16 all-gather).
          "actor_rollout_ref.actor.fsdp_config.dtype=float32",
          "critic.model.fsdp_config.dtype=float32",
      });
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  VERL_ASSIGN_OR_RETURN(PpoTrainerConfig config,
                        LoadPpoTrainerConfig("", overrides));
  config.mutable_data()->clear_val_files();
  VERL_RETURN_IF_ERROR(ValidatePpoTrainerConfig(config));
  return config;
}

}  // namespace verl::rl
