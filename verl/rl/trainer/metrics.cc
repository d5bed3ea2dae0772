// File: verl/rl/trainer/metrics.cc
#include "verl/rl/trainer/metrics.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/std.h>
#include <ATen/ops/var.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

double Item(const at::Tensor& t) { return t.item<double>(); }

void AddMeanMaxMin(const std::string& prefix, const at::Tensor& values,
                   MetricMap& m) {
  at::Tensor v = values.to(at::kDouble);
  m[prefix + "/mean"] = Item(v.mean());
  m[prefix + "/max"] = Item(v.max());
  m[prefix + "/min"] = Item(v.min());
}

void AddListStats(const std::string& prefix, const std::vector<double>& v,
                  MetricMap& m) {
  if (v.empty()) return;
  m[prefix + "/min"] = *std::min_element(v.begin(), v.end());
  m[prefix + "/max"] = *std::max_element(v.begin(), v.end());
  m[prefix + "/mean"] = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}

double PopulationStd(const std::vector<double>& v) {
  const double mu = Mean(v);
  double ss = 0.0;
  for (double x : v) ss += (x - mu) * (x - mu);
  return std::sqrt(ss / v.size());
}

// verl's calc_maj_val: the value of the first sample whose pred has the
// highest count (ties → the pred seen first).
double MajorityValue(const std::vector<double>& vals,
                     const std::vector<std::string>& preds) {
  std::vector<std::string> order;
  std::map<std::string, std::pair<int, double>> count;  // pred → (n, first)
  for (size_t i = 0; i < vals.size(); ++i) {
    auto [it, inserted] = count.try_emplace(preds[i], 0, vals[i]);
    if (inserted) order.push_back(preds[i]);
    ++it->second.first;
  }
  const std::string* best = &order[0];
  for (const std::string& p : order)
    if (count[p].first > count[*best].first) best = &p;
  return count[*best].second;
}

}  // namespace

absl::StatusOr<MetricMap> ComputeDataMetrics(const DataMetricsInputs& in,
                                             bool use_critic) {
  at::NoGradGuard no_grad;
  const int64_t T = in.advantages.size(-1);
  const int64_t total_len = in.attention_mask.size(-1);
  at::Tensor attn = in.attention_mask.to(at::kDouble);
  at::Tensor prompt_length = attn.slice(1, 0, total_len - T).sum(-1);
  at::Tensor response_length = attn.slice(1, total_len - T).sum(-1);
  const double max_prompt_length = static_cast<double>(total_len - T);
  at::Tensor valid = in.response_mask.to(at::kBool);
  at::Tensor aborted = response_length.eq(0);
  at::Tensor kept = aborted.logical_not();
  if (!kept.any().item<bool>()) {
    return absl::InvalidArgumentError(
        "compute_data_metrics: every sample in the batch was aborted (empty "
        "response)");
  }
  MetricMap m;
  AddMeanMaxMin("critic/score",
                in.token_level_scores.sum(-1).masked_select(kept), m);
  AddMeanMaxMin("critic/rewards",
                in.token_level_rewards.sum(-1).masked_select(kept), m);
  AddMeanMaxMin("critic/advantages", in.advantages.masked_select(valid), m);
  AddMeanMaxMin("critic/returns", in.returns.masked_select(valid), m);
  if (use_critic) {
    if (!in.values.defined()) {
      return absl::InvalidArgumentError(
          "compute_data_metrics: use_critic needs 'values'");
    }
    at::Tensor v = in.values.masked_select(valid).to(at::kDouble);
    at::Tensor r = in.returns.masked_select(valid).to(at::kDouble);
    AddMeanMaxMin("critic/values", v, m);
    m["critic/vf_explained_var"] =
        1.0 - Item(at::var(r - v)) / (Item(at::var(r)) + 1e-5);
  }
  AddMeanMaxMin("response_length", response_length, m);
  m["response_length/clip_ratio"] =
      Item(response_length.eq(static_cast<double>(T)).to(at::kDouble).mean());
  at::Tensor kept_len = response_length.masked_select(kept);
  AddMeanMaxMin("response_length_non_aborted", kept_len, m);
  m["response_length_non_aborted/clip_ratio"] =
      Item(kept_len.eq(static_cast<double>(T)).to(at::kDouble).mean());
  m["response/aborted_ratio"] = Item(aborted.to(at::kDouble).mean());
  AddMeanMaxMin("prompt_length", prompt_length, m);
  m["prompt_length/clip_ratio"] =
      Item(prompt_length.eq(max_prompt_length).to(at::kDouble).mean());
  AddListStats("num_turns", in.num_turns, m);
  AddListStats("tool_call_counts", in.tool_call_counts, m);
  return m;
}

MetricMap ComputeTimingMetrics(const std::map<std::string, double>& timing_raw,
                               int64_t num_prompt_tokens,
                               int64_t num_response_tokens) {
  const double overall =
      static_cast<double>(num_prompt_tokens + num_response_tokens);
  std::map<std::string, double> tokens = {
      {"gen", static_cast<double>(num_response_tokens)},
      {"ref", overall},
      {"values", overall},
      {"adv", overall},
      {"update_critic", overall},
      {"update_actor", overall}};
  MetricMap m;
  for (const auto& [name, seconds] : timing_raw) {
    m["timing_s/" + name] = seconds;
    auto it = tokens.find(name);
    if (it != tokens.end() && it->second > 0) {
      m["timing_per_token_ms/" + name] = seconds * 1000.0 / it->second;
    }
  }
  return m;
}

MetricMap ComputeThroughputMetrics(int64_t total_num_tokens, double step_time_s,
                                   int64_t n_gpus) {
  return {{"perf/total_num_tokens", static_cast<double>(total_num_tokens)},
          {"perf/time_per_step", step_time_s},
          {"perf/throughput", static_cast<double>(total_num_tokens) /
                                  (step_time_s * static_cast<double>(n_gpus))}};
}

MetricMap ComputeMfuMetrics(const profiler::FlopsModelDims& dims,
                            const std::vector<int64_t>& seqlens,
                            const std::map<std::string, double>& timing_raw,
                            int64_t actor_epochs, int64_t critic_epochs,
                            double peak_flops, int64_t world_size) {
  const double train = profiler::TrainingFlops(dims, seqlens);
  const struct {
    const char* key;
    const char* phase;
    double flops;
  } kEntries[] = {
      {"perf/mfu/actor", "update_actor", train * actor_epochs},
      {"perf/mfu/actor_infer", "old_log_prob",
       profiler::ForwardFlops(dims, seqlens)},
      {"perf/mfu/critic", "update_critic", train * critic_epochs},
  };
  MetricMap m;
  for (const auto& e : kEntries) {
    auto it = timing_raw.find(e.phase);
    if (it == timing_raw.end()) continue;
    m[e.key] = profiler::Mfu(e.flops, it->second, peak_flops, world_size);
  }
  return m;
}

absl::StatusOr<MetricMap> ComputeRolloutProbsDiffMetrics(
    const at::Tensor& old_log_probs, const at::Tensor& rollout_log_probs,
    const at::Tensor& response_mask) {
  at::NoGradGuard no_grad;
  at::Tensor valid = response_mask.to(at::kBool);
  at::Tensor actor =
      at::exp(old_log_probs.to(at::kDouble)).masked_select(valid);
  at::Tensor rollout =
      at::exp(rollout_log_probs.to(at::kDouble)).masked_select(valid);
  if (actor.numel() < 2) {
    return absl::InvalidArgumentError(
        "rollout probs diff metrics need at least 2 response tokens");
  }
  at::Tensor diff = (actor - rollout).abs();
  at::Tensor da = actor - actor.mean(), dr = rollout - rollout.mean();
  const double corr =
      Item((da * dr).sum() / at::sqrt((da * da).sum() * (dr * dr).sum()));
  return MetricMap{{"training/rollout_probs_diff_valid", 1.0},
                   {"training/rollout_probs_diff_max", Item(diff.max())},
                   {"training/rollout_probs_diff_mean", Item(diff.mean())},
                   {"training/rollout_probs_diff_std", Item(at::std(diff))},
                   {"training/rollout_actor_probs_pearson_corr", corr}};
}

MetricMap ComputeVarianceProxyMetrics(const VarianceProxyInputs& in) {
  if (!in.sum_pi_squared.defined() || !in.old_log_probs.defined() ||
      !in.advantages.defined()) {
    return {};
  }
  at::NoGradGuard no_grad;
  const at::Tensor mask = in.response_mask.to(at::kDouble);
  at::Tensor w_token = 1.0 - 2.0 * at::exp(in.old_log_probs.to(at::kDouble)) +
                       in.sum_pi_squared.to(at::kDouble);
  at::Tensor adv = MaskedMean(in.advantages.to(at::kDouble), mask, -1);
  at::Tensor a2 = adv * adv;
  at::Tensor proxy2;
  at::Tensor w_values;
  if (in.rollout_is_weights.defined()) {
    // verl scales W by ρ², then recovers the unscaled W for proxy 2.
    const at::Tensor rho = in.rollout_is_weights.to(at::kDouble);
    const at::Tensor rho2 = rho * rho;
    w_token = w_token * rho2;
    w_values = MaskedSum(w_token, mask, -1);
    const at::Tensor rho_seq = MaskedMean(rho, mask, -1);
    const at::Tensor w_orig =
        MaskedSum(w_token / rho2.clamp_min(1e-10), mask, -1).clamp_min(0.0);
    proxy2 = (rho_seq * rho_seq * a2 * w_orig).mean();
  } else {
    w_values = MaskedSum(w_token, mask, -1);
    proxy2 = (a2 * w_values.clamp_min(0.0)).mean();
  }
  const double total_power = Item(proxy2);
  double signal = 0.0, noise = 0.0;
  if (in.grad_norm >= 0.0) {
    signal = in.grad_norm * in.grad_norm;
    const int64_t n = adv.size(0);
    if (n > 1) noise = std::max(0.0, (total_power - signal) / (n - 1));
  }
  return MetricMap{
      {"variance_proxy/proxy1_signal_strength", signal},
      {"variance_proxy/proxy2_total_power", total_power},
      {"variance_proxy/proxy3_pure_noise", noise},
      {"variance_proxy/expected_a_squared", Item(a2.mean())},
      {"variance_proxy/expected_w", Item(w_values.mean())},
  };
}

MetricMap ComputeDiversityMetrics(const ValidationSamples& s) {
  if (s.responses.size() != s.uids.size() || s.uids.empty()) return {};
  const auto core =
      s.numeric.count("acc") ? s.numeric.find("acc") : s.numeric.find("reward");
  if (core == s.numeric.end() || core->second.size() != s.uids.size()) {
    return {};
  }
  // source -> uid -> (samples, correct response -> count)
  struct Prompt {
    int64_t n = 0;
    std::map<std::string, int64_t> correct;
  };
  std::map<std::string, std::map<std::string, Prompt>> by_source;
  for (size_t i = 0; i < s.uids.size(); ++i) {
    Prompt& p = by_source[s.data_sources[i]][s.uids[i]];
    ++p.n;
    if (core->second[i] > 0) ++p.correct[s.responses[i]];
  }
  MetricMap out;
  for (const auto& [source, prompts] : by_source) {
    double distinct = 0, entropy = 0;
    int64_t n_max = 0;
    for (const auto& [uid, p] : prompts) {
      n_max = std::max(n_max, p.n);
      distinct += p.correct.size();
      int64_t total = 0;
      for (const auto& [text, c] : p.correct) total += c;
      for (const auto& [text, c] : p.correct) {
        const double q = static_cast<double>(c) / total;
        entropy -= q * std::log(q);
      }
    }
    const double n = static_cast<double>(prompts.size());
    const std::string prefix = absl::StrCat("val-aux/", source, "/diversity/");
    out[absl::StrCat(prefix, "distinct_correct@", n_max)] = distinct / n;
    out[absl::StrCat(prefix, "correct_entropy@", n_max)] = entropy / n;
  }
  return out;
}

MetricMap ReduceMetrics(
    const std::map<std::string, std::vector<double>>& lists) {
  MetricMap m;
  for (const auto& [key, v] : lists) {
    if (v.empty()) continue;
    if (key.find("max") != std::string::npos) {
      m[key] = *std::max_element(v.begin(), v.end());
    } else if (key.find("min") != std::string::npos) {
      m[key] = *std::min_element(v.begin(), v.end());
    } else {
      m[key] = Mean(v);
    }
  }
  return m;
}

absl::StatusOr<MetricMap> ComputeValidationMetrics(const ValidationSamples& s,
                                                   uint32_t seed) {
  const size_t n_samples = s.data_sources.size();
  if (s.uids.size() != n_samples ||
      (!s.preds.empty() && s.preds.size() != n_samples)) {
    return absl::InvalidArgumentError(
        "validation metrics: data_sources, uids and preds differ in length");
  }
  for (const auto& [name, vals] : s.numeric) {
    if (vals.size() != n_samples) {
      return absl::InvalidArgumentError(
          absl::StrCat("validation metrics: variable '", name, "' has ",
                       vals.size(), " values for ", n_samples, " samples"));
    }
  }
  // source → uid → sample indices (insertion order of uids kept).
  std::map<std::string, std::vector<std::string>> uid_order;
  std::map<std::string, std::map<std::string, std::vector<size_t>>> rows;
  for (size_t i = 0; i < n_samples; ++i) {
    auto& by_uid = rows[s.data_sources[i]];
    if (!by_uid.count(s.uids[i]))
      uid_order[s.data_sources[i]].push_back(s.uids[i]);
    by_uid[s.uids[i]].push_back(i);
  }
  // source → var → metric → values over uids.
  std::map<std::string,
           std::map<std::string, std::map<std::string, std::vector<double>>>>
      acc;
  for (const auto& [source, uids] : uid_order) {
    for (const std::string& uid : uids) {
      const std::vector<size_t>& idx = rows[source][uid];
      for (const auto& [var, all_vals] : s.numeric) {
        std::vector<double> vals;
        std::vector<std::string> preds;
        for (size_t i : idx) {
          vals.push_back(all_vals[i]);
          if (!s.preds.empty()) preds.push_back(s.preds[i]);
        }
        auto& out = acc[source][var];
        const size_t n = vals.size();
        out[absl::StrCat("mean@", n)].push_back(Mean(vals));
        if (n <= 1) continue;
        out[absl::StrCat("std@", n)].push_back(PopulationStd(vals));
        std::vector<size_t> ks;
        for (size_t k = 2; k < n; k *= 2) ks.push_back(k);
        ks.push_back(n);
        for (size_t k : ks) {
          std::mt19937 rng(seed);
          std::uniform_int_distribution<size_t> pick(0, n - 1);
          std::vector<double> best, worst, maj;
          for (int b = 0; b < 1000; ++b) {
            std::vector<double> sv;
            std::vector<std::string> sp;
            for (size_t j = 0; j < k; ++j) {
              const size_t r = pick(rng);
              sv.push_back(vals[r]);
              if (!preds.empty()) sp.push_back(preds[r]);
            }
            best.push_back(*std::max_element(sv.begin(), sv.end()));
            worst.push_back(*std::min_element(sv.begin(), sv.end()));
            if (!preds.empty()) maj.push_back(MajorityValue(sv, sp));
          }
          out[absl::StrCat("best@", k, "/mean")].push_back(Mean(best));
          out[absl::StrCat("best@", k, "/std")].push_back(PopulationStd(best));
          out[absl::StrCat("worst@", k, "/mean")].push_back(Mean(worst));
          out[absl::StrCat("worst@", k, "/std")].push_back(
              PopulationStd(worst));
          if (!preds.empty()) {
            out[absl::StrCat("maj@", k, "/mean")].push_back(Mean(maj));
            out[absl::StrCat("maj@", k, "/std")].push_back(PopulationStd(maj));
          }
        }
      }
    }
  }
  MetricMap m;
  for (const auto& [source, vars] : acc) {
    const std::string core_var = vars.count("acc") ? "acc" : "reward";
    for (const auto& [var, metrics] : vars) {
      int64_t n_max = 0;
      for (const auto& [name, v] : metrics) {
        std::vector<std::string> at = absl::StrSplit(name, '@');
        std::vector<std::string> num = absl::StrSplit(at.back(), '/');
        n_max = std::max<int64_t>(n_max, std::stoll(num[0]));
      }
      for (const auto& [name, v] : metrics) {
        const bool core =
            var == core_var &&
            (name.rfind("mean", 0) == 0 || name.rfind("maj", 0) == 0 ||
             name.rfind("best", 0) == 0) &&
            name.find(absl::StrCat("@", n_max)) != std::string::npos;
        m[absl::StrCat(core ? "val-core/" : "val-aux/", source, "/", var, "/",
                       name)] = Mean(v);
      }
    }
  }
  return m;
}

}  // namespace verl::rl
