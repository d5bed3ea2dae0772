// File: verl/rl/trainer/testing/train_compare_testutil.h
//
// End-to-end trainer tests that compare runs: tools/train started with
// overrides (on one or more processes), and the metrics of two runs
// compared step by step.
#ifndef VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_
#define VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace verl::rl::testing {

// Runs tools/train (a data dependency of the test) with `args`, the file
// logger writing to $TEST_TMPDIR/metrics<name>.jsonl and the output to
// train<name>.log; returns the metrics lines. A non-zero exit is a test
// failure naming the log.
std::vector<nlohmann::json> RunTrain(const std::string& name,
                                     const std::vector<std::string>& args);

// Every numeric metric of `two` (but timing*, perf/ and the per-rank
// global_seqlen/) equals `one`'s to `tol` relative (absolute below 1), for
// `steps` steps; the `required` keys must be present.
void ExpectSameMetrics(const std::vector<nlohmann::json>& one,
                       const std::vector<nlohmann::json>& two,
                       const std::string& what, size_t steps,
                       const std::vector<std::string>& required,
                       double tol = 1e-4);

}  // namespace verl::rl::testing

#endif  // VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_
