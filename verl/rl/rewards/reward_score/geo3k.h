// File: verl/rl/rewards/reward_score/geo3k.h
//
// verl's Geometry3K scorer (hiyouga/geometry3k): 0.9·acc + 0.1·format, where
// format = the whole response matches <think>.*</think>.*\boxed{.*}.* (DOTALL)
// and acc grades the last \boxed{} content against the ground truth.
// Difference from verl: mathruler's sympy-based grade_answer is approximated
// by Hendrycks is_equiv or numeric equality of both sides (|a−b| ≤
// 1e-9·max(1,|b|)).
#ifndef VERL_RL_REWARDS_REWARD_SCORE_GEO3K_H_
#define VERL_RL_REWARDS_REWARD_SCORE_GEO3K_H_

#include <string>

namespace verl::rl::reward {

double Geo3kFormatReward(const std::string& response);
double Geo3kAccReward(const std::string& response,
                      const std::string& ground_truth);
double Geo3kComputeScore(const std::string& response,
                         const std::string& ground_truth,
                         double format_score = 0.1);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_GEO3K_H_
