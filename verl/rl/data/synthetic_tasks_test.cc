#include "verl/rl/data/synthetic_tasks.h"

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
