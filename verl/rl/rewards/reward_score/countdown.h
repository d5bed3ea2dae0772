// File: verl/rl/rewards/reward_score/countdown.h
//
// Countdown scorer (data_source "countdown", TinyZero-style rules): the
// equation is the last <answer>…</answer>, else the response's last
// non-empty line if that line is an equation ("expr" or "expr = value").
// It may use only digits, + - * / ( ) and spaces, and each given number at
// most once; it is evaluated with a small recursive-descent parser (no
// eval). Correct (|value − target| < 1e-5) → `score`; an equation that is
// invalid or wrong → `format_score`; no equation → 0.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_COUNTDOWN_H_
#define VERL_RL_REWARDS_REWARD_SCORE_COUNTDOWN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace verl::rl::reward {

std::optional<std::string> ExtractCountdownEquation(
    const std::string& response);
// Value of an arithmetic expression over + - * / ( ) and non-negative
// integers; nullopt on a syntax error, other characters or division by zero.
std::optional<double> EvaluateArithmetic(const std::string& expression);
// Every integer literal in `equation` drawn from `numbers` (multiset).
bool UsesAvailableNumbers(const std::string& equation,
                          const std::vector<int64_t>& numbers);

double CountdownComputeScore(const std::string& response, int64_t target,
                             const std::vector<int64_t>& numbers,
                             double format_score = 0.1, double score = 1.0);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_COUNTDOWN_H_
