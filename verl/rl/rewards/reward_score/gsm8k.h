// File: verl/rl/rewards/reward_score/gsm8k.h
//
// verl's GSM8K rule scorer (data_source "openai/gsm8k"): only the last 300
// characters are considered; "strict" takes the last "#### <number>" (commas
// and '$' removed), "flexible" the last number-like token that is not "" or
// ".". No answer → 0; string-equal to the ground truth → `score`, else
// `format_score`.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_GSM8K_H_
#define VERL_RL_REWARDS_REWARD_SCORE_GSM8K_H_

#include <optional>
#include <string>

namespace verl::rl::reward {

enum class Gsm8kMethod { kStrict, kFlexible };

std::optional<std::string> Gsm8kExtractSolution(const std::string& solution,
                                                Gsm8kMethod method);

double Gsm8kComputeScore(const std::string& solution,
                         const std::string& ground_truth,
                         Gsm8kMethod method = Gsm8kMethod::kStrict,
                         double format_score = 0.0, double score = 1.0);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_GSM8K_H_
