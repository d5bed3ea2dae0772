// File: verl/models/tokenizer/tokenizer_pretokenize.h
//
// Steps 2 and 3 of encoding a text segment, as HF `tokenizers` does them:
// normalizers (NFC, NFD, NFKC, NFKD through ICU; Lowercase) and
// pre-tokenizers (Split on a regex or literal with any of the five split
// behaviours and `invert`; ByteLevel with `add_prefix_space` and the GPT-2
// regex). Regexes are //verl/core:regex (PCRE2, UTF + UCP).
#ifndef VERL_MODELS_TOKENIZER_PRETOKENIZE_H_
#define VERL_MODELS_TOKENIZER_PRETOKENIZE_H_

#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "verl/core/regex.h"

namespace verl::models::tokenizer_internal {

enum class NormalizerKind { kNfc, kNfd, kNfkc, kNfkd, kLowercase };

// `text` normalized by one normalizer (ASCII text is returned unchanged by
// the NF* forms without calling ICU).
std::string Normalize(NormalizerKind kind, absl::string_view text);

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous
};

struct PreTokenizerStep {
  bool byte_level = false;
  // Split, or ByteLevel with use_regex (GPT-2 pattern, isolated).
  std::optional<core::Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel only.
};

// The GPT-2 split pattern ByteLevel uses when `use_regex` is true.
const core::Regex& Gpt2Regex();

// Applies `behavior` to the [begin, end, is_match] ranges covering a piece;
// returns the [begin, end) ranges of the resulting pieces.
std::vector<std::pair<size_t, size_t>> ApplyBehavior(
    const std::vector<std::tuple<size_t, size_t, bool>>& ranges,
    SplitBehavior behavior);

// Runs the steps in order over `text`; returns the non-empty pieces.
std::vector<std::string> PreTokenize(const std::vector<PreTokenizerStep>& steps,
                                     std::string text);

}  // namespace verl::models::tokenizer_internal

#endif  // VERL_MODELS_TOKENIZER_PRETOKENIZE_H_
