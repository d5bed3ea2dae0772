// File: verl/rl/trainer/metrics.h
//
// Per-step metrics with verl's exact keys (verl/trainer/ppo/metric_utils.py):
// batch data metrics (critic/*, response_length*/*, prompt_length/*),
// timing (timing_s/*, timing_per_token_ms/*), throughput (perf/*), the
// list reduction rule of reduce_metrics, and validation metrics
// (mean@n, std@n, best@k, worst@k, maj@k → val-core/… or val-aux/…).
#ifndef VERL_RL_TRAINER_METRICS_H_
#define VERL_RL_TRAINER_METRICS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/profiler/flops_counter.h"

namespace verl::rl {

using MetricMap = std::map<std::string, double>;

struct DataMetricsInputs {
  at::Tensor token_level_scores;         // [B,T]
  at::Tensor token_level_rewards;        // [B,T]
  at::Tensor advantages;                 // [B,T]
  at::Tensor returns;                    // [B,T]
  at::Tensor values;                     // [B,T], needed when use_critic
  at::Tensor attention_mask;             // [B,P+T]; last T columns = response
  at::Tensor response_mask;              // [B,T] tokens that are trained on
  std::vector<double> num_turns;         // optional (multi-turn)
  std::vector<double> tool_call_counts;  // optional
};

// compute_data_metrics. "Aborted" samples (response length 0) are excluded
// from score/reward stats; all-aborted is an error.
absl::StatusOr<MetricMap> ComputeDataMetrics(const DataMetricsInputs& in,
                                             bool use_critic);

// timing_s/<k> for every key; timing_per_token_ms/<k> = t·1000/tokens with
// gen → response tokens; ref, values, adv, update_critic, update_actor →
// prompt + response tokens.
MetricMap ComputeTimingMetrics(const std::map<std::string, double>& timing_raw,
                               int64_t num_prompt_tokens,
                               int64_t num_response_tokens);

// perf/total_num_tokens, perf/time_per_step, perf/throughput =
// tokens / (time·n_gpus).
MetricMap ComputeThroughputMetrics(int64_t total_num_tokens, double step_time_s,
                                   int64_t n_gpus);

// Model FLOPs utilisation (verl's FlopsCounter over the batch's per-sample
// sequence lengths, against `peak_flops` per device):
//   perf/mfu/actor       = TrainingFlops * actor_epochs / t(update_actor)
//   perf/mfu/actor_infer = ForwardFlops / t(old_log_prob)
//   perf/mfu/critic      = TrainingFlops * critic_epochs / t(update_critic)
// each divided by peak_flops * world_size; a key is absent when its phase is
// not in `timing_raw`, and 0 when the peak is unknown (0).
MetricMap ComputeMfuMetrics(const profiler::FlopsModelDims& dims,
                            const std::vector<int64_t>& seqlens,
                            const std::map<std::string, double>& timing_raw,
                            int64_t actor_epochs, int64_t critic_epochs,
                            double peak_flops, int64_t world_size);

// Debug comparison of rollout-engine vs recomputed log-probs over response
// tokens (verl/utils/debug/metrics.py): training/rollout_probs_diff_valid (1),
// _max, _mean, _std (unbiased) of |p_actor − p_rollout|, and
// training/rollout_actor_probs_pearson_corr. Needs ≥ 2 valid tokens.
absl::StatusOr<MetricMap> ComputeRolloutProbsDiffMetrics(
    const at::Tensor& old_log_probs, const at::Tensor& rollout_log_probs,
    const at::Tensor& response_mask);

// verl's compute_variance_proxy_metrics (gradient-variance proxies from the
// score-norm W(τ) = Σ_t [1 − 2π_t(y_t) + Σπ²]): variance_proxy/
// {proxy1_signal_strength, proxy2_total_power, proxy3_pure_noise,
// expected_a_squared, expected_w}. Empty when sum_pi_squared is undefined
// (verl: the actor did not compute it). `rollout_is_weights` may be
// undefined; `grad_norm` < 0 means "not known" (proxy1 and proxy3 report 0).
struct VarianceProxyInputs {
  at::Tensor old_log_probs;       // [B,T]
  at::Tensor sum_pi_squared;      // [B,T]
  at::Tensor advantages;          // [B,T]
  at::Tensor response_mask;       // [B,T]
  at::Tensor rollout_is_weights;  // [B,T] or undefined
  double grad_norm = -1.0;
};
MetricMap ComputeVarianceProxyMetrics(const VarianceProxyInputs& in);

// reduce_metrics: keys containing "max" → max, "min" → min, else mean.
MetricMap ReduceMetrics(
    const std::map<std::string, std::vector<double>>& lists);

struct ValidationSamples {
  std::vector<std::string> data_sources;  // per sample
  std::vector<std::string> uids;          // per sample (prompt id)
  // Numeric variables per sample, e.g. "reward", "acc".
  std::map<std::string, std::vector<double>> numeric;
  // Optional predictions per sample (enables maj@k).
  std::vector<std::string> preds;
  // Optional decoded responses per sample (enables the diversity metrics).
  std::vector<std::string> responses;
};

// process_validation_metrics + the trainer's naming: for each data source,
// uid and variable: mean@n, std@n (population), and for k ∈ {2,4,…<n}∪{n}
// bootstrap (1000 draws of size k with replacement) best@k/{mean,std},
// worst@k/{mean,std}, maj@k/{mean,std}; averaged over uids, then named
// val-core/{source}/{var}/{metric} when var is the core variable ("acc" if
// present else "reward") and the metric starts with mean/maj/best and
// contains @{n_max}; val-aux/... otherwise.
// Bootstrap draws use std::mt19937(seed); verl uses numpy's seed 42, so the
// draws (not their distribution) differ from verl's.
absl::StatusOr<MetricMap> ComputeValidationMetrics(const ValidationSamples& s,
                                                   uint32_t seed = 42);

// Diversity of the correct answers (FlowRL's claim is that they stay many):
// per prompt (uid), among its samples whose core variable ("acc" if present,
// else "reward") is > 0, the number of distinct response texts and the
// entropy (nats) of their empirical distribution; averaged over prompts as
// val-aux/{source}/diversity/{distinct_correct,correct_entropy}@{n}. Empty
// without responses.
MetricMap ComputeDiversityMetrics(const ValidationSamples& s);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_METRICS_H_
