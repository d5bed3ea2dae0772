// File: verl/rl/rewards/reward_score/arithmetic.h
//
// Arithmetic scorer (data_source "arithmetic", the built-in task): the answer
// is the number after the last "####", else the last number in the response;
// it must equal the integer ground truth exactly (commas ignored, a
// fractional part must be zero) → 1.0, else 0.0.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_ARITHMETIC_H_
#define VERL_RL_REWARDS_REWARD_SCORE_ARITHMETIC_H_

#include <cstdint>
#include <optional>
#include <string>

namespace verl::rl::reward {

// The integer answer, or nullopt if none / not an integer.
std::optional<int64_t> ExtractArithmeticAnswer(const std::string& response);
double ArithmeticComputeScore(const std::string& response,
                              int64_t ground_truth);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_ARITHMETIC_H_
