// File: verl/rl/algos/rollout_correction.h
//
// Rollout correction (verl's algorithm.rollout_correction): importance
// sampling weights between the training policy and the rollout engine's
// policy (token or sequence level, truncated, optionally batch-normalised),
// rejection sampling that removes outlier tokens/sequences from the response
// mask, and off-policy diagnostics. Metrics are prefixed "rollout_corr/".
#ifndef VERL_RL_ALGOS_ROLLOUT_CORRECTION_H_
#define VERL_RL_ALGOS_ROLLOUT_CORRECTION_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace verl::rl {

struct RolloutCorrectionConfig {
  // "" (off), "token" or "sequence".
  std::string rollout_is;
  double rollout_is_threshold = 2.0;
  bool rollout_is_batch_normalize = false;
  // Comma list of rejection modes: token_k1|k2|k3, seq_sum_k1|k2|k3,
  // seq_mean_k1|k2|k3, seq_max_k2|k3 ("" = off).
  std::string rollout_rs;
  // k1 modes bound the ratio: "lower_upper" or one value x ⇒ [1/x, x].
  // k2/k3 modes: a single upper bound on the divergence. Comma list matching
  // rollout_rs entries, or one value used for all.
  std::string rollout_rs_threshold;
  bool bypass_mode = false;
  std::string loss_type = "ppo_clip";  // bypass: ppo_clip | reinforce
};

struct RolloutCorrectionOutput {
  at::Tensor rollout_is_weights;  // [B,T] detached, undefined if IS is off
  at::Tensor response_mask;       // mask after rejection sampling
  std::map<std::string, double> metrics;  // rollout_corr/*
};

// log-ratio λ = old_log_prob − rollout_log_prob (no gradient flows).
// Errors name the bad config key (unknown mode, malformed threshold, k1
// bounds with lower > upper) or an all-zero mask.
absl::StatusOr<RolloutCorrectionOutput> ComputeRolloutCorrection(
    const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob,
    const at::Tensor& response_mask, const RolloutCorrectionConfig& config);

// Off-policy diagnostics (no prefix): training_ppl, training_log_ppl, kl,
// k3_kl, rollout_ppl, rollout_log_ppl, log_ppl_diff, log_ppl_abs_diff,
// log_ppl_diff_max, log_ppl_diff_min, ppl_ratio, chi2_token, chi2_seq.
std::map<std::string, double> ComputeOffPolicyMetrics(
    const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob,
    const at::Tensor& response_mask);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_ROLLOUT_CORRECTION_H_
