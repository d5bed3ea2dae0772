// File: verl/rl/rewards/reward_score/regex_util.h
//
// A small PCRE2 wrapper with Python `re` semantics where the rule scorers
// need them: findall over non-overlapping matches and global `re.sub` with
// `\N` group references. Patterns are compiled in UTF mode with Unicode
// character classes (like Python 3 str patterns); invalid UTF-8 input is
// tolerated.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_REGEX_UTIL_H_
#define VERL_RL_REWARDS_REWARD_SCORE_REGEX_UTIL_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace verl::rl::reward {

class Regex {
 public:
  enum Flags : unsigned { kNone = 0, kIgnoreCase = 1, kDotAll = 2 };
  // CHECK-fails on an invalid pattern (patterns are program constants).
  explicit Regex(const std::string& pattern, unsigned flags = kNone);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Groups of every non-overlapping match, left to right; element 0 is the
  // whole match, unmatched groups are nullopt.
  std::vector<std::vector<std::optional<std::string>>> FindAll(
      const std::string& text) const;
  // Python re.findall: group 1 if the pattern has groups, else group 0.
  std::vector<std::string> FindAllStrings(const std::string& text) const;
  // Whole-string match (re.fullmatch).
  bool FullMatch(const std::string& text) const;
  // re.sub(pattern, repl, text): every match replaced; `\N` in repl inserts
  // group N (empty if unmatched), `\\` a backslash.
  std::string Sub(const std::string& repl, const std::string& text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The last `n` code points of UTF-8 `s` (Python's s[-n:]).
std::string LastChars(const std::string& s, size_t n);

// Replaces every occurrence of `from` (non-empty) with `to`.
std::string ReplaceAll(std::string s, const std::string& from,
                       const std::string& to);

// Python str.strip() over ASCII whitespace.
std::string StripWhitespace(const std::string& s);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_REGEX_UTIL_H_
