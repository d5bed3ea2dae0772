// File: verl/rl/data/synthetic_tasks.h
//
// Built-in synthetic tasks for the embedded default (no downloads). Every
// task writes rows in verl's RL dataset format:
//   {"data_source", "prompt": [{"role","content"}], "ability",
//    "reward_model": {"style": "rule", "ground_truth"}, "extra_info": {...}}
// extra_info carries "question" and "answer" so the same files feed the SFT
// trainer (data.prompt_key=extra_info.question,
// response_key=extra_info.answer).
#ifndef VERL_RL_DATA_SYNTHETIC_TASKS_H_
#define VERL_RL_DATA_SYNTHETIC_TASKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl {

struct ArithmeticTaskOptions {
  int64_t num_rows = 1000;
  uint64_t seed = 0;
  int max_operand = 99;    // operands drawn uniformly from [0, max_operand]
  std::string ops = "+-";  // operators to draw from (subset of "+-*")
  std::string split = "train";
  // With a calculator (the tool quickstart): rows run the tool_agent, the
  // question asks to use the calculator, and extra_info.answer_trajectory is
  // the reference multi-turn answer — a calculator call, its result, the
  // final "#### c" — for the supervised warm start.
  bool calculator = false;
};

// `a op b` questions whose answer is written as "a op b = c\n#### c" (the
// "arithmetic" data_source; scored by the arithmetic rule scorer).
std::vector<nlohmann::json> MakeArithmeticRows(
    const ArithmeticTaskOptions& options);

struct CountdownTaskOptions {
  int64_t num_rows = 1000;
  uint64_t seed = 0;
  int num_numbers = 3;  // numbers given per question
  int max_number = 20;  // numbers drawn from [1, max_number]
  std::string split = "train";
};

// Countdown: reach `target` with the given numbers (each used at most once)
// and + - *. ground_truth = {"target": t, "numbers": [...]}; the reference
// answer is one valid equation in <answer>...</answer>.
std::vector<nlohmann::json> MakeCountdownRows(
    const CountdownTaskOptions& options);

struct MultiplesTaskOptions {
  int64_t num_rows = 1000;
  uint64_t seed = 0;
  int min_k = 3, max_k = 9;              // k drawn from [min_k, max_k]
  int min_answers = 4, max_answers = 6;  // valid answers per prompt
  int min_value = 10, max_value = 99;    // every valid answer in this range
  std::string split = "train";
};

// "Name a multiple of k between lo and hi." with lo = k·j and
// hi = k·(j+m−1), so the m valid answers are lo, lo+k, …, hi (all with the
// same digit count by default, so every answer is equally long). Rewards are
// graded (the "multiples" scorer): r(y) = 0.5 + 0.5·(y−lo)/(hi−lo), and the
// target distribution is p*(y) = r(y)/Σ r (MultiplesTarget). ground_truth =
// {"k", "lo", "hi"}; extra_info.answer is one valid answer drawn uniformly,
// so a supervised warm start sees every answer.
std::vector<nlohmann::json> MakeMultiplesRows(
    const MultiplesTaskOptions& options);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_SYNTHETIC_TASKS_H_
