// File: verl/rl/rewards/reward_score/default_compute_score.h
//
// verl's default_compute_score: dispatch a rule scorer by data_source
// (openai/gsm8k; lighteval/MATH, DigitalLearningGmbH/MATH-lighteval,
// HuggingFaceH4/MATH-500; math_dapo, math, math_dapo_reasoning, aime*;
// hiyouga/geometry3k; searchR1_*; plus the built-in countdown and
// arithmetic tasks). Unknown sources are an error naming the source.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_DEFAULT_COMPUTE_SCORE_H_
#define VERL_RL_REWARDS_REWARD_SCORE_DEFAULT_COMPUTE_SCORE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl::reward {

struct RewardResult {
  double score = 0.0;
  // Extra infos (verl's reward_extra_info), e.g. acc for math_dapo.
  std::map<std::string, double> numeric;
  std::map<std::string, std::string> text;  // e.g. pred
};

// `ground_truth` is the row's reward_model.ground_truth (string, number or
// object); `extra_info` is currently unused by the built-in scorers.
absl::StatusOr<RewardResult> DefaultComputeScore(
    const std::string& data_source, const std::string& solution,
    const nlohmann::json& ground_truth,
    const nlohmann::json& extra_info = nlohmann::json::object());

// Data sources with a built-in scorer (aime* is a prefix rule).
std::vector<std::string> KnownRewardDataSources();

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_DEFAULT_COMPUTE_SCORE_H_
