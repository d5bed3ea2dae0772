// File: verl/rl/algos/policy_loss.h
//
// Policy-gradient losses (verl's actor.policy_loss.loss_mode) with a string
// registry: vanilla PPO (clip-higher, dual clip), gspo, sapo, gpg, clip_cov,
// kl_cov, geo_mean (GMPO), cispo and bypass_mode. Each returns the scalar loss
// (differentiable w.r.t. log_prob) and metrics with verl's names.
#ifndef VERL_RL_ALGOS_POLICY_LOSS_H_
#define VERL_RL_ALGOS_POLICY_LOSS_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/algos/rollout_correction.h"

namespace verl::rl {

// actor.* / actor.policy_loss.* settings (verl's defaults).
struct PolicyLossConfig {
  double clip_ratio = 0.2;
  std::optional<double> clip_ratio_low;   // falls back to clip_ratio
  std::optional<double> clip_ratio_high;  // falls back to clip_ratio
  double clip_ratio_c = 3.0;              // dual clip, must be > 1
  std::string loss_agg_mode = kTokenMean;
  AggOptions agg;  // global normalisation (dp size, token/sequence counts)
  // clip_cov
  double clip_cov_ratio = 2e-4;
  double clip_cov_lb = 1.0;
  double clip_cov_ub = 5.0;
  uint64_t clip_cov_seed = 0;  // seeds the random choice of clipped tokens
  // kl_cov
  double kl_cov_ratio = 2e-4;
  double ppo_kl_coef = 0.1;
  // sapo
  double tau_pos = 1.0;
  double tau_neg = 1.05;
  // bypass_mode (policy_loss.rollout_correction)
  RolloutCorrectionConfig rollout_correction;

  double low() const { return clip_ratio_low.value_or(clip_ratio); }
  double high() const { return clip_ratio_high.value_or(clip_ratio); }
};

struct PolicyLossInputs {
  at::Tensor old_log_prob;        // [B,T]; bypass_mode: the rollout log-probs
  at::Tensor log_prob;            // [B,T] current policy (requires grad)
  at::Tensor advantages;          // [B,T]
  at::Tensor response_mask;       // [B,T]
  at::Tensor rollout_is_weights;  // optional [B,T], multiplies ℓ
};

struct PolicyLossOutput {
  at::Tensor loss;  // scalar
  std::map<std::string, double> metrics;
};

using PolicyLossFn = std::function<absl::StatusOr<PolicyLossOutput>(
    const PolicyLossInputs&, const PolicyLossConfig&)>;

absl::Status RegisterPolicyLoss(const std::string& name, PolicyLossFn fn);
absl::StatusOr<PolicyLossFn> GetPolicyLoss(const std::string& name);
std::vector<std::string> PolicyLossNames();

// Direct entry points (same semantics as the registered modes).
absl::StatusOr<PolicyLossOutput> ComputePolicyLossVanilla(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossGspo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossSapo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossGpg(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossClipCov(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossKlCov(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossGeoMean(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
absl::StatusOr<PolicyLossOutput> ComputePolicyLossCispo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);
// old_log_prob = rollout log-probs. IS weights / rejection are computed from
// (current logp, detached) vs rollout logp; loss_type ppo_clip → vanilla on
// the rejection-masked tokens without IS weights; reinforce → −A·logp·w.
absl::StatusOr<PolicyLossOutput> ComputePolicyLossBypassMode(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_POLICY_LOSS_H_
