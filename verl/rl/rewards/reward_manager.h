// File: verl/rl/rewards/reward_manager.h
//
// Reward managers (verl's reward_model.reward_manager): turn decoded
// trajectories into the [B,T] token-level score tensor (score at the last
// valid response token, index valid_len − 1; −1 wraps to the last column as
// in verl) plus reward_extra_info lists.
//   naive: per-sample compute_score; dict-like results log every key.
//   batch: one call over the whole batch (e.g. the external command hook).
//   dapo:  naive + strip a trailing EOS string + overlong buffer penalty
//          (+ overlong_reward / overlong infos when `overlong_log`); float
//          results are also logged as `acc`.
#ifndef VERL_RL_REWARDS_REWARD_MANAGER_H_
#define VERL_RL_REWARDS_REWARD_MANAGER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/rewards/reward_score/default_compute_score.h"
#include "verl/rl/rewards/reward_score/external_scorer.h"

namespace verl::rl {

// One trajectory: decoded response (special tokens skipped) and its length.
struct RewardRequest {
  reward::ScoreRequest sample;
  int64_t valid_response_length = 0;
};

using ComputeScoreFn = std::function<absl::StatusOr<reward::RewardResult>(
    const reward::ScoreRequest&)>;
using BatchComputeScoreFn =
    std::function<absl::StatusOr<std::vector<reward::RewardResult>>(
        const std::vector<reward::ScoreRequest>&)>;

struct RewardManagerConfig {
  std::string name = "naive";  // naive | batch | dapo
  // dapo (reward_kwargs.overlong_buffer_cfg.* and max_resp_len)
  bool overlong_buffer_enable = false;
  int64_t overlong_buffer_len = 0;
  double overlong_penalty_factor = 1.0;
  bool overlong_log = false;
  int64_t max_resp_len = 0;
  std::string eos_text;  // stripped from the end of responses (dapo)
};

struct RewardOutput {
  at::Tensor reward_tensor;  // [B,T] float32
  // reward_extra_info, one entry per sample (NaN / "" where a sample's
  // scorer did not report the key).
  std::map<std::string, std::vector<double>> extra_numeric;
  std::map<std::string, std::vector<std::string>> extra_text;
};

// verl's default_compute_score as a ComputeScoreFn.
ComputeScoreFn DefaultScoreFn();
// Adapts an external command (RunExternalScorer) for the batch manager.
BatchComputeScoreFn ExternalCommandScoreFn(const std::string& command,
                                           double timeout_s);

class RewardManager {
 public:
  // naive/dapo use `fn`; batch uses `batch_fn` (or loops `fn` if unset).
  static absl::StatusOr<std::unique_ptr<RewardManager>> Create(
      const RewardManagerConfig& config, ComputeScoreFn fn = DefaultScoreFn(),
      BatchComputeScoreFn batch_fn = nullptr);

  absl::StatusOr<RewardOutput> Score(const std::vector<RewardRequest>& batch,
                                     int64_t response_length) const;

 private:
  RewardManager(RewardManagerConfig config, ComputeScoreFn fn,
                BatchComputeScoreFn batch_fn)
      : config_(std::move(config)),
        fn_(std::move(fn)),
        batch_fn_(std::move(batch_fn)) {}

  RewardManagerConfig config_;
  ComputeScoreFn fn_;
  BatchComputeScoreFn batch_fn_;
};

}  // namespace verl::rl

#endif  // VERL_RL_REWARDS_REWARD_MANAGER_H_
