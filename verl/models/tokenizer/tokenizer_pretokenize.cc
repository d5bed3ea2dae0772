#include "verl/models/tokenizer/tokenizer_pretokenize.h"

#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <algorithm>

#include "glog/logging.h"

namespace verl::models::tokenizer_internal {

const core::Regex& Gpt2Regex() {
  static const core::Regex* gpt2 = new core::Regex(
      R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  return *gpt2;
}

std::string Normalize(NormalizerKind kind, absl::string_view text) {
  bool ascii = true;
  for (char c : text) ascii &= (static_cast<unsigned char>(c) < 0x80);
  if (ascii && kind != NormalizerKind::kLowercase) return std::string(text);
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode err = U_ZERO_ERROR;
  icu::UnicodeString result;
  if (kind == NormalizerKind::kLowercase) {
    result = u.toLower(icu::Locale::getRoot());
  } else {
    const icu::Normalizer2* n =
        kind == NormalizerKind::kNfc   ? icu::Normalizer2::getNFCInstance(err)
        : kind == NormalizerKind::kNfd ? icu::Normalizer2::getNFDInstance(err)
        : kind == NormalizerKind::kNfkc
            ? icu::Normalizer2::getNFKCInstance(err)
            : icu::Normalizer2::getNFKDInstance(err);
    CHECK(U_SUCCESS(err)) << "ICU normalizer unavailable: " << u_errorName(err);
    result = n->normalize(u, err);
    CHECK(U_SUCCESS(err)) << "ICU normalize failed: " << u_errorName(err);
  }
  std::string out;
  result.toUTF8String(out);
  return out;
}

std::vector<std::pair<size_t, size_t>> ApplyBehavior(
    const std::vector<std::tuple<size_t, size_t, bool>>& ranges,
    SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& [b, e, m] : ranges) out.emplace_back(b, e);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& [b, e, m] : ranges)
        if (!m) out.emplace_back(b, e);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& [b, e, m] : ranges) {
        if (m && !previous_match && !out.empty()) {
          out.back().second = e;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        const auto& [b, e, m] = *it;
        if (m && !previous_match && !out.empty()) {
          out.back().first = b;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      std::reverse(out.begin(), out.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& [b, e, m] : ranges) {
        if (m == previous_match && !out.empty()) {
          out.back().second = e;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      break;
  }
  return out;
}

std::vector<std::string> PreTokenize(const std::vector<PreTokenizerStep>& steps,
                                     std::string text) {
  std::vector<std::string> pieces;
  pieces.push_back(std::move(text));
  for (const PreTokenizerStep& step : steps) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.byte_level && step.add_prefix_space && piece[0] != ' ')
        piece.insert(piece.begin(), ' ');
      if (!step.regex) {
        next.push_back(std::move(piece));
        continue;
      }
      std::vector<std::tuple<size_t, size_t, bool>> ranges;
      size_t pos = 0;
      for (auto [b, e] : step.regex->FindAllSpans(piece)) {
        if (b == e) continue;  // Only non-empty matches split.
        if (b > pos) ranges.emplace_back(pos, b, step.invert);
        ranges.emplace_back(b, e, !step.invert);
        pos = e;
      }
      if (pos < piece.size())
        ranges.emplace_back(pos, piece.size(), step.invert);
      for (auto [b, e] : ApplyBehavior(ranges, step.behavior))
        if (e > b) next.push_back(piece.substr(b, e - b));
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace verl::models::tokenizer_internal
