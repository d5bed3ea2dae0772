// File: verl/rl/algos/rollout_correction.cc
#include "verl/rl/algos/rollout_correction.h"

#include <ATen/TensorIndexing.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ones_like.h>

#include <algorithm>
#include <cmath>
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

using Metrics = std::map<std::string, double>;

double Item(const at::Tensor& t) { return t.item<double>(); }

// Masked max/min over valid entries.
double MaskedMax(const at::Tensor& x, const at::Tensor& mask) {
  return Item(x.masked_fill(mask.logical_not(), -INFINITY).max());
}
double MaskedMin(const at::Tensor& x, const at::Tensor& mask) {
  return Item(x.masked_fill(mask.logical_not(), INFINITY).min());
}

// Mean of (v > threshold) over the elements of v.
double FractionAbove(const at::Tensor& v, double threshold) {
  return Item(v.gt(threshold).to(at::kDouble).mean());
}
double FractionBelow(const at::Tensor& v, double threshold) {
  return Item(v.lt(threshold).to(at::kDouble).mean());
}

// sqrt(max(E[x²] − E[x]², 0)) of x clamped to [lo, hi] over the mask; 0 when
// fewer than two tokens are valid (verl's clamped std of IS and RS stats).
double ClampedMaskedStd(const at::Tensor& x, const at::Tensor& mask, double lo,
                        double hi) {
  if (Item(mask.sum()) <= 1.0) return 0.0;
  at::Tensor c = x.clamp(lo, hi);
  at::Tensor mean = MaskedMean(c, mask);
  return std::sqrt(std::max(Item(MaskedMean(c * c, mask) - mean * mean), 0.0));
}

// Unbiased std of a 1-D tensor (torch.std), 0 for fewer than two values.
double SampleStd(const at::Tensor& v) {
  return v.numel() > 1 ? Item(v.std()) : 0.0;
}

struct RsMode {
  std::string name;
  std::string level;  // token | seq_sum | seq_mean | seq_max
  std::string kind;   // k1 | k2 | k3
  // k1: bounds on the ratio exp(k1 statistic); k2/k3: only `upper`.
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
        text, "' for mode '", mode, "'",
        ratio_bounds ? " (expected a positive upper bound or lower_upper with "
                       "0 < lower <= upper)"
                     : " (expected one positive upper bound)"));
  };
  double a = 0.0, b = 0.0;
  if (parts.size() == 1) {
    if (!absl::SimpleAtod(parts[0], &b) || !(b > 0.0)) return bad();
    // verl: a single k1 value u means the ratio bounds [1/u, u].
    if (!ratio_bounds) return std::make_pair(0.0, b);
    a = 1.0 / b;
  } else if (parts.size() != 2 || !ratio_bounds ||
             !absl::SimpleAtod(parts[0], &a) ||
             !absl::SimpleAtod(parts[1], &b)) {
    return bad();
  }
  // verl would accept lower > upper and reject every token; refuse it.
  if (!(a > 0.0) || a > b) return bad();
  return std::make_pair(a, b);
}

absl::StatusOr<std::vector<RsMode>> ParseRsModes(
    const RolloutCorrectionConfig& config) {
  std::vector<RsMode> modes;
  if (config.rollout_rs.empty()) return modes;
  std::vector<std::string> names;
  for (absl::string_view n :
       absl::StrSplit(config.rollout_rs, ',', absl::SkipWhitespace())) {
    std::string name(absl::StripAsciiWhitespace(n));
    // verl de-duplicates the options, keeping the first occurrence.
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      names.push_back(name);
    }
  }
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
    mode.name = names[i];
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

// Token divergence of kind k1 (−λ), k2 (½λ²) or k3 (e^λ − 1 − λ) of the
// clamped log-ratio λ.
at::Tensor TokenDivergence(const at::Tensor& safe_log_ratio,
                           const std::string& kind) {
  if (kind == "k1") return -safe_log_ratio;
  if (kind == "k2") return 0.5 * safe_log_ratio * safe_log_ratio;
  return at::exp(safe_log_ratio) - 1.0 - safe_log_ratio;
}

// verl's compute_rs_metrics for one option: `stat` is the per-token statistic
// ([B,T]; for sequence levels the sequence value broadcast), `seq_stat` the
// per-sequence value ([B]), thresholds on the statistic's scale.
void AddRsOptionMetrics(const std::string& prefix, bool sequence_level,
                        const at::Tensor& stat, const at::Tensor& seq_stat,
                        const at::Tensor& mask, const at::Tensor& seq_valid,
                        double upper, double lower, bool has_lower,
                        Metrics& m) {
  at::Tensor mb = mask.to(at::kBool);
  at::Tensor seq = seq_stat.index({seq_valid});
  const bool have_seq = seq.numel() > 0;
  m[prefix + "_mean"] = Item(MaskedMean(stat, mask));
  if (sequence_level && have_seq) {
    m[prefix + "_max"] = Item(seq.max());
    m[prefix + "_min"] = Item(seq.min());
    m[prefix + "_fraction_high"] = FractionAbove(seq, upper);
    m[prefix + "_fraction_low"] = has_lower ? FractionBelow(seq, lower) : 0.0;
  } else {
    m[prefix + "_max"] = MaskedMax(stat, mb);
    m[prefix + "_min"] = MaskedMin(stat, mb);
    m[prefix + "_fraction_high"] =
        Item(MaskedMean(stat.gt(upper).to(mask.scalar_type()), mask));
    m[prefix + "_fraction_low"] =
        has_lower
            ? Item(MaskedMean(stat.lt(lower).to(mask.scalar_type()), mask))
            : 0.0;
  }
  m[prefix + "_std"] =
      ClampedMaskedStd(stat, mask, has_lower ? lower : 0.0, upper);
  if (!have_seq) {
    for (const char* k :
         {"_seq_mean", "_seq_std", "_seq_max", "_seq_min", "_seq_max_deviation",
          "_seq_fraction_high", "_seq_fraction_low"}) {
      m[prefix + k] = 0.0;
    }
    return;
  }
  m[prefix + "_seq_mean"] = Item(seq.mean());
  m[prefix + "_seq_std"] = SampleStd(seq);
  m[prefix + "_seq_max"] = Item(seq.max());
  m[prefix + "_seq_min"] = Item(seq.min());
  m[prefix + "_seq_max_deviation"] = Item(seq.abs().max());
  m[prefix + "_seq_fraction_high"] = FractionAbove(seq, upper);
  // verl reports the sequence fraction below only for two-sided (k1) options.
  if (has_lower) m[prefix + "_seq_fraction_low"] = FractionBelow(seq, lower);
}

// verl's compute_rollout_rejection_mask: returns the keep mask (1 = keep) of
// all options together and adds rollout_rs_* metrics.
at::Tensor RejectionKeepMask(const at::Tensor& log_ratio,
                             const at::Tensor& mask,
                             const std::vector<RsMode>& modes, Metrics& m) {
  at::Tensor safe = log_ratio.clamp(-kSafetyBound, kSafetyBound);
  at::Tensor mb = mask.to(at::kBool);
  at::Tensor seq_valid = mask.sum(-1).gt(0);
  at::Tensor keep_all = at::ones_like(mask);
  for (const RsMode& mode : modes) {
    at::Tensor div = TokenDivergence(safe, mode.kind);
    const bool k1 = mode.kind == "k1";
    // k1 bounds are ratio bounds: compare the k1 statistic in log space.
    const double upper = k1 ? std::log(mode.upper) : mode.upper;
    const double lower = k1 ? std::log(mode.lower) : 0.0;
    at::Tensor stat, seq_stat;
    if (mode.level == "token") {
      stat = div;
      seq_stat = MaskedMean(div, mask, -1);
    } else {
      if (mode.level == "seq_sum") {
        seq_stat = MaskedSum(div, mask, -1);
      } else if (mode.level == "seq_mean") {
        seq_stat = MaskedMean(div, mask, -1);
      } else {  // seq_max; a row without valid tokens has max 0
        seq_stat = div.masked_fill(mb.logical_not(), -INFINITY).amax(-1);
        seq_stat = seq_stat.masked_fill(seq_stat.isneginf(), 0.0);
      }
      stat = seq_stat.unsqueeze(-1).expand_as(log_ratio);
    }
    at::Tensor keep = stat.le(upper);
    if (k1) keep = keep.logical_and(stat.ge(lower));
    const std::string prefix = absl::StrCat("rollout_rs_", mode.name);
    AddRsOptionMetrics(prefix, mode.level != "token", stat, seq_stat, mask,
                       seq_valid, upper, lower, k1, m);
    at::Tensor keep_f = keep.to(mask.scalar_type());
    keep_all = keep_all * keep_f;
    m[prefix + "_masked_fraction"] = Item(MaskedMean(1.0 - keep_f, mask));
    // Among sequences with a valid token: those with a rejected valid token.
    at::Tensor seq_rejected =
        keep.logical_not().logical_and(mb).any(-1).index({seq_valid});
    m[prefix + "_seq_masked_fraction"] =
        seq_rejected.numel() > 0 ? Item(seq_rejected.to(at::kDouble).mean())
                                 : 0.0;
  }
  m["rollout_rs_masked_fraction"] = Item(MaskedMean(1.0 - keep_all, mask));
  // Over all rows (verl divides by the batch size here).
  at::Tensor rejected = keep_all.le(0.5).logical_and(mb).any(-1);
  m["rollout_rs_seq_masked_fraction"] = Item(rejected.to(at::kDouble).mean());
  return keep_all;
}

// verl's compute_is_metrics. `weights` are the untruncated weights times the
// mask; `log_weight` the log-ratio they came from ([B,T] token, [B,1]
// sequence).
void AddIsMetrics(const at::Tensor& weights, const at::Tensor& log_weight,
                  const at::Tensor& mask, bool sequence, double threshold,
                  Metrics& m) {
  at::Tensor mb = mask.to(at::kBool);
  const double lower = 1.0 / threshold;
  m["rollout_is_mean"] = Item(MaskedMean(weights, mask));
  if (sequence) {
    // Log space, over all rows.
    m["rollout_is_max"] = std::exp(std::min(Item(log_weight.max()), 20.0));
    m["rollout_is_min"] = std::exp(Item(log_weight.min()));
    m["rollout_is_ratio_fraction_high"] =
        FractionAbove(log_weight, std::log(threshold));
    m["rollout_is_ratio_fraction_low"] =
        FractionBelow(log_weight, std::log(lower));
  } else {
    m["rollout_is_ratio_fraction_high"] =
        Item(MaskedMean(weights.gt(threshold).to(mask.scalar_type()), mask));
    m["rollout_is_ratio_fraction_low"] =
        Item(MaskedMean(weights.lt(lower).to(mask.scalar_type()), mask));
    m["rollout_is_max"] = MaskedMax(weights, mb);
    m["rollout_is_min"] = MaskedMin(weights, mb);
  }
  m["rollout_is_std"] = ClampedMaskedStd(weights, mask, lower, threshold);
  at::Tensor clamped = weights.clamp(lower, threshold);
  at::Tensor normalized = clamped / (MaskedMean(clamped, mask) + 1e-8);
  m["rollout_is_eff_sample_size"] =
      1.0 / Item(MaskedMean(normalized * normalized, mask));
  at::Tensor seq = MaskedMean(weights, mask, -1);
  m["rollout_is_seq_mean"] = Item(seq.mean());
  m["rollout_is_seq_std"] = SampleStd(seq);
  m["rollout_is_seq_max"] = Item(seq.max());
  m["rollout_is_seq_min"] = Item(seq.min());
  m["rollout_is_seq_max_deviation"] = Item((seq - 1.0).abs().max());
  m["rollout_is_seq_fraction_high"] = FractionAbove(seq, threshold);
  m["rollout_is_seq_fraction_low"] = FractionBelow(seq, lower);
}

// verl's compute_rollout_correction_weights: truncated (and optionally batch
// normalised) IS weights, metrics computed before truncation.
absl::StatusOr<at::Tensor> IsWeights(const at::Tensor& log_ratio,
                                     const at::Tensor& mask,
                                     const RolloutCorrectionConfig& config,
                                     Metrics& m) {
  const bool sequence = config.rollout_is == "sequence";
  if (!sequence && config.rollout_is != "token") {
    return absl::InvalidArgumentError(
        absl::StrCat("algorithm.rollout_correction.rollout_is: unknown value '",
                     config.rollout_is, "' (expected token or sequence)"));
  }
  if (!(config.rollout_is_threshold > 0.0)) {
    return absl::InvalidArgumentError(
        "algorithm.rollout_correction.rollout_is_threshold must be > 0");
  }
  at::Tensor log_weight =
      sequence ? MaskedSum(log_ratio, mask, -1).unsqueeze(-1) : log_ratio;
  at::Tensor w = at::exp(log_weight.clamp(-kSafetyBound, kSafetyBound))
                     .expand_as(log_ratio) *
                 mask;
  AddIsMetrics(w, log_weight, mask, sequence, config.rollout_is_threshold, m);
  w = w.clamp_max(config.rollout_is_threshold);
  if (config.rollout_is_batch_normalize) {
    at::Tensor mean;
    if (sequence) {
      at::Tensor seq_valid = mask.sum(-1).gt(0).to(w.scalar_type());
      mean = (MaskedMean(w, mask, -1) * seq_valid).sum() /
             seq_valid.sum().clamp_min(1e-8);
    } else {
      mean = MaskedMean(w, mask);
    }
    const double factor = Item(mean);
    if (factor > 1e-8) {
      w = w / factor;
      m["rollout_is_batch_norm_factor"] = factor;
    } else {
      m["rollout_is_batch_norm_factor"] = 1.0;
    }
  }
  return w;
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
  Metrics metrics;
  RolloutCorrectionOutput out;

  if (!config.rollout_is.empty()) {
    absl::StatusOr<at::Tensor> w = IsWeights(log_ratio, mask, config, metrics);
    if (!w.ok()) return w.status();
    out.rollout_is_weights = w->detach();
  }
  out.response_mask = response_mask;
  if (!modes->empty()) {
    at::Tensor keep = RejectionKeepMask(log_ratio, mask, *modes, metrics);
    out.response_mask = response_mask * keep.to(response_mask.scalar_type());
  }

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
