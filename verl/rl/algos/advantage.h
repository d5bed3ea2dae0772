// File: verl/rl/algos/advantage.h
//
// Advantage estimators (verl's `algorithm.adv_estimator`) with a string
// registry so users can add their own. Every estimator returns advantages and
// returns of shape [B,T]. Outcome estimators group trajectories by their `uid`
// strings (`index`), never by position.
#ifndef VERL_RL_ALGOS_ADVANTAGE_H_
#define VERL_RL_ALGOS_ADVANTAGE_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace verl::rl {

// Tensors not needed by an estimator may be left undefined (at::Tensor()).
struct AdvantageInputs {
  at::Tensor token_level_rewards;  // [B,T]
  at::Tensor response_mask;        // [B,T], 1 = trained token
  std::vector<std::string> index;  // uid per row (group estimators)
  at::Tensor values;               // [B,T] critic values (gae)
  at::Tensor reward_baselines;     // [B] greedy-rollout reward (remax)
  at::Tensor old_log_prob;         // [B,T] (optimal_token_baseline)
  at::Tensor sum_pi_squared;       // [B,T] Σπ² per position (OTB)
  at::Tensor rollout_is_weights;   // [B,T] rollout IS weights (OTB)
};

// algorithm.* settings the estimators read (verl's defaults).
struct AdvantageConfig {
  double gamma = 1.0;
  double lam = 1.0;
  bool norm_adv_by_std_in_grpo = true;
  // OTB zero-tail handling; unset = estimator default (false for
  // optimal_token_baseline, true for tir_optimal_token_baseline).
  std::optional<bool> handle_zero_tail;
  // GPG's f_norm divisor (verl's compute_gpg_outcome_advantage argument;
  // verl's trainer passes no algorithm key for it, so 1.0 there).
  double gpg_f_norm = 1.0;
};

struct AdvantageOutput {
  at::Tensor advantages;  // [B,T]
  at::Tensor returns;     // [B,T]
};

using AdvantageEstimatorFn = std::function<absl::StatusOr<AdvantageOutput>(
    const AdvantageInputs&, const AdvantageConfig&)>;

// Registers `fn` under `name`; error if the name is taken. The built-in
// estimators are registered before the first lookup.
absl::Status RegisterAdvantageEstimator(const std::string& name,
                                        AdvantageEstimatorFn fn);
// The estimator for `name`, or NotFound naming the known estimators.
absl::StatusOr<AdvantageEstimatorFn> GetAdvantageEstimator(
    const std::string& name);
// Sorted registered names.
std::vector<std::string> AdvantageEstimatorNames();
// Looks up `name` and runs it.
absl::StatusOr<AdvantageOutput> ComputeAdvantage(const std::string& name,
                                                 const AdvantageInputs& in,
                                                 const AdvantageConfig& cfg);

// verl's utils/groupwise.group_mean_std: per-group mean, std and count of
// `scores` [N] by dense group ids `gidx` [N] (0..G−1); std =
// sqrt(max(unbiased var, eps)); singleton groups get mean 0, std 1.
// Computed in the dtype of `scores` (verl: float32).
struct GroupStats {
  at::Tensor mean;   // [G]
  at::Tensor std;    // [G]
  at::Tensor count;  // [G]
};
GroupStats GroupMeanStd(const at::Tensor& scores, const at::Tensor& gidx,
                        double eps = 1e-6);

// Row indices grouped by uid, groups in order of first appearance.
std::vector<std::vector<int64_t>> GroupIndicesByUid(
    const std::vector<std::string>& index);

// ---- Built-in estimators (also callable directly). ----
// GAE with masked carry-through, then masked whitening of advantages.
// Whitening errors (InvalidArgument) when the batch has < 2 valid tokens.
absl::StatusOr<AdvantageOutput> ComputeGaeAdvantageReturn(
    const at::Tensor& rewards, const at::Tensor& values,
    const at::Tensor& response_mask, double gamma, double lam);
// (s − μ_G)/(σ_G + eps) (unbiased σ) or s − μ_G; singleton: μ=0, σ=1.
AdvantageOutput ComputeGrpoOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon = 1e-6);
// Same via scatter sums; variance floored at eps before sqrt.
AdvantageOutput ComputeGrpoVectorizedOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon = 1e-6);
// Only each group's best response gets r_max − r_2nd (÷(σ+eps) if norm).
// Groups of size < 2 are an error. Ties go to the first row of the group.
absl::StatusOr<AdvantageOutput> ComputeGrpoPasskOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon = 1e-6);
// Leave-one-out: s_i − mean_{j≠i} s_j; singleton keeps s_i.
AdvantageOutput ComputeRlooOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index);
// (n·s_i − Σ_G s)/max(n−1,1)·[n>1]; singleton gives 0.
AdvantageOutput ComputeRlooVectorizedOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index);
// Discounted returns with reset at padding, whitened over the batch (error
// when the batch has < 2 valid tokens, as GAE).
absl::StatusOr<AdvantageOutput> ComputeReinforcePlusPlusOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask, double gamma);
// s_i − μ_G tiled over T, whitened over the batch (same error).
absl::StatusOr<AdvantageOutput>
ComputeReinforcePlusPlusBaselineOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index);
// Reverse-cumsum returns minus the greedy baseline b·m.
AdvantageOutput ComputeRemaxOutcomeAdvantage(const at::Tensor& rewards,
                                             const at::Tensor& reward_baselines,
                                             const at::Tensor& response_mask);
// Length-weighted group baseline Σ len·s / Σ len (singleton 0).
AdvantageOutput ComputeOpoOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index);
// α·(s − μ_G)/f_norm with α = B / max(#nonzero scores, 1).
AdvantageOutput ComputeGpgOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, double f_norm = 1.0);
// Optimal token baseline (per group and position, weighted by W_t).
AdvantageOutput ComputeOptimalTokenBaselineAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const at::Tensor& old_log_prob, const at::Tensor& sum_pi_squared,
    const std::vector<std::string>& index, const at::Tensor& rollout_is_weights,
    bool handle_zero_tail, double epsilon = 1e-8);
// OTB over compacted valid tokens (k-th trained token), scattered back.
// Returns are (r·m) reverse-cumsum over the whole grid (masked tool tokens
// inside a response carry the reward-to-go, as verl); zero-length responses
// are left out of their group's statistics.
AdvantageOutput ComputeMultiTurnOptimalTokenBaselineAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const at::Tensor& old_log_prob, const at::Tensor& sum_pi_squared,
    const std::vector<std::string>& index, const at::Tensor& rollout_is_weights,
    bool handle_zero_tail, double epsilon = 1e-8);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_ADVANTAGE_H_
