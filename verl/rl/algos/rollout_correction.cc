// File: verl/rl/algos/rollout_correction.cc
#include "verl/rl/algos/rollout_correction.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ones_like.h>

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

constexpr double kSafetyBound = 20.0;

double Item(const at::Tensor& t) { return t.item<double>(); }

// Masked max/min over valid entries.
double MaskedMax(const at::Tensor& x, const at::Tensor& mask) {
  return Item(x.masked_fill(mask.logical_not(), -INFINITY).max());
}
double MaskedMin(const at::Tensor& x, const at::Tensor& mask) {
  return Item(x.masked_fill(mask.logical_not(), INFINITY).min());
}

struct RsMode {
  std::string name;
  std::string level;  // token | seq_sum | seq_mean | seq_max
  std::string kind;   // k1 | k2 | k3
  double lower = 0.0;
  double upper = 0.0;
};

absl::StatusOr<std::pair<double, double>> ParseBounds(const std::string& text,
                                                      bool ratio_bounds,
                                                      const std::string& mode) {
  std::vector<std::string> parts = absl::StrSplit(text, '_');
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm.rollout_correction.rollout_rs_threshold: cannot parse '",
        text, "' for mode '", mode, "'"));
  };
  double a = 0.0, b = 0.0;
  if (parts.size() == 1) {
    if (!absl::SimpleAtod(parts[0], &b) || b <= 0.0) return bad();
    if (!ratio_bounds) return std::make_pair(0.0, b);
    if (b < 1.0) b = 1.0 / b;
    return std::make_pair(1.0 / b, b);
  }
  if (parts.size() != 2 || !ratio_bounds || !absl::SimpleAtod(parts[0], &a) ||
      !absl::SimpleAtod(parts[1], &b) || a <= 0.0 || a > b) {
    return bad();
  }
  return std::make_pair(a, b);
}

absl::StatusOr<std::vector<RsMode>> ParseRsModes(
    const RolloutCorrectionConfig& config) {
  std::vector<RsMode> modes;
  if (config.rollout_rs.empty()) return modes;
  std::vector<std::string> names =
      absl::StrSplit(config.rollout_rs, ',', absl::SkipWhitespace());
  std::vector<std::string> thresholds =
      absl::StrSplit(config.rollout_rs_threshold, ',', absl::SkipWhitespace());
  if (thresholds.empty()) {
    return absl::InvalidArgumentError(
        "algorithm.rollout_correction.rollout_rs_threshold must be set when "
        "rollout_rs is enabled");
  }
  if (thresholds.size() != 1 && thresholds.size() != names.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm.rollout_correction.rollout_rs_threshold: ",
        thresholds.size(), " values for ", names.size(), " rollout_rs modes"));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    RsMode mode;
    mode.name = std::string(absl::StripAsciiWhitespace(names[i]));
    const size_t cut = mode.name.rfind('_');
    if (cut != std::string::npos) {
      mode.level = mode.name.substr(0, cut);
      mode.kind = mode.name.substr(cut + 1);
    }
    const bool level_ok = mode.level == "token" || mode.level == "seq_sum" ||
                          mode.level == "seq_mean" || mode.level == "seq_max";
    const bool kind_ok =
        mode.kind == "k1" || mode.kind == "k2" || mode.kind == "k3";
    if (!level_ok || !kind_ok ||
        (mode.level == "seq_max" && mode.kind == "k1")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.rollout_correction.rollout_rs: unknown mode '", mode.name,
          "' (expected token_k1|k2|k3, seq_sum_k1|k2|k3, seq_mean_k1|k2|k3, "
          "seq_max_k2|k3)"));
    }
    absl::StatusOr<std::pair<double, double>> bounds = ParseBounds(
        std::string(absl::StripAsciiWhitespace(
            thresholds.size() == 1 ? thresholds[0] : thresholds[i])),
        mode.kind == "k1", mode.name);
    if (!bounds.ok()) return bounds.status();
    mode.lower = bounds->first;
    mode.upper = bounds->second;
    modes.push_back(mode);
  }
  return modes;
}

// Token divergence of kind k1 (−λ), k2 (½λ²) or k3 (e^λ − 1 − λ).
at::Tensor TokenDivergence(const at::Tensor& log_ratio,
                           const std::string& kind) {
  if (kind == "k1") return -log_ratio;
  if (kind == "k2") return 0.5 * log_ratio * log_ratio;
  at::Tensor l = log_ratio.clamp(-kSafetyBound, kSafetyBound);
  return at::exp(l) - 1.0 - l;
}

// Keep-mask [B,T] (1 = keep) for one rejection mode.
at::Tensor RejectionKeepMask(const at::Tensor& log_ratio,
                             const at::Tensor& mask, const RsMode& mode) {
  at::Tensor div = TokenDivergence(log_ratio, mode.kind);
  at::Tensor stat;  // [B,T] (token) or [B,1] (sequence)
  if (mode.level == "token") {
    stat = div;
  } else if (mode.level == "seq_sum") {
    stat = MaskedSum(div, mask, -1).unsqueeze(-1);
  } else if (mode.level == "seq_mean") {
    stat = MaskedMean(div, mask, -1).unsqueeze(-1);
  } else {
    stat = div.masked_fill(mask.logical_not(), -INFINITY)
               .amax(-1, /*keepdim=*/true);
  }
  at::Tensor keep;
  if (mode.kind == "k1") {
    // k1 = −log r: keep iff lower ≤ r ≤ upper (r from the aggregated λ).
    at::Tensor ratio = at::exp((-stat).clamp(-kSafetyBound, kSafetyBound));
    keep = ratio.ge(mode.lower).logical_and(ratio.le(mode.upper));
  } else {
    keep = stat.le(mode.upper);
  }
  return keep.expand_as(log_ratio).to(log_ratio.scalar_type());
}

void AddIsMetrics(const at::Tensor& raw_weights, const at::Tensor& mask,
                  double threshold, std::map<std::string, double>& metrics) {
  at::Tensor mb = mask.to(at::kBool);
  metrics["rollout_is_mean"] = Item(MaskedMean(raw_weights, mask));
  metrics["rollout_is_max"] = MaskedMax(raw_weights, mb);
  metrics["rollout_is_min"] = MaskedMin(raw_weights, mb);
  at::Tensor clamped = raw_weights.clamp(1.0 / threshold, threshold);
  at::Tensor mean_c = MaskedMean(clamped, mask);
  const double var =
      Item(MaskedMean(clamped * clamped, mask) - mean_c * mean_c);
  metrics["rollout_is_std"] = std::sqrt(std::max(var, 0.0));
  at::Tensor normalized = clamped / (mean_c + 1e-8);
  metrics["rollout_is_eff_sample_size"] =
      1.0 / Item(MaskedMean(normalized * normalized, mask));
  metrics["rollout_is_ratio_fraction_high"] =
      Item(MaskedMean(raw_weights.gt(threshold).to(mask.scalar_type()), mask));
  metrics["rollout_is_ratio_fraction_low"] = Item(
      MaskedMean(raw_weights.lt(1.0 / threshold).to(mask.scalar_type()), mask));
}

}  // namespace

std::map<std::string, double> ComputeOffPolicyMetrics(
    const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob,
    const at::Tensor& response_mask) {
  at::NoGradGuard no_grad;
  std::map<std::string, double> m;
  at::Tensor mean_train = MaskedMean(old_log_prob, response_mask, -1);
  m["training_ppl"] = Item(at::exp(-mean_train).mean());
  m["training_log_ppl"] = Item((-mean_train).mean());
  m["kl"] = Item(MaskedMean(rollout_log_prob - old_log_prob, response_mask));
  at::Tensor log_ratio = old_log_prob - rollout_log_prob;
  m["k3_kl"] =
      Item(MaskedMean(at::exp(log_ratio) - log_ratio - 1.0, response_mask));
  at::Tensor mean_rollout = MaskedMean(rollout_log_prob, response_mask, -1);
  m["rollout_ppl"] = Item(at::exp(-mean_rollout).mean());
  m["rollout_log_ppl"] = Item((-mean_rollout).mean());
  at::Tensor diff = mean_rollout - mean_train;
  m["log_ppl_diff"] = Item(diff.mean());
  m["log_ppl_abs_diff"] = Item(diff.abs().mean());
  m["log_ppl_diff_max"] = Item(diff.max());
  m["log_ppl_diff_min"] = Item(diff.min());
  m["ppl_ratio"] = Item(at::exp(diff).mean());
  at::Tensor rho = at::exp(log_ratio.clamp(-kSafetyBound, kSafetyBound));
  m["chi2_token"] = Item(MaskedMean(rho * rho, response_mask)) - 1.0;
  at::Tensor seq_sum = MaskedSum(log_ratio, response_mask, -1)
                           .clamp(-kSafetyBound, kSafetyBound);
  m["chi2_seq"] = Item(at::exp(2.0 * seq_sum).mean()) - 1.0;
  return m;
}

absl::StatusOr<RolloutCorrectionOutput> ComputeRolloutCorrection(
    const at::Tensor& old_log_prob, const at::Tensor& rollout_log_prob,
    const at::Tensor& response_mask, const RolloutCorrectionConfig& config) {
  at::NoGradGuard no_grad;
  if (!response_mask.to(at::kBool).any().item<bool>()) {
    return absl::InvalidArgumentError(
        "rollout correction: response_mask has no valid token");
  }
  if (old_log_prob.sizes() != rollout_log_prob.sizes() ||
      old_log_prob.sizes() != response_mask.sizes()) {
    return absl::InvalidArgumentError(
        "rollout correction: old_log_probs, rollout_log_probs and "
        "response_mask must have the same shape");
  }
  absl::StatusOr<std::vector<RsMode>> modes = ParseRsModes(config);
  if (!modes.ok()) return modes.status();
  at::Tensor mask = response_mask.to(old_log_prob.scalar_type());
  at::Tensor log_ratio = (old_log_prob - rollout_log_prob).detach();
  std::map<std::string, double> metrics;
  RolloutCorrectionOutput out;

  if (!config.rollout_is.empty()) {
    at::Tensor raw;
    if (config.rollout_is == "token") {
      raw = at::exp(log_ratio.clamp(-kSafetyBound, kSafetyBound));
    } else if (config.rollout_is == "sequence") {
      raw =
          at::exp(
              MaskedSum(log_ratio, mask, -1).clamp(-kSafetyBound, kSafetyBound))
              .unsqueeze(-1)
              .expand_as(log_ratio);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.rollout_correction.rollout_is: unknown value '",
          config.rollout_is, "' (expected token or sequence)"));
    }
    if (config.rollout_is_threshold <= 0.0) {
      return absl::InvalidArgumentError(
          "algorithm.rollout_correction.rollout_is_threshold must be > 0");
    }
    AddIsMetrics(raw, mask, config.rollout_is_threshold, metrics);
    at::Tensor w = (raw * mask).clamp_max(config.rollout_is_threshold);
    if (config.rollout_is_batch_normalize) {
      at::Tensor denom;
      if (config.rollout_is == "token") {
        denom = MaskedMean(w, mask);
      } else {
        at::Tensor seq_valid = mask.sum(-1).gt(0).to(w.scalar_type());
        denom = MaskedMean(w.select(-1, 0), seq_valid);
      }
      w = w / (denom + 1e-8);
      metrics["rollout_is_batch_norm_factor"] = Item(denom);
    }
    out.rollout_is_weights = w.detach();
  }

  at::Tensor keep = at::ones_like(mask);
  for (const RsMode& mode : *modes) {
    at::Tensor k = RejectionKeepMask(log_ratio, mask, mode);
    metrics[absl::StrCat("rollout_rs_", mode.name, "_masked_fraction")] =
        Item(MaskedMean(1.0 - k, mask));
    keep = keep * k;
  }
  if (!modes->empty()) {
    metrics["rollout_rs_masked_fraction"] = Item(MaskedMean(1.0 - keep, mask));
    at::Tensor seq_rejected = MaskedSum(1.0 - keep, mask, -1).gt(0);
    metrics["rollout_rs_seq_masked_fraction"] =
        Item(seq_rejected.to(at::kDouble).mean());
  }
  out.response_mask = response_mask * keep.to(response_mask.scalar_type());

  for (const auto& [k, v] :
       ComputeOffPolicyMetrics(old_log_prob, rollout_log_prob, mask)) {
    metrics[k] = v;
  }
  for (const auto& [k, v] : metrics) {
    out.metrics[absl::StrCat("rollout_corr/", k)] = v;
  }
  return out;
}

}  // namespace verl::rl
