// File: verl/rl/rewards/reward_score/countdown.cc
#include "verl/rl/rewards/reward_score/countdown.h"

#include <cctype>
#include <cmath>
#include <map>

#include "verl/core/regex.h"
#include "verl/rl/rewards/reward_score/text_util.h"

namespace verl::rl::reward {

using ::verl::core::Regex;
namespace {

// expr := term (('+'|'-') term)*; term := factor (('*'|'/') factor)*;
// factor := ('+'|'-') factor | number | '(' expr ')'.
class Parser {
 public:
  explicit Parser(const std::string& s) : s_(s) {}
  std::optional<double> Parse() {
    std::optional<double> v = Expr();
    Skip();
    if (!v.has_value() || pos_ != s_.size()) return std::nullopt;
    return v;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::optional<double> Expr() {
    std::optional<double> v = Term();
    while (v.has_value()) {
      if (Eat('+')) {
        std::optional<double> r = Term();
        if (!r) return std::nullopt;
        *v += *r;
      } else if (Eat('-')) {
        std::optional<double> r = Term();
        if (!r) return std::nullopt;
        *v -= *r;
      } else {
        break;
      }
    }
    return v;
  }
  std::optional<double> Term() {
    std::optional<double> v = Factor();
    while (v.has_value()) {
      if (Eat('*')) {
        std::optional<double> r = Factor();
        if (!r) return std::nullopt;
        *v *= *r;
      } else if (Eat('/')) {
        std::optional<double> r = Factor();
        if (!r || *r == 0.0) return std::nullopt;
        *v /= *r;
      } else {
        break;
      }
    }
    return v;
  }
  std::optional<double> Factor() {
    if (++depth_ > 200) return std::nullopt;
    std::optional<double> out;
    if (Eat('-')) {
      out = Factor();
      if (out) *out = -*out;
    } else if (Eat('+')) {
      out = Factor();
    } else if (Eat('(')) {
      out = Expr();
      if (!Eat(')')) out.reset();
    } else {
      Skip();
      const size_t start = pos_;
      while (pos_ < s_.size() && isdigit(static_cast<unsigned char>(s_[pos_])))
        ++pos_;
      if (pos_ > start && pos_ - start <= 15)
        out = std::stod(s_.substr(start, pos_ - start));
    }
    --depth_;
    return out;
  }
  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

bool IsEquationText(const std::string& s) {
  bool digit = false;
  for (char c : s) {
    if (isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else if (std::string("+-*/() ").find(c) == std::string::npos) {
      return false;
    }
  }
  return digit;
}

}  // namespace

std::optional<std::string> ExtractCountdownEquation(
    const std::string& response) {
  static const Regex* re = new Regex("<answer>(.*?)</answer>", Regex::kDotAll);
  std::vector<std::string> found = re->FindAllStrings(response);
  std::string eq;
  if (!found.empty()) {
    eq = StripWhitespace(found.back());
  } else {
    size_t end = response.size();
    while (true) {
      const size_t nl =
          end == 0 ? std::string::npos : response.rfind('\n', end - 1);
      const size_t b = nl == std::string::npos ? 0 : nl + 1;
      eq = StripWhitespace(response.substr(b, end - b));
      if (!eq.empty() || nl == std::string::npos) break;
      end = nl;
    }
  }
  // "expr = value": the expression is what gets checked.
  const size_t eqpos = eq.find('=');
  if (eqpos != std::string::npos) eq = StripWhitespace(eq.substr(0, eqpos));
  if (eq.empty()) return std::nullopt;
  // A last line that is not an equation is prose, not an answer.
  if (found.empty() && !IsEquationText(eq)) return std::nullopt;
  return eq;
}

std::optional<double> EvaluateArithmetic(const std::string& expression) {
  if (!IsEquationText(expression)) return std::nullopt;
  return Parser(expression).Parse();
}

bool UsesAvailableNumbers(const std::string& equation,
                          const std::vector<int64_t>& numbers) {
  std::map<int64_t, int> left;
  for (int64_t n : numbers) ++left[n];
  static const Regex* digits = new Regex("\\d+");
  for (const std::string& lit : digits->FindAllStrings(equation)) {
    if (lit.size() > 15) return false;
    if (--left[std::stoll(lit)] < 0) return false;
  }
  return true;
}

double CountdownComputeScore(const std::string& response, int64_t target,
                             const std::vector<int64_t>& numbers,
                             double format_score, double score) {
  std::optional<std::string> eq = ExtractCountdownEquation(response);
  if (!eq.has_value()) return 0.0;
  if (!UsesAvailableNumbers(*eq, numbers)) return format_score;
  std::optional<double> value = EvaluateArithmetic(*eq);
  if (!value.has_value()) return format_score;
  return std::fabs(*value - static_cast<double>(target)) < 1e-5 ? score
                                                                : format_score;
}

}  // namespace verl::rl::reward
