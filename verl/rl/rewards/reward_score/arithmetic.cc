// File: verl/rl/rewards/reward_score/arithmetic.cc
#include "verl/rl/rewards/reward_score/arithmetic.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;
namespace {

// "-1,234.00" → -1234; "2.5" → nullopt.
std::optional<int64_t> ParseInteger(std::string s) {
  s = ReplaceAll(s, ",", "");
  const size_t dot = s.find('.');
  if (dot != std::string::npos) {
    for (size_t i = dot + 1; i < s.size(); ++i)
      if (s[i] != '0') return std::nullopt;
    s = s.substr(0, dot);
  }
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<int64_t> ExtractArithmeticAnswer(const std::string& response) {
  static const Regex* marked =
      new Regex("####\\s*(-?[0-9][0-9,]*(?:\\.[0-9]+)?)");
  std::vector<std::string> found = marked->FindAllStrings(response);
  if (found.empty()) {
    static const Regex* number = new Regex("(-?[0-9][0-9,]*(?:\\.[0-9]+)?)");
    found = number->FindAllStrings(response);
  }
  if (found.empty()) return std::nullopt;
  return ParseInteger(found.back());
}

double ArithmeticComputeScore(const std::string& response,
                              int64_t ground_truth) {
  std::optional<int64_t> answer = ExtractArithmeticAnswer(response);
  return answer.has_value() && *answer == ground_truth ? 1.0 : 0.0;
}

}  // namespace verl::rl::reward
