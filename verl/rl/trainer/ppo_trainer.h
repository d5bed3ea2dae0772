// File: verl/rl/trainer/ppo_trainer.h
//
// verl's RayPPOTrainer as an SPMD program: every rank runs this controller in
// lockstep on the same data (same seed); each worker-group call takes this
// rank's shard of the Batch, computes, and gathers the result to all ranks.
// One step, in verl's order and with verl's timers:
//   gen → (gen_max) → reward → old_log_prob → ref → values → adv →
//   update_critic → update_actor → update_weights
// with validation (val_before_train, test_freq, last step), KL in reward or
// as a loss, critic warmup, balance_batch, and verl's metric names logged
// through the configured trackers (rank 0 only).
#ifndef VERL_RL_TRAINER_PPO_TRAINER_H_
#define VERL_RL_TRAINER_PPO_TRAINER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/trainer/config/config.pb.h"

namespace verl::rl {

struct FitResult {
  int64_t steps = 0;
  std::map<std::string, double> first_validation;  // metrics before training
  std::map<std::string, double> last_validation;  // metrics after the last step
  std::map<std::string, double> last_step_metrics;
};

// Builds every role from `config` and runs training. `world` is the data-
// parallel group (SingleProcessCommunicator() for one process).
absl::StatusOr<FitResult> RunPpo(const PpoTrainerConfig& config,
                                 std::shared_ptr<parallel::Communicator> world);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_PPO_TRAINER_H_
