// File: verl/rl/rewards/reward_score/geo3k.cc
#include "verl/rl/rewards/reward_score/geo3k.h"

#include <cmath>
#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/math_reward.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;
namespace {

// mathruler's extract_boxed_content: content of the last "\boxed{...}".
std::optional<std::string> ExtractBoxedContent(const std::string& s) {
  const size_t idx = s.rfind("\\boxed{");
  if (idx == std::string::npos) return std::nullopt;
  int open = 0;
  const size_t start = idx + 7;
  for (size_t i = idx; i < s.size(); ++i) {
    if (s[i] == '{') ++open;
    if (s[i] == '}' && --open == 0) return s.substr(start, i - start);
  }
  return std::nullopt;
}

std::optional<double> AsNumber(const std::string& raw) {
  std::optional<std::string> s = StripString(raw);
  double v = 0;
  if (s.has_value() && absl::SimpleAtod(*s, &v)) return v;
  return std::nullopt;
}

}  // namespace

double Geo3kFormatReward(const std::string& response) {
  static const Regex* re =
      new Regex("<think>.*</think>.*\\\\boxed\\{.*\\}.*", Regex::kDotAll);
  return re->FullMatch(response) ? 1.0 : 0.0;
}

double Geo3kAccReward(const std::string& response,
                      const std::string& ground_truth) {
  std::optional<std::string> answer = ExtractBoxedContent(response);
  if (!answer.has_value()) return 0.0;
  const std::string a = StripWhitespace(*answer);
  const std::string g = StripWhitespace(ground_truth);
  if (a.empty()) return 0.0;
  if (IsEquiv(a, g)) return 1.0;
  std::optional<double> x = AsNumber(a), y = AsNumber(g);
  if (x.has_value() && y.has_value() &&
      std::fabs(*x - *y) <= 1e-9 * std::max(1.0, std::fabs(*y)))
    return 1.0;
  return 0.0;
}

double Geo3kComputeScore(const std::string& response,
                         const std::string& ground_truth, double format_score) {
  return (1.0 - format_score) * Geo3kAccReward(response, ground_truth) +
         format_score * Geo3kFormatReward(response);
}

}  // namespace verl::rl::reward
