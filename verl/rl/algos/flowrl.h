// File: verl/rl/algos/flowrl.h
//
// FlowRL (Zhu et al., "FlowRL: Matching Reward Distributions for LLM
// Reasoning", ICLR 2026; verl's recipe/flowrl): instead of maximizing the
// reward, match the policy to the reward-shaped distribution
// π*(y|x) ∝ π_ref(y|x)·exp(β·r̂(x,y)) through the trajectory-balance residual
//   δ = log Z(x) + (1/|y|) log π_θ(y|x) − β·r̂(x,y) − (1/|y|) log π_ref(y|x)
// with a learned log-partition head Z(x) and loss mean_i w_i·δ_i², w the
// detached sequence importance ratio π_θ/π_old, clipped per the recipe's
// variant. r̂ is the group-centred reward (the recipe's "flowrl" advantage
// estimator: score minus the group mean, no std division).
#ifndef VERL_RL_ALGOS_FLOWRL_H_
#define VERL_RL_ALGOS_FLOWRL_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/rl/algos/agg_loss.h"

namespace verl::rl {

struct FlowRlConfig {
  double tb_coef = 15.0;  // β (algorithm.tb_coef)
  // The recipe's FLOWRL_LOSS_VARIANT: "vanilla" (w unclipped), "flowrl_clip"
  // (w clipped to [1 − clip_low, 1 + clip_high]), "flowrl_clip_tis" (w ≤ 10,
  // times the truncated sequence ratio π_old/π_rollout ≤ tis_imp_ratio_cap).
  std::string variant = "flowrl_clip";
  double clip_low = 0.2;
  double clip_high = 0.28;
  double tis_imp_ratio_cap = 0.0;  // > 0 enables TIS in flowrl_clip_tis
};

// OK iff `variant` is one of the three; the error names the key.
absl::Status ValidateFlowRlVariant(const std::string& variant);

struct FlowRlInputs {
  at::Tensor log_prob;           // [B,T] current policy (differentiable)
  at::Tensor old_log_prob;       // [B,T]
  at::Tensor ref_log_prob;       // [B,T]
  at::Tensor log_z;              // [B] (differentiable)
  at::Tensor advantages;         // [B,T] r̂ broadcast over the response
  at::Tensor response_mask;      // [B,T]
  at::Tensor rollout_log_probs;  // [B,T], only for flowrl_clip_tis
};

struct FlowRlOutput {
  at::Tensor loss;  // Σ_i w_i δ_i² / N_seq·dp (mean over the global batch)
  // The recipe's metric names (actor/log_z, actor/final_loss,
  // actor/importance_weight[_raw], actor/ppo_kl, actor/ref_kl,
  // actor/log_prob, actor/old_log_prob, actor/ref_log_prob,
  // actor/log_reward) plus actor/tb_residual (mean δ) and
  // actor/tb_residual_abs (mean |δ|).
  std::map<std::string, double> metrics;
};

// `agg.global_batch_size` (sequences in the mini-batch over all ranks) and
// `agg.dp_size` normalise as the recipe's mean over the mini-batch; without
// them the mean is over these rows.
absl::StatusOr<FlowRlOutput> ComputeFlowRlLoss(const FlowRlInputs& in,
                                               const FlowRlConfig& config,
                                               const AggOptions& agg = {});

// The recipe's compute_flowrl_outcome_advantage: score = Σ_t rewards, minus
// the mean of its group (0 for a group of one), broadcast over the mask.
at::Tensor ComputeFlowRlOutcomeAdvantage(const at::Tensor& token_level_rewards,
                                         const at::Tensor& response_mask,
                                         const std::vector<std::string>& index);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_FLOWRL_H_
