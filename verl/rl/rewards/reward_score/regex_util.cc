// File: verl/rl/rewards/reward_score/regex_util.cc
#include "verl/rl/rewards/reward_score/regex_util.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "glog/logging.h"

namespace verl::rl::reward {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  uint32_t capture_count = 0;
};

Regex::Regex(const std::string& pattern, unsigned flags)
    : impl_(std::make_unique<Impl>()) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  if (flags & kIgnoreCase) options |= PCRE2_CASELESS;
  if (flags & kDotAll) options |= PCRE2_DOTALL;
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                    pattern.size(), options, &error, &offset, nullptr);
  CHECK(impl_->code != nullptr)
      << "bad regex '" << pattern << "' at offset " << offset;
  pcre2_pattern_info(impl_->code, PCRE2_INFO_CAPTURECOUNT,
                     &impl_->capture_count);
}

Regex::~Regex() { pcre2_code_free(impl_->code); }

namespace {

// Advances past one UTF-8 code point (or one byte if invalid).
size_t NextCodePoint(const std::string& s, size_t pos) {
  ++pos;
  while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
    ++pos;
  return pos;
}

}  // namespace

std::vector<std::vector<std::optional<std::string>>> Regex::FindAll(
    const std::string& text) const {
  std::vector<std::vector<std::optional<std::string>>> out;
  pcre2_match_data* md =
      pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t start = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                    text.size(), start, 0, md, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    std::vector<std::optional<std::string>> groups;
    for (uint32_t g = 0; g <= impl_->capture_count; ++g) {
      if (static_cast<int>(g) < rc && ov[2 * g] != PCRE2_UNSET) {
        groups.emplace_back(text.substr(ov[2 * g], ov[2 * g + 1] - ov[2 * g]));
      } else {
        groups.emplace_back(std::nullopt);
      }
    }
    out.push_back(std::move(groups));
    start = ov[1] > ov[0] ? ov[1] : NextCodePoint(text, ov[1]);
  }
  pcre2_match_data_free(md);
  return out;
}

std::vector<std::string> Regex::FindAllStrings(const std::string& text) const {
  std::vector<std::string> out;
  const size_t g = impl_->capture_count > 0 ? 1 : 0;
  for (const auto& m : FindAll(text)) out.push_back(m[g].value_or(""));
  return out;
}

bool Regex::FullMatch(const std::string& text) const {
  pcre2_match_data* md =
      pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const int rc = pcre2_match(
      impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0,
      PCRE2_ANCHORED | PCRE2_ENDANCHORED, md, nullptr);
  pcre2_match_data_free(md);
  return rc >= 0;
}

std::string Regex::Sub(const std::string& repl, const std::string& text) const {
  std::string out;
  pcre2_match_data* md =
      pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  size_t start = 0, copied = 0;
  while (start <= text.size()) {
    const int rc =
        pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()),
                    text.size(), start, 0, md, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    out.append(text, copied, ov[0] - copied);
    for (size_t i = 0; i < repl.size(); ++i) {
      if (repl[i] == '\\' && i + 1 < repl.size() && isdigit(repl[i + 1])) {
        const int g = repl[++i] - '0';
        if (g < rc && ov[2 * g] != PCRE2_UNSET)
          out.append(text, ov[2 * g], ov[2 * g + 1] - ov[2 * g]);
      } else if (repl[i] == '\\' && i + 1 < repl.size() &&
                 repl[i + 1] == '\\') {
        out.push_back('\\');
        ++i;
      } else {
        out.push_back(repl[i]);
      }
    }
    copied = ov[1];
    if (ov[1] > ov[0]) {
      start = ov[1];
    } else {
      const size_t next = NextCodePoint(text, ov[1]);
      if (ov[1] < text.size()) out.append(text, ov[1], next - ov[1]);
      copied = next;
      start = next;
    }
  }
  if (copied < text.size()) out.append(text, copied, std::string::npos);
  pcre2_match_data_free(md);
  return out;
}

std::string LastChars(const std::string& s, size_t n) {
  size_t count = 0;
  size_t pos = s.size();
  while (pos > 0 && count < n) {
    --pos;
    while (pos > 0 && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
      --pos;
    ++count;
  }
  return s.substr(pos);
}

std::string ReplaceAll(std::string s, const std::string& from,
                       const std::string& to) {
  if (from.empty()) return s;
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
  return s;
}

std::string StripWhitespace(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

}  // namespace verl::rl::reward
