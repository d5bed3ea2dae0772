// File: verl/rl/algos/kl.cc
#include "verl/rl/algos/kl.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/exp.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

at::Tensor HalfSquare(const at::Tensor& d) { return 0.5 * d * d; }

absl::StatusOr<at::Tensor> KlForward(const at::Tensor& logprob,
                                     const at::Tensor& ref_logprob,
                                     const std::string& type) {
  at::Tensor d = logprob - ref_logprob;
  if (type == "kl" || type == "k1") return d;
  if (type == "abs") return d.abs();
  if (type == "mse" || type == "k2") return HalfSquare(d);
  if (type == "low_var_kl" || type == "k3") {
    at::Tensor x = at::clamp(ref_logprob - logprob, -20.0, 20.0);
    return at::clamp(at::exp(x) - x - 1.0, -10.0, 10.0);
  }
  if (type == "full") {
    return absl::UnimplementedError(
        "kl_penalty: 'full' needs full-vocabulary logits and is not supported");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("kl_penalty: unknown estimator '", type,
                   "' (expected kl, k1, abs, mse, k2, low_var_kl, k3, "
                   "optionally with a '+' suffix)"));
}

}  // namespace

absl::StatusOr<at::Tensor> KlPenalty(const at::Tensor& logprob,
                                     const at::Tensor& ref_logprob,
                                     const std::string& type) {
  const bool straight_through = absl::EndsWith(type, "+");
  const std::string base =
      straight_through ? type.substr(0, type.size() - 1) : type;
  absl::StatusOr<at::Tensor> forward = KlForward(logprob, ref_logprob, base);
  if (!forward.ok() || !straight_through || base == "mse" || base == "k2") {
    return forward;
  }
  at::Tensor backward = HalfSquare(logprob - ref_logprob);
  return backward - backward.detach() + forward->detach();
}

void AdaptiveKlController::Update(double current_kl, int64_t n_steps) {
  const double error = std::clamp(current_kl / target_ - 1.0, -0.2, 0.2);
  value_ *= 1.0 + error * static_cast<double>(n_steps) /
                      static_cast<double>(horizon_);
}

absl::StatusOr<std::unique_ptr<KlController>> MakeKlController(
    const std::string& type, double kl_coef, double target_kl,
    int64_t horizon) {
  if (type == "fixed") return std::make_unique<FixedKlController>(kl_coef);
  if (type == "adaptive") {
    if (horizon <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("algorithm.kl_ctrl.horizon must be > 0 for the adaptive "
                       "controller, got ",
                       horizon));
    }
    return std::make_unique<AdaptiveKlController>(kl_coef, target_kl, horizon);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("algorithm.kl_ctrl.type: unknown value '", type,
                   "' (expected fixed or adaptive)"));
}

at::Tensor ComputeRewards(const at::Tensor& token_level_scores,
                          const at::Tensor& old_log_prob,
                          const at::Tensor& ref_log_prob, double kl_ratio) {
  return token_level_scores - (old_log_prob - ref_log_prob) * kl_ratio;
}

absl::StatusOr<KlInRewardResult> ApplyKlPenalty(
    const at::Tensor& token_level_scores, const at::Tensor& old_log_probs,
    const at::Tensor& ref_log_prob, const at::Tensor& response_mask,
    KlController& controller, const std::string& kl_penalty_type) {
  absl::StatusOr<at::Tensor> kld =
      KlPenalty(old_log_probs, ref_log_prob, kl_penalty_type);
  if (!kld.ok()) return kld.status();
  at::Tensor masked_kld = *kld * response_mask.to(kld->scalar_type());
  const double beta = controller.value();
  KlInRewardResult result;
  result.token_level_rewards = token_level_scores - beta * masked_kld;
  const double current_kl =
      MaskedMean(masked_kld, response_mask, -1).mean().item<double>();
  controller.Update(current_kl, token_level_scores.size(0));
  result.metrics["actor/reward_kl_penalty"] = current_kl;
  result.metrics["actor/reward_kl_penalty_coeff"] = beta;
  return result;
}

}  // namespace verl::rl
