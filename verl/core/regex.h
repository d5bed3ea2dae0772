// File: verl/core/regex.h
//
// The project's one regular-expression wrapper (PCRE2), for the tokenizer's
// pre-tokenizer splits and the reward scorers. Patterns compile in UTF mode
// with Unicode properties (PCRE2_UCP: \w, \d, \s, \b and [[:alpha:]] are
// Unicode-aware, like Python 3 str patterns and HF tokenizers' Oniguruma
// regexes), with JIT when available. Subjects may hold invalid UTF-8: it
// never matches and never fails (such subjects run on a second compilation
// with PCRE2_MATCH_INVALID_UTF; valid ones are checked once per call, not per
// match). Matching follows
// Python's `re`: non-overlapping matches left to right; after an empty match
// the search moves on by one code point.
//
// Example:
//   VERL_ASSIGN_OR_RETURN(core::Regex re, core::Regex::Compile(R"(\p{L}+)"));
//   for (const core::Regex::Match& m : re.FindAll(text)) Use(m.str(text));
#ifndef VERL_CORE_REGEX_H_
#define VERL_CORE_REGEX_H_

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::core {

class Regex {
 public:
  enum Flags : unsigned { kNone = 0, kIgnoreCase = 1, kDotAll = 2 };

  // InvalidArgument "bad regex /<pattern>/ at offset N: <PCRE2 message>".
  static absl::StatusOr<Regex> Compile(absl::string_view pattern,
                                       unsigned flags = kNone);
  // For patterns that are program constants: CHECK-fails when invalid.
  explicit Regex(absl::string_view pattern, unsigned flags = kNone);

  // One match: byte ranges into the subject of the whole match (group 0)
  // and of each capture group (nullopt when the group did not take part).
  struct Match {
    std::vector<std::optional<std::pair<size_t, size_t>>> groups;
    size_t begin() const { return groups[0]->first; }
    size_t end() const { return groups[0]->second; }
    bool empty() const { return begin() == end(); }
    // Text of group `g` in `subject` (nullopt when it did not take part).
    std::optional<std::string> str(absl::string_view subject,
                                   size_t g = 0) const;
  };

  // Every match, left to right (Python re.finditer), empty ones included.
  std::vector<Match> FindAll(absl::string_view text) const;
  // [begin, end) of every whole match, as FindAll (no groups; cheaper).
  std::vector<std::pair<size_t, size_t>> FindAllSpans(
      absl::string_view text) const;
  // Python re.findall for patterns with at most one group: group 1 if the
  // pattern has groups (an unmatched group gives ""), else the whole match.
  std::vector<std::string> FindAllStrings(absl::string_view text) const;
  // Python re.fullmatch: does the whole of `text` match?
  bool FullMatch(absl::string_view text) const;
  // Python re.sub(pattern, repl, text): every match replaced by `repl`, in
  // which `\N` (one digit) inserts group N ("" if unmatched) and `\\` a
  // backslash.
  std::string Sub(absl::string_view repl, absl::string_view text) const;

  // Number of capture groups.
  int capture_count() const;
  const std::string& pattern() const;

 private:
  struct Code;
  // Calls on_match(ovector, rc) for each match of FindAll's iteration.
  template <typename F>
  void ForEachMatch(absl::string_view text, F on_match) const;
  explicit Regex(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
  std::shared_ptr<const Code> code_;  // Immutable; shared by copies.
};

}  // namespace verl::core

#endif  // VERL_CORE_REGEX_H_
