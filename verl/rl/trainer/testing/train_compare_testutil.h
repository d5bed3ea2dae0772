// File: verl/rl/trainer/testing/train_compare_testutil.h
//
// End-to-end trainer tests that compare runs: tools/train started with
// overrides (on one or more processes), and the metrics of two runs
// compared step by step.
#ifndef VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_
#define VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace verl::rl::testing {

// Runs tools/train (a data dependency of the test) with `args`, the file
// logger writing to $TEST_TMPDIR/metrics<name>.jsonl, the rollouts dumped to
// $TEST_TMPDIR/rollouts<name>/<step>.jsonl and the output to
// train<name>.log; returns the metrics lines. A non-zero exit is a test
// failure naming the log. A name already run in this process with the same
// arguments returns that run's lines without training again (the shared
// 1-process baseline).
std::vector<nlohmann::json> RunTrain(const std::string& name,
                                     const std::vector<std::string>& args);

// How many leading steps of the runs `one` and `two` (RunTrain names)
// sampled exactly the same responses. Two runs that agree to rounding can
// still part once a sampled token's uniform draw falls between their
// slightly different cumulative probabilities; from that step on their
// metrics differ legitimately.
size_t StepsWithSameRollouts(const std::string& one, const std::string& two,
                             size_t steps);

// Both runs logged `steps` steps, and every numeric metric of `two` (but
// timing*, perf/ and the per-rank global_seqlen/) equals `one`'s to `tol`
// relative (absolute below 1) for the first `compared_steps` steps (all by
// default); the `required` keys must be present.
void ExpectSameMetrics(const std::vector<nlohmann::json>& one,
                       const std::vector<nlohmann::json>& two,
                       const std::string& what, size_t steps,
                       const std::vector<std::string>& required,
                       double tol = 1e-4, size_t compared_steps = SIZE_MAX);

// ExpectSameMetrics over the leading steps whose rollouts sampled the same
// responses, which must be at least `min_same_steps` (default 2: the second
// rollout follows the first update and weight sync, so a wrong update or
// sync fails); a later step may sample differently once rounding moves a
// token's probability across its uniform draw (seen on some CPUs). On those
// later steps `two`'s rollout log-probs must still equal its actor's
// (training/rollout_probs_diff_max < 1e-3, logged with
// actor_rollout_ref.rollout.calculate_log_probs=true), so the weight sync
// stays checked.
void ExpectSameRuns(const std::vector<nlohmann::json>& one,
                    const std::string& one_name,
                    const std::vector<nlohmann::json>& two,
                    const std::string& two_name, const std::string& what,
                    size_t steps, const std::vector<std::string>& required,
                    size_t min_same_steps = 2, double tol = 1e-4);

}  // namespace verl::rl::testing

#endif  // VERL_RL_TRAINER_TESTING_TRAIN_COMPARE_TESTUTIL_H_
