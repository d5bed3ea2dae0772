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

}  // namespace verl::rl

#endif  // VERL_RL_DATA_SYNTHETIC_TASKS_H_
