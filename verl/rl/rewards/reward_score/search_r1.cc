// File: verl/rl/rewards/reward_score/search_r1.cc
#include "verl/rl/rewards/reward_score/search_r1.h"

#include <cctype>
#include <sstream>

#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;
namespace {

size_t CountOf(const std::string& s, const std::string& sub) {
  size_t n = 0;
  for (size_t p = s.find(sub); p != std::string::npos;
       p = s.find(sub, p + sub.size()))
    ++n;
  return n;
}

}  // namespace

std::string NormalizeQaAnswer(const std::string& s) {
  std::string lower;
  for (char c : s) {
    if (std::ispunct(static_cast<unsigned char>(c))) continue;
    lower.push_back(
        static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  static const Regex* articles = new Regex("\\b(a|an|the)\\b");
  std::istringstream words(articles->Sub(" ", lower));
  std::string out, w;
  while (words >> w) out += (out.empty() ? "" : " ") + w;
  return out;
}

std::optional<std::string> ExtractSearchR1Answer(const std::string& solution) {
  static const Regex* re = new Regex("<answer>(.*?)</answer>", Regex::kDotAll);
  std::vector<std::string> found = re->FindAllStrings(solution);
  if (found.empty()) return std::nullopt;
  return StripWhitespace(found.back());
}

double SearchR1ComputeScore(const std::string& solution,
                            const std::vector<std::string>& targets,
                            double format_score, double score) {
  std::optional<std::string> answer = ExtractSearchR1Answer(solution);
  if (!answer.has_value()) return 0.0;
  const std::string pred = NormalizeQaAnswer(*answer);
  for (const std::string& t : targets) {
    if (NormalizeQaAnswer(t) == pred) {
      if (CountOf(solution, "<answer>") > 10 ||
          CountOf(solution, "</answer>") > 10)
        return score / 4;
      return score;
    }
  }
  return format_score;
}

}  // namespace verl::rl::reward
