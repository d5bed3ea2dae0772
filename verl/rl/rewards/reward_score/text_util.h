// File: verl/rl/rewards/reward_score/text_util.h
//
// Python string helpers the rule scorers share. Their regular expressions
// are //verl/core:regex (core::Regex: findall, fullmatch and sub with Python
// `re` semantics).
#ifndef VERL_RL_REWARDS_REWARD_SCORE_TEXT_UTIL_H_
#define VERL_RL_REWARDS_REWARD_SCORE_TEXT_UTIL_H_

#include <string>

namespace verl::rl::reward {

// The last `n` code points of UTF-8 `s` (Python's s[-n:] for n > 0; n == 0
// gives "").
std::string LastChars(const std::string& s, size_t n);

// Replaces every non-overlapping occurrence of `from` with `to`, left to
// right (Python's str.replace); an empty `from` changes nothing.
std::string ReplaceAll(std::string s, const std::string& from,
                       const std::string& to);

// Python str.strip() over ASCII whitespace.
std::string StripWhitespace(const std::string& s);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_TEXT_UTIL_H_
