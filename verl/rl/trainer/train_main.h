// File: verl/rl/trainer/train_main.h
//
// The single entry point tools/train calls once the configuration is
// resolved: runs the PPO/GRPO trainer and returns the process exit code.
#ifndef VERL_RL_TRAINER_TRAIN_MAIN_H_
#define VERL_RL_TRAINER_TRAIN_MAIN_H_

#include "verl/rl/trainer/config/config.pb.h"

namespace verl::rl {

// Runs training as configured; 0 on success, non-zero on failure.
int RunTrainer(const PpoTrainerConfig& config);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_TRAIN_MAIN_H_
