#include "verl/rl/data/synthetic_tasks.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"

namespace verl::rl {
namespace {

nlohmann::json MakeRow(const std::string& data_source,
                       const std::string& ability, const std::string& question,
                       const std::string& answer, nlohmann::json ground_truth,
                       const std::string& split, int64_t index) {
  return {
      {"data_source", data_source},
      {"prompt",
       nlohmann::json::array({{{"role", "user"}, {"content", question}}})},
      {"ability", ability},
      {"reward_model",
       {{"style", "rule"}, {"ground_truth", std::move(ground_truth)}}},
      {"extra_info",
       {{"split", split},
        {"index", index},
        {"question", question},
        {"answer", answer}}},
  };
}

int64_t Apply(int64_t a, char op, int64_t b) {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    default:
      return a * b;
  }
}

}  // namespace

std::vector<nlohmann::json> MakeArithmeticRows(
    const ArithmeticTaskOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int> operand(0, options.max_operand);
  std::uniform_int_distribution<size_t> pick_op(0, options.ops.size() - 1);
  std::vector<nlohmann::json> rows;
  rows.reserve(options.num_rows);
  for (int64_t i = 0; i < options.num_rows; ++i) {
    const int64_t a = operand(rng), b = operand(rng);
    const char op = options.ops[pick_op(rng)];
    const int64_t c = Apply(a, op, b);
    const std::string expr = absl::StrCat(a, std::string(1, op), b);
    const std::string question = options.calculator
                                     ? absl::StrCat("calculator: ", expr, "=?")
                                     : absl::StrCat(expr, "=?");
    const std::string answer = absl::StrCat(expr, "=", c, "\n#### ", c);
    nlohmann::json row = MakeRow("arithmetic", "math", question, answer,
                                 absl::StrCat(c), options.split, i);
    if (options.calculator) {
      row["agent_name"] = "tool_agent";
      const std::string call = absl::StrCat(
          "<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
          "{\"expression\": \"",
          expr, "\"}}\n</tool_call>");
      row["extra_info"]["answer_trajectory"] = nlohmann::json::array(
          {{{"role", "assistant"}, {"content", call}},
           {{"role", "tool"}, {"content", absl::StrCat(c)}},
           {{"role", "assistant"}, {"content", absl::StrCat("#### ", c)}}});
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

std::vector<nlohmann::json> MakeCountdownRows(
    const CountdownTaskOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<int> number(1, options.max_number);
  std::uniform_int_distribution<int> pick_op(0, 2);
  static constexpr char kOps[] = {'+', '-', '*'};
  std::vector<nlohmann::json> rows;
  rows.reserve(options.num_rows);
  for (int64_t i = 0; i < options.num_rows; ++i) {
    std::vector<int64_t> numbers(options.num_numbers);
    for (auto& n : numbers) n = number(rng);
    // The target is a left-to-right evaluation of all numbers with random
    // operators, so every question has at least that solution.
    int64_t target = numbers[0];
    std::string equation = absl::StrCat(numbers[0]);
    for (int k = 1; k < options.num_numbers; ++k) {
      const char op = kOps[pick_op(rng)];
      if (op == '*') equation = absl::StrCat("(", equation, ")");
      target = Apply(target, op, numbers[k]);
      absl::StrAppend(&equation, std::string(1, op), numbers[k]);
    }
    std::string listed;
    for (size_t k = 0; k < numbers.size(); ++k) {
      absl::StrAppend(&listed, k ? " " : "", numbers[k]);
    }
    const std::string question = absl::StrCat("Use ", listed, " to make ",
                                              target, " with + - * and ( ).");
    const std::string answer = absl::StrCat("<answer>", equation, "</answer>");
    rows.push_back(MakeRow("countdown", "math", question, answer,
                           {{"target", target}, {"numbers", numbers}},
                           options.split, i));
  }
  return rows;
}

std::vector<nlohmann::json> MakeMultiplesRows(
    const MultiplesTaskOptions& options) {
  // Every (k, m, j) with m answers k·j … k·(j+m−1) inside the value range.
  struct Prompt {
    int k, m, j;
  };
  std::vector<Prompt> prompts;
  for (int k = std::max(1, options.min_k); k <= options.max_k; ++k) {
    for (int m = std::max(1, options.min_answers); m <= options.max_answers;
         ++m) {
      for (int j = 1; k * (j + m - 1) <= options.max_value; ++j) {
        if (k * j >= options.min_value) prompts.push_back({k, m, j});
      }
    }
  }
  std::vector<nlohmann::json> rows;
  if (prompts.empty()) return rows;
  std::mt19937_64 rng(options.seed);
  std::uniform_int_distribution<size_t> pick(0, prompts.size() - 1);
  rows.reserve(options.num_rows);
  for (int64_t i = 0; i < options.num_rows; ++i) {
    const Prompt& p = prompts[pick(rng)];
    const int lo = p.k * p.j, hi = p.k * (p.j + p.m - 1);
    const int answer =
        lo + p.k * std::uniform_int_distribution<int>(0, p.m - 1)(rng);
    const std::string question = absl::StrCat(
        "Name a multiple of ", p.k, " between ", lo, " and ", hi, ".");
    rows.push_back(MakeRow("multiples", "math", question, absl::StrCat(answer),
                           {{"k", p.k}, {"lo", lo}, {"hi", hi}}, options.split,
                           i));
  }
  return rows;
}

}  // namespace verl::rl
