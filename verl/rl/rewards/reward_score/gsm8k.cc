// File: verl/rl/rewards/reward_score/gsm8k.cc
#include "verl/rl/rewards/reward_score/gsm8k.h"

#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;

namespace {
constexpr size_t kClipChars = 300;
}  // namespace

std::optional<std::string> Gsm8kExtractSolution(const std::string& solution,
                                                Gsm8kMethod method) {
  const std::string text = LastChars(solution, kClipChars);
  if (method == Gsm8kMethod::kStrict) {
    static const Regex* re = new Regex("#### (\\-?[0-9\\.\\,]+)");
    std::vector<std::string> found = re->FindAllStrings(text);
    if (found.empty()) return std::nullopt;
    return ReplaceAll(ReplaceAll(found.back(), ",", ""), "$", "");
  }
  static const Regex* re = new Regex("(\\-?[0-9\\.\\,]+)");
  std::vector<std::string> found = re->FindAllStrings(text);
  if (found.empty()) return std::nullopt;
  // Python's loop leaves the first candidate bound when all are invalid.
  for (auto it = found.rbegin(); it != found.rend(); ++it)
    if (*it != "" && *it != ".") return *it;
  return found.front();
}

double Gsm8kComputeScore(const std::string& solution,
                         const std::string& ground_truth, Gsm8kMethod method,
                         double format_score, double score) {
  std::optional<std::string> answer = Gsm8kExtractSolution(solution, method);
  if (!answer.has_value()) return 0.0;
  return *answer == ground_truth ? score : format_score;
}

}  // namespace verl::rl::reward
