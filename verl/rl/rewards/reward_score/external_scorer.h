// File: verl/rl/rewards/reward_score/external_scorer.h
//
// Custom scorer hook in any language: runs `/bin/sh -c command` once per
// batch, writes one JSON line per sample to its stdin
//   {"data_source": ..., "solution_str": ..., "ground_truth": ...,
//    "extra_info": ...}
// and reads one line per sample from its stdout: a JSON number (the score)
// or an object with "score" plus extra infos (numbers/bools → numeric,
// strings → text). The process group is killed after `timeout_s`.
// Errors name the command: timeout, non-zero exit, wrong line count, a line
// that is not a score.
#ifndef VERL_RL_REWARDS_REWARD_SCORE_EXTERNAL_SCORER_H_
#define VERL_RL_REWARDS_REWARD_SCORE_EXTERNAL_SCORER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/rl/rewards/reward_score/default_compute_score.h"

namespace verl::rl::reward {

struct ScoreRequest {
  std::string data_source;
  std::string solution;
  nlohmann::json ground_truth;
  nlohmann::json extra_info = nlohmann::json::object();
};

absl::StatusOr<std::vector<RewardResult>> RunExternalScorer(
    const std::string& command, const std::vector<ScoreRequest>& requests,
    double timeout_s = 300.0);

// Parses one output line (number or {"score": ...}).
absl::StatusOr<RewardResult> ParseScoreLine(const std::string& line);

}  // namespace verl::rl::reward

#endif  // VERL_RL_REWARDS_REWARD_SCORE_EXTERNAL_SCORER_H_
