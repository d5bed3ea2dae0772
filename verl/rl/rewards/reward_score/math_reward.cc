// File: verl/rl/rewards/reward_score/math_reward.cc
#include "verl/rl/rewards/reward_score/math_reward.h"

#include <cctype>
#include <vector>

#include "absl/strings/str_split.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {
namespace {

// Python str.split(sep) (sep non-empty).
std::vector<std::string> Split(const std::string& s, const std::string& sep) {
  return absl::StrSplit(s, sep);
}

// Python int(s) for ASCII input (sign, digits, surrounding whitespace).
std::optional<long long> PyInt(const std::string& raw) {
  const std::string s = StripWhitespace(raw);
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  if (i == s.size()) return std::nullopt;
  for (size_t j = i; j < s.size(); ++j)
    if (!isdigit(static_cast<unsigned char>(s[j]))) return std::nullopt;
  if (s.size() - i > 18) return std::nullopt;
  return std::stoll(s);
}

std::optional<std::string> FixFracs(const std::string& string) {
  std::vector<std::string> substrs = Split(string, "\\frac");
  std::string new_str = substrs[0];
  for (size_t k = 1; k < substrs.size(); ++k) {
    const std::string& substr = substrs[k];
    new_str += "\\frac";
    if (substr.empty()) return std::nullopt;  // IndexError in Python
    if (substr[0] == '{') {
      new_str += substr;
      continue;
    }
    if (substr.size() < 2) return string;
    const std::string a(1, substr[0]), b(1, substr[1]);
    const std::string post = substr.substr(2);
    if (b != "{") {
      new_str += "{" + a + "}{" + b + "}" + post;
    } else {
      new_str += "{" + a + "}" + b + post;
    }
  }
  return new_str;
}

// nullopt where Python raises ValueError (non-integer parts).
std::optional<std::string> FixASlashB(const std::string& string) {
  std::vector<std::string> parts = Split(string, "/");
  if (parts.size() != 2) return string;
  std::optional<long long> a = PyInt(parts[0]), b = PyInt(parts[1]);
  if (!a.has_value() || !b.has_value()) return std::nullopt;
  if (string != std::to_string(*a) + "/" + std::to_string(*b)) return string;
  return "\\frac{" + std::to_string(*a) + "}{" + std::to_string(*b) + "}";
}

std::optional<std::string> RemoveRightUnits(const std::string& string) {
  if (string.find("\\text{ ") == std::string::npos) return string;
  std::vector<std::string> splits = Split(string, "\\text{ ");
  if (splits.size() != 2) return std::nullopt;  // AssertionError
  return splits[0];
}

std::optional<std::string> FixSqrt(const std::string& string) {
  if (string.find("\\sqrt") == std::string::npos) return string;
  std::vector<std::string> splits = Split(string, "\\sqrt");
  std::string out = splits[0];
  for (size_t k = 1; k < splits.size(); ++k) {
    const std::string& split = splits[k];
    if (split.empty()) return std::nullopt;  // IndexError
    if (split[0] != '{') {
      out += "\\sqrt{" + split.substr(0, 1) + "}" + split.substr(1);
    } else {
      out += "\\sqrt" + split;
    }
  }
  return out;
}

}  // namespace

std::optional<std::string> LastBoxedOnlyString(const std::string& s) {
  if (s.find("\\boxed ") != std::string::npos) {
    std::vector<std::string> parts = Split(s, "\\boxed ");
    return "\\boxed " + Split(parts.back(), "$")[0];
  }
  size_t idx = s.rfind("\\boxed");
  if (idx == std::string::npos) {
    idx = s.rfind("\\fbox");
    if (idx == std::string::npos) return std::nullopt;
  }
  int open = 0;
  for (size_t i = idx; i < s.size(); ++i) {
    if (s[i] == '{') ++open;
    if (s[i] == '}') {
      --open;
      if (open == 0) return s.substr(idx, i - idx + 1);
    }
  }
  return std::nullopt;
}

std::optional<std::string> RemoveBoxed(const std::string& s) {
  if (s.find("\\boxed ") != std::string::npos) {
    const std::string left = "\\boxed ";
    if (s.compare(0, left.size(), left) != 0) return std::nullopt;
    return s.substr(left.size());
  }
  const std::string left = "\\boxed{";
  if (s.compare(0, left.size(), left) != 0 || s.empty() || s.back() != '}')
    return std::nullopt;
  return s.substr(left.size(), s.size() - left.size() - 1);
}

std::optional<std::string> StripString(const std::string& input) {
  std::string s = input;
  s = ReplaceAll(s, "\n", "");
  s = ReplaceAll(s, "\\!", "");
  s = ReplaceAll(s, "\\\\", "\\");
  s = ReplaceAll(s, "tfrac", "frac");
  s = ReplaceAll(s, "dfrac", "frac");
  s = ReplaceAll(s, "\\left", "");
  s = ReplaceAll(s, "\\right", "");
  s = ReplaceAll(s, "^{\\circ}", "");
  s = ReplaceAll(s, "^\\circ", "");
  s = ReplaceAll(s, "\\$", "");
  std::optional<std::string> no_units = RemoveRightUnits(s);
  if (!no_units.has_value()) return std::nullopt;
  s = ReplaceAll(*no_units, "\\%", "");
  s = ReplaceAll(s, " .", " 0.");
  s = ReplaceAll(s, "{.", "{0.");
  if (s.empty()) return s;
  if (s[0] == '.') s = "0" + s;
  std::vector<std::string> eq = Split(s, "=");
  if (eq.size() == 2 && eq[0].size() <= 2) s = eq[1];
  std::optional<std::string> sq = FixSqrt(s);
  if (!sq.has_value()) return std::nullopt;
  s = ReplaceAll(*sq, " ", "");
  std::optional<std::string> fr = FixFracs(s);
  if (!fr.has_value()) return std::nullopt;
  s = *fr;
  if (s == "0.5") s = "\\frac{1}{2}";
  return FixASlashB(s);
}

bool IsEquiv(const std::string& a, const std::string& b) {
  std::optional<std::string> sa = StripString(a);
  std::optional<std::string> sb = StripString(b);
  if (!sa.has_value() || !sb.has_value()) return a == b;
  return *sa == *sb;
}

double MathComputeScore(const std::string& solution,
                        const std::string& ground_truth) {
  std::optional<std::string> boxed = LastBoxedOnlyString(solution);
  if (!boxed.has_value()) return 0.0;
  std::optional<std::string> answer = RemoveBoxed(*boxed);
  if (!answer.has_value()) return 0.0;  // Python: assertion caught → 0
  return IsEquiv(*answer, ground_truth) ? 1.0 : 0.0;
}

}  // namespace verl::rl::reward
