#include "verl/core/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"

namespace verl::core {

// Two compilations of the pattern: `code` runs on valid UTF-8 without
// re-checking it at every match (PCRE2_NO_UTF_CHECK; checking each time is
// quadratic over a text's matches), `lenient` (PCRE2_MATCH_INVALID_UTF) on
// invalid UTF-8, where matching is about a third slower.
struct Regex::Code {
  pcre2_code* code = nullptr;
  pcre2_code* lenient = nullptr;
  uint32_t capture_count = 0;
  std::string pattern;
  ~Code() {
    pcre2_code_free(code);
    pcre2_code_free(lenient);
  }
};

namespace {

// Advances past one UTF-8 code point (or one byte if invalid).
size_t NextCodePoint(absl::string_view s, size_t pos) {
  ++pos;
  while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80)
    ++pos;
  return pos;
}

// RFC 3629 UTF-8 (no overlongs, surrogates or code points past U+10FFFF),
// the form PCRE2_NO_UTF_CHECK requires.
bool IsValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t tail;                         // Continuation bytes.
    unsigned char lo = 0x80, hi = 0xBF;  // Range of the second byte.
    if (c >= 0xC2 && c <= 0xDF) {
      tail = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      tail = 2;
      if (c == 0xE0) lo = 0xA0;  // Overlong.
      if (c == 0xED) hi = 0x9F;  // Surrogates.
    } else if (c >= 0xF0 && c <= 0xF4) {
      tail = 3;
      if (c == 0xF0) lo = 0x90;  // Overlong.
      if (c == 0xF4) hi = 0x8F;  // Past U+10FFFF.
    } else {
      return false;
    }
    if (s.size() - i <= tail) return false;
    for (size_t k = 1; k <= tail; ++k) {
      const unsigned char b = s[i + k];
      if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return false;
    }
    i += tail + 1;
  }
  return true;
}

// Owns a match-data block for one search.
class MatchData {
 public:
  explicit MatchData(const pcre2_code* code)
      : md_(pcre2_match_data_create_from_pattern(code, nullptr)) {}
  ~MatchData() { pcre2_match_data_free(md_); }
  MatchData(const MatchData&) = delete;
  MatchData& operator=(const MatchData&) = delete;
  pcre2_match_data* get() const { return md_; }

 private:
  pcre2_match_data* md_;
};

// pcre2_match, retried without JIT when the JIT stack is too small. Returns
// PCRE2's code: > 0 matched (number of groups set + 1), < 0 no match/error.
int RunMatch(const pcre2_code* code, absl::string_view text, size_t start,
             uint32_t options, pcre2_match_data* md) {
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc = pcre2_match(code, subject, text.size(), start, options, md, nullptr);
  if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
    rc = pcre2_match(code, subject, text.size(), start, options | PCRE2_NO_JIT,
                     md, nullptr);
  if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
    LOG(WARNING) << "PCRE2 match error " << rc
                 << "; no further matches in this text";
  return rc;
}

absl::StatusOr<pcre2_code*> CompileOne(absl::string_view pattern,
                                       uint32_t options) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()),
                    pattern.size(), options, &err, &err_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return absl::InvalidArgumentError(
        absl::StrCat("bad regex /", pattern, "/ at offset ", err_offset, ": ",
                     reinterpret_cast<const char*>(msg)));
  }
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // Optional speed-up.
  return code;
}

}  // namespace

absl::StatusOr<Regex> Regex::Compile(absl::string_view pattern,
                                     unsigned flags) {
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  if (flags & kIgnoreCase) options |= PCRE2_CASELESS;
  if (flags & kDotAll) options |= PCRE2_DOTALL;
  auto compiled = std::make_shared<Code>();
  absl::StatusOr<pcre2_code*> code = CompileOne(pattern, options);
  if (!code.ok()) return code.status();
  compiled->code = *code;
  code = CompileOne(pattern, options | PCRE2_MATCH_INVALID_UTF);
  if (!code.ok()) return code.status();
  compiled->lenient = *code;
  compiled->pattern = std::string(pattern);
  pcre2_pattern_info(compiled->code, PCRE2_INFO_CAPTURECOUNT,
                     &compiled->capture_count);
  return Regex(std::shared_ptr<const Code>(std::move(compiled)));
}

Regex::Regex(absl::string_view pattern, unsigned flags) {
  absl::StatusOr<Regex> compiled = Compile(pattern, flags);
  CHECK(compiled.ok()) << compiled.status();
  code_ = std::move(compiled->code_);
}

int Regex::capture_count() const {
  return static_cast<int>(code_->capture_count);
}

const std::string& Regex::pattern() const { return code_->pattern; }

std::optional<std::string> Regex::Match::str(absl::string_view subject,
                                             size_t g) const {
  if (g >= groups.size() || !groups[g]) return std::nullopt;
  return std::string(
      subject.substr(groups[g]->first, groups[g]->second - groups[g]->first));
}

template <typename F>
void Regex::ForEachMatch(absl::string_view text, F on_match) const {
  const bool valid = IsValidUtf8(text);
  const pcre2_code* code = valid ? code_->code : code_->lenient;
  const uint32_t options = valid ? PCRE2_NO_UTF_CHECK : 0;
  MatchData md(code);
  size_t start = 0;
  while (start <= text.size()) {
    const int rc = RunMatch(code, text, start, options, md.get());
    if (rc < 0) break;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    on_match(ov, rc);
    start = ov[1] > ov[0] ? ov[1] : NextCodePoint(text, ov[1]);
  }
}

std::vector<Regex::Match> Regex::FindAll(absl::string_view text) const {
  std::vector<Match> out;
  ForEachMatch(text, [&](const PCRE2_SIZE* ov, int rc) {
    Match m;
    for (uint32_t g = 0; g <= code_->capture_count; ++g) {
      if (static_cast<int>(g) < rc && ov[2 * g] != PCRE2_UNSET) {
        m.groups.emplace_back(
            std::pair<size_t, size_t>(ov[2 * g], ov[2 * g + 1]));
      } else {
        m.groups.emplace_back(std::nullopt);
      }
    }
    out.push_back(std::move(m));
  });
  return out;
}

std::vector<std::pair<size_t, size_t>> Regex::FindAllSpans(
    absl::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  ForEachMatch(
      text, [&](const PCRE2_SIZE* ov, int) { out.emplace_back(ov[0], ov[1]); });
  return out;
}

std::vector<std::string> Regex::FindAllStrings(absl::string_view text) const {
  std::vector<std::string> out;
  const size_t g = code_->capture_count > 0 ? 1 : 0;
  for (const Match& m : FindAll(text))
    out.push_back(m.str(text, g).value_or(""));
  return out;
}

bool Regex::FullMatch(absl::string_view text) const {
  const bool valid = IsValidUtf8(text);
  const pcre2_code* code = valid ? code_->code : code_->lenient;
  MatchData md(code);
  return RunMatch(code, text, 0,
                  PCRE2_ANCHORED | PCRE2_ENDANCHORED |
                      (valid ? PCRE2_NO_UTF_CHECK : 0),
                  md.get()) >= 0;
}

std::string Regex::Sub(absl::string_view repl, absl::string_view text) const {
  std::string out;
  size_t copied = 0;
  for (const Match& m : FindAll(text)) {
    out.append(text.data() + copied, m.begin() - copied);
    for (size_t i = 0; i < repl.size(); ++i) {
      if (repl[i] == '\\' && i + 1 < repl.size() &&
          std::isdigit(static_cast<unsigned char>(repl[i + 1]))) {
        const size_t g = repl[++i] - '0';
        if (std::optional<std::string> group = m.str(text, g)) out += *group;
      } else if (repl[i] == '\\' && i + 1 < repl.size() &&
                 repl[i + 1] == '\\') {
        out.push_back('\\');
        ++i;
      } else {
        out.push_back(repl[i]);
      }
    }
    copied = m.end();
  }
  out.append(text.data() + copied, text.size() - copied);
  return out;
}

}  // namespace verl::core
