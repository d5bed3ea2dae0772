// File: verl/rl/rewards/reward_score/math_dapo.h
//
// verl's DAPO math scorer (math_dapo, math, math_dapo_reasoning, aime*):
// last 300 characters, the last "Answer: ..." line (case-insensitive; else
// "[INVALID]"), Minerva normalize_final_answer on prediction and ground
// truth, exact equality → score +1 else −1, with acc and pred reported.
// strict_box_verify instead compares the last \boxed{} of the last 100
// characters verbatim.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_MATH_DAPO_H_
#define VERL_RL_REWARDS_REWARD_SCORE_MATH_DAPO_H_

#include <string>

namespace verl::rl::reward {

// Minerva's normalize_final_answer (lm-eval-harness hendrycks_math).
std::string NormalizeFinalAnswer(const std::string& final_answer);

struct MathDapoResult {
  double score = -1.0;  // +1 correct, −1 otherwise
  bool acc = false;
  std::string pred;  // normalised prediction ("[INVALID]" if none)
};

MathDapoResult MathDapoComputeScore(const std::string& solution,
                                    const std::string& ground_truth,
                                    bool strict_box_verify = false);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_MATH_DAPO_H_
