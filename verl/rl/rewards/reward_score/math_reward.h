// File: verl/rl/rewards/reward_score/math_reward.h
//
// verl's MATH scorer (lighteval/MATH, DigitalLearningGmbH/MATH-lighteval,
// HuggingFaceH4/MATH-500): the last \boxed{...} (brace matched; "\boxed "
// form too), unboxed, compared with the ground truth by Hendrycks'
// is_equiv (strip_string normalisation on both sides; if normalisation
// fails the raw strings are compared, as Python's exception fallback does).
#ifndef VERL_RL_REWARDS_REWARD_SCORE_MATH_REWARD_H_
#define VERL_RL_REWARDS_REWARD_SCORE_MATH_REWARD_H_

#include <optional>
#include <string>

namespace verl::rl::reward {

// The last "\boxed{...}" / "\boxed ..." / "\fbox{...}" substring, or nullopt.
std::optional<std::string> LastBoxedOnlyString(const std::string& s);
// "\boxed{x}" → "x", "\boxed x" → "x"; nullopt if `s` is not boxed that way.
std::optional<std::string> RemoveBoxed(const std::string& s);
// Hendrycks strip_string; nullopt where the Python code raises.
std::optional<std::string> StripString(const std::string& s);
// Hendrycks is_equiv.
bool IsEquiv(const std::string& a, const std::string& b);

// 1.0 if the last boxed answer is equivalent to `ground_truth`, else 0.0.
double MathComputeScore(const std::string& solution,
                        const std::string& ground_truth);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_MATH_REWARD_H_
