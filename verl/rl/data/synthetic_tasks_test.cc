#include "verl/rl/data/synthetic_tasks.h"

#include <algorithm>
#include <map>
#include <set>

#include "gtest/gtest.h"

namespace verl::rl {
namespace {

// Evaluates "a op b" with at most one binary operator (for checking rows).
int64_t EvalEquation(const std::string& s);

TEST(SyntheticTasksTest, ArithmeticRowsAreCorrectAndDeterministic) {
  ArithmeticTaskOptions o;
  o.num_rows = 200;
  o.ops = "+-*";
  auto rows = MakeArithmeticRows(o);
  ASSERT_EQ(rows.size(), 200u);
  EXPECT_EQ(rows, MakeArithmeticRows(o));
  o.seed = 1;
  EXPECT_NE(rows, MakeArithmeticRows(o));
  for (const auto& row : rows) {
    const std::string q = row["prompt"][0]["content"];
    const std::string gt = row["reward_model"]["ground_truth"];
    ASSERT_EQ(q.substr(q.size() - 2), "=?");
    EXPECT_EQ(std::to_string(EvalEquation(q.substr(0, q.size() - 2))), gt) << q;
    const std::string answer = row["extra_info"]["answer"];
    EXPECT_EQ(answer.substr(answer.size() - gt.size() - 5), "#### " + gt);
    EXPECT_EQ(row["data_source"], "arithmetic");
    EXPECT_EQ(row["reward_model"]["style"], "rule");
  }
}

TEST(SyntheticTasksTest, CountdownReferenceReachesTarget) {
  CountdownTaskOptions o;
  o.num_rows = 100;
  for (const auto& row : MakeCountdownRows(o)) {
    const auto& gt = row["reward_model"]["ground_truth"];
    ASSERT_EQ(gt["numbers"].size(), 3u);
    // Reference equation is left-to-right with parentheses around products.
    std::string eq = row["extra_info"]["answer"];
    eq = eq.substr(8, eq.size() - 17);  // strip <answer></answer>
    int64_t value = 0;
    char op = '+';
    std::string num;
    for (char c : eq + "+") {
      if (std::isdigit(static_cast<unsigned char>(c))) {
        num += c;
      } else if (c == '+' || c == '-' || c == '*') {
        if (num.empty()) continue;
        int64_t n = std::stoll(num);
        value = op == '+' ? value + n : op == '-' ? value - n : value * n;
        num.clear();
        op = c;
      }
    }
    EXPECT_EQ(value, gt["target"].get<int64_t>()) << eq;
  }
}

TEST(SyntheticTasksTest, MultiplesRowsHaveSeveralValidAnswers) {
  MultiplesTaskOptions o;
  o.num_rows = 500;
  auto rows = MakeMultiplesRows(o);
  ASSERT_EQ(rows.size(), 500u);
  EXPECT_EQ(rows, MakeMultiplesRows(o));
  o.seed = 1;
  EXPECT_NE(rows, MakeMultiplesRows(o));
  std::map<std::string, std::set<int64_t>> answers_seen;
  for (const auto& row : rows) {
    EXPECT_EQ(row["data_source"], "multiples");
    const auto& gt = row["reward_model"]["ground_truth"];
    const int64_t k = gt["k"], lo = gt["lo"], hi = gt["hi"];
    const std::string q = row["prompt"][0]["content"];
    EXPECT_EQ(q, "Name a multiple of " + std::to_string(k) + " between " +
                     std::to_string(lo) + " and " + std::to_string(hi) + ".");
    EXPECT_GE(k, o.min_k);
    EXPECT_LE(k, o.max_k);
    // Valid answers counted independently of the generator's construction.
    int valid = 0;
    for (int64_t y = lo; y <= hi; ++y) valid += y % k == 0;
    EXPECT_GE(valid, o.min_answers) << q;
    EXPECT_LE(valid, o.max_answers) << q;
    EXPECT_EQ(lo % k, 0);
    EXPECT_EQ(hi % k, 0);
    EXPECT_GE(lo, o.min_value);
    EXPECT_LE(hi, o.max_value);
    const int64_t answer =
        std::stoll(row["extra_info"]["answer"].get<std::string>());
    EXPECT_EQ(answer % k, 0) << q;
    EXPECT_GE(answer, lo);
    EXPECT_LE(answer, hi);
    EXPECT_EQ(row["extra_info"]["answer"], std::to_string(answer));
    answers_seen[q].insert(answer);
  }
  // The warm-start answer is drawn uniformly: repeated prompts show several.
  size_t most = 0;
  for (const auto& [q, a] : answers_seen) most = std::max(most, a.size());
  EXPECT_GE(most, 3u);
  // No prompt fits: no rows rather than a loop.
  o.min_value = 90;
  o.max_value = 95;
  EXPECT_TRUE(MakeMultiplesRows(o).empty());
}

int64_t EvalEquation(const std::string& s) {
  size_t pos = s.find_first_of("+-*", 1);
  int64_t a = std::stoll(s.substr(0, pos)), b = std::stoll(s.substr(pos + 1));
  switch (s[pos]) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    default:
      return a * b;
  }
}

}  // namespace
}  // namespace verl::rl
