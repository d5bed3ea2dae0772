// File: verl/rl/train_main.cc
//
// Placeholder until the PPO trainer lands in verl/rl: says so and fails.
#include "verl/rl/train_main.h"

#include <iostream>

namespace verl::rl {

int RunTrainer(const PpoTrainerConfig& config) {
  std::cerr << "train: the PPO trainer is not built yet (config resolved; "
               "use --print_config to see it)"
            << std::endl;
  return 2;
}

}  // namespace verl::rl
