// File: verl/rl/rewards/reward_score/math_dapo.cc
#include "verl/rl/rewards/reward_score/math_dapo.h"

#include <cctype>
#include <optional>
#include <utility>
#include <vector>

#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;
namespace {

const std::vector<std::pair<std::string, std::string>>& Substitutions() {
  static const auto* subs =
      new std::vector<std::pair<std::string, std::string>>{
          {"an ", ""},          {"a ", ""},
          {".$", "$"},          {"\\$", ""},
          {"\\ ", ""},          {" ", ""},
          {"mbox", "text"},     {",\\text{and}", ","},
          {"\\text{and}", ","}, {"\\text{m}", "\\text{}"}};
  return *subs;
}

const std::vector<std::string>& RemovedExpressions() {
  static const auto* removed = new std::vector<std::string>{"square",
                                                            "ways",
                                                            "integers",
                                                            "dollars",
                                                            "mph",
                                                            "inches",
                                                            "hours",
                                                            "km",
                                                            "units",
                                                            "\\ldots",
                                                            "sue",
                                                            "points",
                                                            "feet",
                                                            "minutes",
                                                            "digits",
                                                            "cents",
                                                            "degrees",
                                                            "cm",
                                                            "gm",
                                                            "pounds",
                                                            "meters",
                                                            "meals",
                                                            "edges",
                                                            "students",
                                                            "childrentickets",
                                                            "multiples",
                                                            "\\text{s}",
                                                            "\\text{.}",
                                                            "\\text{\ns}",
                                                            "\\text{}^2",
                                                            "\\text{}^3",
                                                            "\\text{\n}",
                                                            "\\text{}",
                                                            "\\mathrm{th}",
                                                            "^\\circ",
                                                            "^{\\circ}",
                                                            "\\;",
                                                            ",\\!",
                                                            "{,}",
                                                            "\"",
                                                            "\\dots"};
  return *removed;
}

bool IsAllDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// math_dapo's own last_boxed_only_string: last "\boxed{" brace-matched.
std::optional<std::string> LastBoxedBrace(const std::string& s) {
  const size_t idx = s.rfind("\\boxed{");
  if (idx == std::string::npos) return std::nullopt;
  int open = 0;
  for (size_t i = idx; i < s.size(); ++i) {
    if (s[i] == '{') ++open;
    if (s[i] == '}' && --open == 0) return s.substr(idx, i - idx + 1);
  }
  return std::nullopt;
}

}  // namespace

std::string NormalizeFinalAnswer(const std::string& final_answer) {
  std::string s = final_answer;
  const size_t eq = s.rfind('=');
  if (eq != std::string::npos) s = s.substr(eq + 1);
  for (const auto& [before, after] : Substitutions())
    s = ReplaceAll(s, before, after);
  for (const std::string& expr : RemovedExpressions())
    s = ReplaceAll(s, expr, "");
  static const Regex* dollars = new Regex("(.*?)(\\$)(.*?)(\\$)(.*)");
  static const Regex* text = new Regex("(\\\\text\\{)(.*?)(\\})");
  static const Regex* textbf = new Regex("(\\\\textbf\\{)(.*?)(\\})");
  static const Regex* overline = new Regex("(\\\\overline\\{)(.*?)(\\})");
  static const Regex* boxed = new Regex("(\\\\boxed\\{)(.*)(\\})");
  static const Regex* frac = new Regex("(frac)([^{])(.)");
  static const Regex* sqrt = new Regex("(sqrt)([^{])");
  s = dollars->Sub("$\\3$", s);
  s = text->Sub("\\2", s);
  s = textbf->Sub("\\2", s);
  s = overline->Sub("\\2", s);
  s = boxed->Sub("\\2", s);
  s = frac->Sub("frac{\\2}{\\3}", s);
  s = sqrt->Sub("sqrt{\\2}", s);
  s = ReplaceAll(s, "$", "");
  if (IsAllDigits(ReplaceAll(s, ",", ""))) s = ReplaceAll(s, ",", "");
  return StripWhitespace(s);
}

MathDapoResult MathDapoComputeScore(const std::string& solution,
                                    const std::string& ground_truth,
                                    bool strict_box_verify) {
  const std::string text = LastChars(solution, 300);
  MathDapoResult r;
  if (strict_box_verify) {
    std::optional<std::string> boxed = LastBoxedBrace(LastChars(text, 100));
    r.pred = "[INVALID]";
    if (boxed.has_value()) {
      r.pred = boxed->substr(7, boxed->size() - 8);
    }
    r.acc = r.pred == ground_truth;
  } else {
    static const Regex* answer =
        new Regex("Answer\\s*:\\s*([^\\n]+)", Regex::kIgnoreCase);
    std::vector<std::string> found = answer->FindAllStrings(text);
    r.pred = NormalizeFinalAnswer(found.empty() ? "[INVALID]" : found.back());
    r.acc = r.pred == NormalizeFinalAnswer(ground_truth);
  }
  r.score = r.acc ? 1.0 : -1.0;
  return r;
}

}  // namespace verl::rl::reward
