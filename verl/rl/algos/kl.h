// File: verl/rl/algos/kl.h
//
// KL estimators between the policy and the reference policy (verl's
// `kl_penalty`), the fixed/adaptive KL coefficient controllers, and
// `apply_kl_penalty` (KL subtracted from token-level rewards).
#ifndef VERL_RL_ALGOS_KL_H_
#define VERL_RL_ALGOS_KL_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace verl::rl {

// Per-token estimator of KL(π‖π_ref), d = logp − logp_ref:
//   kl/k1: d;  abs: |d|;  mse/k2: ½d²;
//   low_var_kl/k3: x = clamp(−d, ±20), eˣ − x − 1 clamped to [−10, 10].
// A trailing "+" (e.g. "k3+") gives the straight-through variant: the value of
// the named estimator with the gradient of k2. Unlike verl at HEAD the "+" is
// stripped before dispatch, so "k3+" works. "full" and unknown names are
// errors.
absl::StatusOr<at::Tensor> KlPenalty(const at::Tensor& logprob,
                                     const at::Tensor& ref_logprob,
                                     const std::string& type);

// β controller for KL-in-reward.
class KlController {
 public:
  virtual ~KlController() = default;
  virtual double value() const = 0;
  virtual void Update(double current_kl, int64_t n_steps) = 0;
  // Restores a checkpointed coefficient.
  virtual void set_value(double value) = 0;
};

// β constant.
class FixedKlController : public KlController {
 public:
  explicit FixedKlController(double kl_coef) : value_(kl_coef) {}
  double value() const override { return value_; }
  void Update(double, int64_t) override {}
  void set_value(double value) override { value_ = value; }

 private:
  double value_;
};

// Ziegler et al.: e = clip(kl/target − 1, ±0.2); β ← β·(1 + e·n/horizon).
class AdaptiveKlController : public KlController {
 public:
  AdaptiveKlController(double init_kl_coef, double target_kl, int64_t horizon)
      : value_(init_kl_coef), target_(target_kl), horizon_(horizon) {}
  double value() const override { return value_; }
  void Update(double current_kl, int64_t n_steps) override;
  void set_value(double value) override { value_ = value; }

 private:
  double value_;
  double target_;
  int64_t horizon_;
};

// `type` ∈ {fixed, adaptive}; adaptive needs horizon > 0.
absl::StatusOr<std::unique_ptr<KlController>> MakeKlController(
    const std::string& type, double kl_coef, double target_kl = 0.1,
    int64_t horizon = 10000);

struct KlInRewardResult {
  at::Tensor token_level_rewards;
  // actor/reward_kl_penalty, actor/reward_kl_penalty_coeff
  std::map<std::string, double> metrics;
};

// verl's core_algos.compute_rewards: scores − kl_ratio·(old − ref), the k1
// estimator, unmasked (ApplyKlPenalty is the trainer's masked variant).
at::Tensor ComputeRewards(const at::Tensor& token_level_scores,
                          const at::Tensor& old_log_prob,
                          const at::Tensor& ref_log_prob, double kl_ratio);

// rewards = scores − β·kl(old, ref)·m; current_kl = mean_i masked_mean_t(kld);
// then controller->Update(current_kl, B). β reported is the one used.
absl::StatusOr<KlInRewardResult> ApplyKlPenalty(
    const at::Tensor& token_level_scores, const at::Tensor& old_log_probs,
    const at::Tensor& ref_log_prob, const at::Tensor& response_mask,
    KlController& controller, const std::string& kl_penalty_type);

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_KL_H_
