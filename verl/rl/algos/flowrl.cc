// File: verl/rl/algos/flowrl.cc
#include "verl/rl/algos/flowrl.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/zeros.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

double Item(const at::Tensor& t) { return t.detach().item<double>(); }

}  // namespace

absl::Status ValidateFlowRlVariant(const std::string& variant) {
  if (variant == "vanilla" || variant == "flowrl_clip" ||
      variant == "flowrl_clip_tis") {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "actor_rollout_ref.actor.policy_loss.flowrl_variant: unknown value '",
      variant, "' (expected vanilla, flowrl_clip or flowrl_clip_tis)"));
}

absl::StatusOr<FlowRlOutput> ComputeFlowRlLoss(const FlowRlInputs& in,
                                               const FlowRlConfig& config,
                                               const AggOptions& agg) {
  absl::Status valid = ValidateFlowRlVariant(config.variant);
  if (!valid.ok()) return valid;
  if (!in.ref_log_prob.defined()) {
    return absl::InvalidArgumentError(
        "FlowRL needs the reference policy's log-probs (ref_log_prob)");
  }
  const at::Tensor& mask = in.response_mask;
  const at::Tensor log_z = in.log_z.reshape({-1});
  const at::Tensor avg_log_prob = MaskedMean(in.log_prob, mask, 1);
  const at::Tensor avg_ref = MaskedMean(in.ref_log_prob, mask, 1);
  const at::Tensor seq_reward = MaskedMean(in.advantages, mask, 1);
  const at::Tensor delta =
      log_z + avg_log_prob - config.tb_coef * seq_reward - avg_ref;
  const at::Tensor log_w = MaskedSum(in.log_prob - in.old_log_prob, mask, 1);
  const at::Tensor w_raw = at::exp(log_w).detach();
  at::Tensor w = w_raw;
  if (config.variant == "flowrl_clip") {
    w = w_raw.clamp(1.0 - config.clip_low, 1.0 + config.clip_high);
  } else if (config.variant == "flowrl_clip_tis") {
    w = w_raw.clamp_max(10.0);
    if (config.tis_imp_ratio_cap > 0) {
      if (!in.rollout_log_probs.defined()) {
        return absl::InvalidArgumentError(
            "flowrl_clip_tis with tis_imp_ratio_cap > 0 needs the rollout's "
            "log-probs (actor_rollout_ref.rollout.calculate_log_probs=true)");
      }
      const at::Tensor w_tis =
          at::exp(MaskedSum(in.old_log_prob - in.rollout_log_probs, mask, 1))
              .detach()
              .clamp_max(config.tis_imp_ratio_cap);
      w = w * w_tis;
    }
  }
  const at::Tensor weighted = w * delta * delta;
  const double rows = static_cast<double>(weighted.size(0));
  const double denom = agg.global_batch_size.value_or(rows);
  FlowRlOutput out;
  out.loss = weighted.sum() / denom * agg.dp_size;
  auto& m = out.metrics;
  m["actor/log_prob"] = Item(MaskedMean(in.log_prob, mask));
  m["actor/old_log_prob"] = Item(MaskedMean(in.old_log_prob, mask));
  m["actor/ref_log_prob"] = Item(MaskedMean(in.ref_log_prob, mask));
  m["actor/log_z"] = Item(log_z.mean());
  m["actor/log_reward"] = Item(MaskedMean(in.advantages, mask));
  m["actor/final_loss"] = Item(weighted.mean());
  m["actor/importance_weight"] = Item(w.mean());
  if (config.variant != "vanilla") {
    m["actor/importance_weight_raw"] = Item(w_raw.mean());
  }
  m["actor/ppo_kl"] = Item(MaskedMean(in.old_log_prob - in.log_prob, mask));
  m["actor/ref_kl"] = Item(MaskedMean(in.ref_log_prob - in.log_prob, mask));
  m["actor/tb_residual"] = Item(delta.mean());
  m["actor/tb_residual_abs"] = Item(delta.abs().mean());
  return out;
}

at::Tensor ComputeFlowRlOutcomeAdvantage(
    const at::Tensor& token_level_rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index) {
  at::NoGradGuard no_grad;
  const at::Tensor scores = token_level_rewards.sum(-1).to(at::kDouble);
  const int64_t n = scores.size(0);
  std::map<std::string, std::pair<double, int64_t>> groups;
  for (int64_t i = 0; i < n; ++i) {
    auto& g = groups[index[i]];
    g.first += scores[i].item<double>();
    g.second += 1;
  }
  at::Tensor centred = scores.clone();
  for (int64_t i = 0; i < n; ++i) {
    const auto& g = groups[index[i]];
    const double mean = g.second > 1 ? g.first / g.second : 0.0;
    centred[i] = scores[i].item<double>() - mean;
  }
  return (centred.unsqueeze(-1) * response_mask.to(at::kDouble))
      .to(token_level_rewards.scalar_type());
}

}  // namespace verl::rl
