// File: verl/rl/trainer/testing/ppo_trainer_testutil.h
//
// The tiny PPO/GRPO run the trainer tests use: tiny-qwen2 on the built-in
// arithmetic task, batch 4 x n=2, 2 steps, validation at step 2, the file
// logger only. Tests append their own dotted overrides.
#ifndef VERL_RL_TRAINER_TESTING_PPO_TRAINER_TESTUTIL_H_
#define VERL_RL_TRAINER_TESTING_PPO_TRAINER_TESTUTIL_H_

#include <string>
#include <vector>

namespace verl::rl::testing {

// The tiny task every trainer test shares: tiny-qwen2 on the built-in
// arithmetic task, batch 4 x n=2, mini-batch 2, lr 1e-3, the file logger.
std::vector<std::string> TinyTaskOverrides();

// Extends `base` with `more` (later keys win).
std::vector<std::string> WithOverrides(std::vector<std::string> base,
                                       const std::vector<std::string>& more);

std::vector<std::string> TinyPpoOverrides(const std::string& estimator,
                                          const std::string& experiment);

}  // namespace verl::rl::testing

#endif  // VERL_RL_TRAINER_TESTING_PPO_TRAINER_TESTUTIL_H_
