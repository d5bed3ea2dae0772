// File: verl/rl/trainer/testing/ppo_trainer_testutil.cc
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"

namespace verl::rl::testing {

std::vector<std::string> TinyTaskOverrides() {
  return {
      "data.train_files=[builtin:arithmetic/train]",
      "data.train_batch_size=4",
      "data.max_prompt_length=32",
      "data.max_response_length=8",
      "data.seed=3",
      "actor_rollout_ref.model.preset=tiny-qwen2",
      "actor_rollout_ref.model.enable_gradient_checkpointing=false",
      "actor_rollout_ref.actor.ppo_mini_batch_size=2",
      "actor_rollout_ref.actor.optim.lr=1e-3",
      "actor_rollout_ref.rollout.n=2",
      "trainer.logger=[file]",
  };
}

std::vector<std::string> WithOverrides(std::vector<std::string> base,
                                       const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

std::vector<std::string> TinyPpoOverrides(const std::string& estimator,
                                          const std::string& experiment) {
  return WithOverrides(
      TinyTaskOverrides(),
      {
          "data.val_files=[builtin:arithmetic/test]",
          "data.val_batch_size=8",
          "data.val_max_samples=8",
          "actor_rollout_ref.sft_warmup.steps=2",
          "actor_rollout_ref.sft_warmup.batch_size=4",
          "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4",
          "actor_rollout_ref.actor.use_kl_loss=true",
          "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
          "actor_rollout_ref.rollout.calculate_log_probs=true",
          "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8",
          "critic.ppo_micro_batch_size_per_gpu=4",
          "algorithm.adv_estimator=" + estimator,
          "trainer.project_name=e2e",
          "trainer.experiment_name=" + experiment,
          "trainer.n_gpus_per_node=1",
          "trainer.total_training_steps=2",
          "trainer.test_freq=2",
      });
}

}  // namespace verl::rl::testing
