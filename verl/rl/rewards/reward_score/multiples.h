// File: verl/rl/rewards/reward_score/multiples.h
//
// "multiples" scorer (the built-in diversity task, MakeMultiplesRows): the
// prompt asks for a multiple of k in [lo, hi]; several answers are correct,
// with graded rewards r(y) = 0.5 + 0.5·(y − lo)/(hi − lo) (1.0 when
// lo == hi). The response, whitespace-stripped, must be exactly a positive
// integer without sign or leading zeros (so one answer has one spelling);
// anything else, a non-multiple or a value outside [lo, hi] scores 0.
// The reward-normalised target distribution p*(y) = r(y)/Σ_valid r is what
// a distribution-matching policy (FlowRL) should sample.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_MULTIPLES_H_
#define VERL_RL_REWARDS_REWARD_SCORE_MULTIPLES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace verl::rl::reward {

struct MultiplesQuestion {
  int64_t k = 1, lo = 0, hi = 0;
};

// OK iff k ≥ 1, 0 ≤ lo ≤ hi and [lo, hi] holds at least one multiple of k.
absl::Status ValidateMultiplesQuestion(const MultiplesQuestion& q);

// The answer the response spells, or nullopt if it is not exactly one
// canonical positive integer (at most 15 digits).
std::optional<int64_t> ParseMultiplesAnswer(const std::string& response);

// r(y) for a valid y, else 0.
double MultiplesReward(int64_t y, const MultiplesQuestion& q);
double MultiplesComputeScore(const std::string& response,
                             const MultiplesQuestion& q);

// (y, p*(y)) for every valid answer, ascending.
std::vector<std::pair<int64_t, double>> MultiplesTarget(
    const MultiplesQuestion& q);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_MULTIPLES_H_
