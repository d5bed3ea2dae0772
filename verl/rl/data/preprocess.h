// File: verl/rl/data/preprocess.h
//
// verl's dataset preprocessors (examples/data_preprocess/*.py) for users who
// hold the public raw files: one raw record in, one verl RL row out, with
// verl's instruction suffix, ground truth and extra_info, so the rows equal
// the ones verl's scripts write. Errors name the record index and what is
// missing; verl's scripts assert (and stop) on the same records.
#ifndef VERL_RL_DATA_PREPROCESS_H_
#define VERL_RL_DATA_PREPROCESS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl {

// gsm8k.py: {"question", "answer"} → prompt = question + " Let's think step
// by step and output the final answer after \"####\".", ground truth = the
// number after "#### " with commas removed, extra_info {split, index,
// answer, question} (raw question).
absl::StatusOr<nlohmann::json> ConvertGsm8kRecord(const nlohmann::json& record,
                                                  const std::string& split,
                                                  int64_t index);

// math_dataset.py (DigitalLearningGmbH/MATH-lighteval): {"problem",
// "solution", ...} → prompt = problem + " Let's think step by step and output
// the final answer within \boxed{}.", ground truth = the last \boxed{...} of
// the solution, unboxed; extra_info {split, index}. Other fields of the
// record (lighteval's "level" and "type") stay as columns, as the datasets
// map in verl's script keeps them.
absl::StatusOr<nlohmann::json> ConvertMathRecord(const nlohmann::json& record,
                                                 const std::string& split,
                                                 int64_t index);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_PREPROCESS_H_
