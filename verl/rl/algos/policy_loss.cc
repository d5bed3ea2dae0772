// File: verl/rl/algos/policy_loss.cc
#include "verl/rl/algos/policy_loss.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/full_like.h>
#include <ATen/ops/log.h>
#include <ATen/ops/max.h>
#include <ATen/ops/min.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randperm.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cmath>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/registry.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

constexpr char kPgClipfrac[] = "actor/pg_clipfrac";
constexpr char kPpoKl[] = "actor/ppo_kl";
constexpr char kPgClipfracLower[] = "actor/pg_clipfrac_lower";

double Item(const at::Tensor& t) { return t.detach().item<double>(); }

at::Tensor Float(const at::Tensor& b, const at::Tensor& like) {
  return b.to(like.scalar_type());
}

// ℓ·w when rollout IS weights are given.
at::Tensor ApplyIsWeights(const at::Tensor& losses, const at::Tensor& w) {
  return w.defined() ? losses * w : losses;
}

// Aggregates ℓ and packages it with metrics.
absl::StatusOr<PolicyLossOutput> Finish(const at::Tensor& losses,
                                        const at::Tensor& mask,
                                        const std::string& mode,
                                        const AggOptions& agg,
                                        std::map<std::string, double> metrics) {
  absl::StatusOr<at::Tensor> loss = AggLoss(losses, mask, mode, agg);
  if (!loss.ok()) return loss.status();
  return PolicyLossOutput{*loss, std::move(metrics)};
}

// Clamped log-ratio Δ and ratio e^Δ (vanilla, sapo, cispo).
std::pair<at::Tensor, at::Tensor> ClampedRatio(const PolicyLossInputs& in) {
  at::Tensor delta = at::clamp(in.log_prob - in.old_log_prob, -20.0, 20.0);
  return {delta, at::exp(delta)};
}

core::Registry<PolicyLossFn>& GetPolicyRegistry() {
  static auto* registry = new core::Registry<PolicyLossFn>(
      "actor.policy_loss.loss_mode",
      {{"vanilla", ComputePolicyLossVanilla},
       {"gspo", ComputePolicyLossGspo},
       {"sapo", ComputePolicyLossSapo},
       {"gpg", ComputePolicyLossGpg},
       {"clip_cov", ComputePolicyLossClipCov},
       {"kl_cov", ComputePolicyLossKlCov},
       {"geo_mean", ComputePolicyLossGeoMean},
       {"cispo", ComputePolicyLossCispo},
       {"bypass_mode", ComputePolicyLossBypassMode}});
  return *registry;
}

}  // namespace

absl::StatusOr<PolicyLossOutput> ComputePolicyLossVanilla(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  if (!(cfg.clip_ratio_c > 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor.clip_ratio_c must be > 1.0 for dual-clip PPO, got ",
                     cfg.clip_ratio_c));
  }
  const at::Tensor& A = in.advantages;
  const at::Tensor& m = in.response_mask;
  auto [delta, ratio] = ClampedRatio(in);
  at::Tensor l1 = -A * ratio;
  at::Tensor l2 = -A * at::clamp(ratio, 1.0 - cfg.low(), 1.0 + cfg.high());
  at::Tensor clip1 = at::max(l1, l2);
  at::Tensor l3 = -A * cfg.clip_ratio_c;
  at::Tensor clip2 = at::min(l3, clip1);
  at::Tensor neg = A.lt(0);
  at::Tensor losses = at::where(neg, clip2, clip1);
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] = Item(MaskedMean(Float(l2.gt(l1), A), m));
  metrics[kPpoKl] = Item(MaskedMean(-delta, m));
  metrics[kPgClipfracLower] =
      Item(MaskedMean(Float(clip1.gt(l3).logical_and(neg), A), m));
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), m,
                cfg.loss_agg_mode, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossGspo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  const at::Tensor& m = in.response_mask;
  at::Tensor mf = Float(m, A);
  at::Tensor delta = in.log_prob - in.old_log_prob;
  at::Tensor seq_len = mf.sum(-1).clamp_min(1.0);
  at::Tensor seq_delta = (delta * mf).sum(-1) / seq_len;
  at::Tensor log_ratio =
      in.log_prob - in.log_prob.detach() + seq_delta.detach().unsqueeze(-1);
  at::Tensor ratio = at::exp(log_ratio.clamp_max(10.0));
  at::Tensor l1 = -A * ratio;
  at::Tensor l2 = -A * at::clamp(ratio, 1.0 - cfg.low(), 1.0 + cfg.high());
  at::Tensor losses = at::max(l1, l2);
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] = Item(MaskedMean(Float(l2.gt(l1), A), m));
  metrics[kPpoKl] = Item(MaskedMean(-delta, m));
  metrics[kPgClipfracLower] = 0.0;
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), m,
                kSeqMeanTokenMean, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossSapo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  auto [delta, ratio] = ClampedRatio(in);
  at::Tensor tau = at::where(A.gt(0), at::full_like(A, cfg.tau_pos),
                             at::full_like(A, cfg.tau_neg));
  at::Tensor gate = at::sigmoid(tau * (ratio - 1.0)) * (4.0 / tau);
  at::Tensor losses = -gate * A;
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] = 0.0;
  metrics[kPpoKl] = Item(MaskedMean(-delta, in.response_mask));
  metrics[kPgClipfracLower] = 0.0;
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), in.response_mask,
                kSeqMeanTokenMean, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossGpg(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  at::Tensor losses = -in.log_prob * in.advantages;
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), in.response_mask,
                cfg.loss_agg_mode, cfg.agg, {});
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossClipCov(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  const at::Tensor& m = in.response_mask;
  at::Tensor valid = m.gt(0);
  at::Tensor delta = in.log_prob - in.old_log_prob;
  at::Tensor ratio = at::exp(delta);
  at::Tensor l1 = -A * ratio;
  at::Tensor l2 = -A * at::clamp(ratio, 1.0 - cfg.low(), 1.0 + cfg.high());
  at::Tensor corr = at::ones_like(A);
  {
    at::NoGradGuard no_grad;
    at::Tensor clipped_by_origin = l2.gt(l1).logical_and(valid);
    at::Tensor cov =
        (A - MaskedMean(A, m)) *
        (in.log_prob.detach() - MaskedMean(in.log_prob.detach(), m));
    cov = cov.masked_fill(valid.logical_not(), -INFINITY)
              .masked_fill(clipped_by_origin, -INFINITY);
    const int64_t clip_num = std::max<int64_t>(
        static_cast<int64_t>(cfg.clip_cov_ratio * Item(Float(m, A).sum())), 1);
    at::Tensor candidates = cov.lt(cfg.clip_cov_ub)
                                .logical_and(cov.gt(cfg.clip_cov_lb))
                                .logical_and(valid)
                                .nonzero();  // [K,2]
    const int64_t k = candidates.size(0);
    if (k > 0) {
      at::Generator gen =
          at::make_generator<at::CPUGeneratorImpl>(cfg.clip_cov_seed);
      at::Tensor perm = at::randperm(k, gen, at::kLong);
      at::Tensor chosen =
          candidates.index_select(0, perm.slice(0, 0, std::min(clip_num, k)));
      corr.index_put_({chosen.select(1, 0), chosen.select(1, 1)},
                      at::zeros({chosen.size(0)}, A.options()));
    }
  }
  at::Tensor losses = at::max(l1, l2) * corr;
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] = Item(MaskedMean(Float(corr.eq(0), A), m));
  metrics[kPpoKl] = Item(MaskedMean(-delta, m));
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), m,
                cfg.loss_agg_mode, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossKlCov(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  const at::Tensor& m = in.response_mask;
  at::Tensor delta = in.log_prob - in.old_log_prob;
  at::Tensor abs_kl = delta.abs();
  at::Tensor ratio = at::exp(delta);
  at::Tensor base = -A * ratio;
  at::Tensor with_kl = base + cfg.ppo_kl_coef * abs_kl;
  at::Tensor use_kl = at::zeros_like(A, at::kBool);
  {
    at::NoGradGuard no_grad;
    at::Tensor valid = m.gt(0);
    at::Tensor valid_idx = valid.reshape(-1).nonzero().squeeze(-1);
    const int64_t n_valid = valid_idx.numel();
    if (n_valid > 0) {
      at::Tensor adv = A.detach().reshape(-1).index_select(0, valid_idx);
      at::Tensor logp =
          in.log_prob.detach().reshape(-1).index_select(0, valid_idx);
      at::Tensor cov = (adv - adv.mean()) * (logp - logp.mean());
      const int64_t k = std::max<int64_t>(
          1, static_cast<int64_t>(static_cast<double>(n_valid) *
                                  cfg.kl_cov_ratio));
      at::Tensor top = std::get<1>(cov.topk(k, -1, /*largest=*/true));
      at::Tensor flat = valid_idx.index_select(0, top);
      use_kl.reshape(-1).index_fill_(0, flat, true);
    }
  }
  at::Tensor losses = at::where(use_kl, with_kl, base);
  std::map<std::string, double> metrics;
  metrics[kPpoKl] = Item(MaskedMean(abs_kl, m));
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), m,
                cfg.loss_agg_mode, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossGeoMean(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  const at::Tensor& m = in.response_mask;
  at::Tensor mf = Float(m, A);
  at::Tensor delta = in.log_prob - in.old_log_prob;
  at::Tensor sgn = at::sign(A);
  at::Tensor delta_clamp = at::clamp(delta, -cfg.low(), cfg.high());
  at::Tensor delta_min = sgn * at::min(sgn * delta, sgn * delta_clamp);
  at::Tensor len = mf.sum(-1);
  at::Tensor ratio = at::exp((delta_min * mf).sum(-1) / (len + 1e-8));
  at::Tensor seq_adv = (A * mf).sum(-1) / (len + 1e-8);
  at::Tensor losses = -seq_adv * ratio;
  if (in.rollout_is_weights.defined()) {
    at::Tensor seq_w = at::exp(
        (at::log(in.rollout_is_weights + 1e-10) * mf).sum(-1) / (len + 1e-8));
    losses = losses * seq_w;
  }
  at::Tensor clipped = delta.ne(delta_clamp);
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] =
      Item(MaskedMean(Float(clipped.logical_and(A.gt(0)), A), m));
  metrics[kPpoKl] = Item(MaskedMean(-delta, m));
  metrics[kPgClipfracLower] =
      Item(MaskedMean(Float(clipped.logical_and(A.lt(0)), A), m));
  return PolicyLossOutput{losses.mean(), std::move(metrics)};
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossCispo(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const at::Tensor& A = in.advantages;
  auto [delta, ratio] = ClampedRatio(in);
  at::Tensor clipped = at::clamp(ratio, 1.0 - cfg.low(), 1.0 + cfg.high());
  at::Tensor losses = -clipped.detach() * A * in.log_prob;
  std::map<std::string, double> metrics;
  metrics[kPgClipfrac] =
      Item(MaskedMean(Float(ratio.ne(clipped), A), in.response_mask));
  metrics[kPpoKl] = Item(MaskedMean(-delta, in.response_mask));
  metrics[kPgClipfracLower] = 0.0;  // verl reports 0 (no dual clip in CISPO)
  return Finish(ApplyIsWeights(losses, in.rollout_is_weights), in.response_mask,
                cfg.loss_agg_mode, cfg.agg, std::move(metrics));
}

absl::StatusOr<PolicyLossOutput> ComputePolicyLossBypassMode(
    const PolicyLossInputs& in, const PolicyLossConfig& cfg) {
  const RolloutCorrectionConfig& rc = cfg.rollout_correction;
  absl::StatusOr<RolloutCorrectionOutput> corr = ComputeRolloutCorrection(
      in.log_prob.detach(), in.old_log_prob, in.response_mask, rc);
  if (!corr.ok()) return corr.status();
  PolicyLossInputs masked = in;
  masked.response_mask = corr->response_mask;
  absl::StatusOr<PolicyLossOutput> out;
  if (rc.loss_type == "ppo_clip") {
    masked.rollout_is_weights = at::Tensor();
    out = ComputePolicyLossVanilla(masked, cfg);
  } else if (rc.loss_type == "reinforce") {
    at::Tensor losses = -in.advantages * in.log_prob;
    at::Tensor w = corr->rollout_is_weights.defined() ? corr->rollout_is_weights
                                                      : in.rollout_is_weights;
    // verl's compute_policy_loss_reinforce: ppo_kl = mean(−(log π − log
    // π_rollout)) over the (rejection-masked) response mask, unclamped.
    out = Finish(ApplyIsWeights(losses, w), masked.response_mask,
                 cfg.loss_agg_mode, cfg.agg,
                 {{kPpoKl, Item(MaskedMean(-(in.log_prob - in.old_log_prob),
                                           masked.response_mask))}});
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "actor.policy_loss.rollout_correction.loss_type: unknown value '",
        rc.loss_type, "' (expected ppo_clip or reinforce)"));
  }
  if (!out.ok()) return out;
  for (const auto& [k, v] : corr->metrics) out->metrics[k] = v;
  return out;
}

absl::Status RegisterPolicyLoss(const std::string& name, PolicyLossFn fn) {
  return GetPolicyRegistry().Register(name, std::move(fn));
}

absl::StatusOr<PolicyLossFn> GetPolicyLoss(const std::string& name) {
  return GetPolicyRegistry().Get(name);
}

std::vector<std::string> PolicyLossNames() {
  return GetPolicyRegistry().Names();
}

}  // namespace verl::rl
