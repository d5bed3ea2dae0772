// File: verl/rl/algos/advantage.cc
#include "verl/rl/algos/advantage.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/registry.h"
#include "verl/core/status.h"
#include "verl/rl/algos/flowrl.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {
namespace {

// Sequence scores s_i = Σ_t r_{i,t} as doubles.
std::vector<double> SequenceScores(const at::Tensor& rewards) {
  at::Tensor s = rewards.sum(-1).to(at::kDouble).cpu().contiguous();
  return std::vector<double>(s.data_ptr<double>(),
                             s.data_ptr<double>() + s.numel());
}

// Per-row scalar a_i broadcast over T and masked: a_i·m.
at::Tensor BroadcastMasked(const std::vector<double>& per_row,
                           const at::Tensor& rewards, const at::Tensor& mask) {
  at::Tensor col =
      at::tensor(per_row, at::kDouble).to(rewards.options()).unsqueeze(-1);
  return col * mask.to(rewards.scalar_type());
}

double Mean(const std::vector<double>& v, const std::vector<int64_t>& rows) {
  double s = 0.0;
  for (int64_t r : rows) s += v[r];
  return s / static_cast<double>(rows.size());
}

// Unbiased (N−1) standard deviation, like torch.std.
double UnbiasedStd(const std::vector<double>& v,
                   const std::vector<int64_t>& rows) {
  const double mu = Mean(v, rows);
  double ss = 0.0;
  for (int64_t r : rows) ss += (v[r] - mu) * (v[r] - mu);
  return std::sqrt(ss / static_cast<double>(rows.size() - 1));
}

void CheckIndex(const at::Tensor& rewards,
                const std::vector<std::string>& index) {
  CHECK_EQ(static_cast<int64_t>(index.size()), rewards.size(0))
      << "one uid per row is required";
}

at::Tensor ReverseCumsum(const at::Tensor& x) {
  return x.flip({-1}).cumsum(-1).flip({-1});
}

absl::Status Require(const at::Tensor& t, const char* what,
                     const std::string& estimator) {
  if (t.defined()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "adv_estimator '", estimator, "' needs '", what, "' in the batch"));
}

absl::Status RequireIndex(const AdvantageInputs& in,
                          const std::string& estimator) {
  if (static_cast<int64_t>(in.index.size()) == in.token_level_rewards.size(0))
    return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "adv_estimator '", estimator, "' needs one uid per row (got ",
      in.index.size(), " uids for ", in.token_level_rewards.size(0), " rows)"));
}

// Batch whitening of an estimator's advantages; errors name the estimator.
absl::StatusOr<at::Tensor> Whiten(const char* estimator, const at::Tensor& x,
                                  const at::Tensor& mask) {
  absl::StatusOr<at::Tensor> w = MaskedWhiten(x, mask);
  if (!w.ok()) {
    return Annotate(w.status(), absl::StrCat("adv_estimator '", estimator,
                                             "' (whitening over the batch)"));
  }
  return w;
}

void RegisterBuiltins(std::map<std::string, AdvantageEstimatorFn>& fns);

core::Registry<AdvantageEstimatorFn>& GetRegistry() {
  static auto* registry = [] {
    std::map<std::string, AdvantageEstimatorFn> builtins;
    RegisterBuiltins(builtins);
    return new core::Registry<AdvantageEstimatorFn>("algorithm.adv_estimator",
                                                    std::move(builtins));
  }();
  return *registry;
}

}  // namespace

GroupStats GroupMeanStd(const at::Tensor& scores, const at::Tensor& gidx,
                        double eps) {
  at::NoGradGuard no_grad;
  at::Tensor x = scores.reshape(-1);
  at::Tensor ids = gidx.reshape(-1).to(at::kLong);
  const int64_t G = ids.numel() > 0 ? ids.max().item<int64_t>() + 1 : 0;
  at::Tensor count =
      at::zeros({G}, x.options()).index_add_(0, ids, at::ones_like(x));
  at::Tensor sum = at::zeros({G}, x.options()).index_add_(0, ids, x);
  at::Tensor sum2 = at::zeros({G}, x.options()).index_add_(0, ids, x * x);
  at::Tensor mean = sum / count.clamp_min(1.0);
  at::Tensor var =
      (sum2 - sum * sum / count.clamp_min(1.0)) / (count - 1.0).clamp_min(1.0);
  at::Tensor std = at::sqrt(var.clamp_min(eps));
  at::Tensor singleton = count.le(1.0);
  return {at::where(singleton, at::zeros_like(mean), mean),
          at::where(singleton, at::ones_like(std), std), count};
}

std::vector<std::vector<int64_t>> GroupIndicesByUid(
    const std::vector<std::string>& index) {
  std::vector<std::vector<int64_t>> groups;
  std::unordered_map<std::string, size_t> slot;
  for (size_t i = 0; i < index.size(); ++i) {
    auto [it, inserted] = slot.emplace(index[i], groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(static_cast<int64_t>(i));
  }
  return groups;
}

absl::StatusOr<AdvantageOutput> ComputeGaeAdvantageReturn(
    const at::Tensor& rewards, const at::Tensor& values,
    const at::Tensor& response_mask, double gamma, double lam) {
  at::NoGradGuard no_grad;
  const int64_t T = rewards.size(-1);
  at::Tensor m = response_mask.to(rewards.scalar_type());
  at::Tensor next_value = at::zeros({rewards.size(0)}, rewards.options());
  at::Tensor last_gae = at::zeros_like(next_value);
  std::vector<at::Tensor> reversed;
  reversed.reserve(T);
  for (int64_t t = T - 1; t >= 0; --t) {
    at::Tensor r_t = rewards.select(-1, t);
    at::Tensor v_t = values.select(-1, t);
    at::Tensor m_t = m.select(-1, t);
    at::Tensor delta = r_t + gamma * next_value - v_t;
    at::Tensor gae = delta + gamma * lam * last_gae;
    next_value = v_t * m_t + (1.0 - m_t) * next_value;
    last_gae = gae * m_t + (1.0 - m_t) * last_gae;
    reversed.push_back(last_gae);
  }
  std::reverse(reversed.begin(), reversed.end());
  at::Tensor advantages = at::stack(reversed, -1);
  AdvantageOutput out;
  out.returns = advantages + values;
  VERL_ASSIGN_OR_RETURN(out.advantages, Whiten("gae", advantages, m));
  return out;
}

AdvantageOutput ComputeGrpoOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  std::vector<double> a(s.size());
  for (const auto& rows : GroupIndicesByUid(index)) {
    double mu = 0.0, sigma = 1.0;
    if (rows.size() > 1) {
      mu = Mean(s, rows);
      sigma = UnbiasedStd(s, rows);
    }
    for (int64_t r : rows) {
      a[r] = norm_adv_by_std ? (s[r] - mu) / (sigma + epsilon) : s[r] - mu;
    }
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return {adv, adv};
}

AdvantageOutput ComputeGrpoVectorizedOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon) {
  CheckIndex(rewards, index);
  at::NoGradGuard no_grad;
  // Dense group ids in order of first appearance.
  std::vector<int64_t> gid(index.size());
  const auto groups = GroupIndicesByUid(index);
  for (size_t g = 0; g < groups.size(); ++g)
    for (int64_t r : groups[g]) gid[r] = static_cast<int64_t>(g);
  at::Tensor scores = rewards.sum(-1);
  at::Tensor ids = at::tensor(gid, at::kLong).to(scores.device());
  GroupStats g = GroupMeanStd(scores, ids, epsilon);
  at::Tensor centered = scores - g.mean.index_select(0, ids);
  at::Tensor a = norm_adv_by_std
                     ? centered / (g.std.index_select(0, ids) + epsilon)
                     : centered;
  at::Tensor adv = a.unsqueeze(-1) * response_mask.to(rewards.scalar_type());
  return {adv, adv};
}

absl::StatusOr<AdvantageOutput> ComputeGrpoPasskOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, bool norm_adv_by_std,
    double epsilon) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  std::vector<double> a(s.size(), 0.0);
  for (const auto& rows : GroupIndicesByUid(index)) {
    if (rows.size() < 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "grpo_passk needs at least 2 responses per uid; uid '",
          index[rows[0]], "' has ", rows.size(), " (set rollout.n >= 2)"));
    }
    int64_t best = rows[0];
    for (int64_t r : rows)
      if (s[r] > s[best]) best = r;
    double second = -INFINITY;
    for (int64_t r : rows)
      if (r != best) second = std::max(second, s[r]);
    double adv = s[best] - second;
    if (norm_adv_by_std) adv /= UnbiasedStd(s, rows) + epsilon;
    a[best] = adv;
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return AdvantageOutput{adv, adv};
}

AdvantageOutput ComputeRlooOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  std::vector<double> a = s;
  for (const auto& rows : GroupIndicesByUid(index)) {
    const double n = static_cast<double>(rows.size());
    if (rows.size() < 2) continue;
    const double mu = Mean(s, rows);
    for (int64_t r : rows) a[r] = s[r] * n / (n - 1.0) - mu * n / (n - 1.0);
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return {adv, adv};
}

AdvantageOutput ComputeRlooVectorizedOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  std::vector<double> a(s.size(), 0.0);
  for (const auto& rows : GroupIndicesByUid(index)) {
    const double n = static_cast<double>(rows.size());
    double total = 0.0;
    for (int64_t r : rows) total += s[r];
    for (int64_t r : rows)
      a[r] =
          rows.size() > 1 ? (n * s[r] - total) / std::max(n - 1.0, 1.0) : 0.0;
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return {adv, adv};
}

absl::StatusOr<AdvantageOutput> ComputeReinforcePlusPlusOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask, double gamma) {
  at::NoGradGuard no_grad;
  at::Tensor m = response_mask.to(rewards.scalar_type());
  at::Tensor returns = at::zeros_like(rewards);
  at::Tensor running = at::zeros({rewards.size(0)}, rewards.options());
  for (int64_t t = rewards.size(-1) - 1; t >= 0; --t) {
    running = rewards.select(-1, t) + gamma * running;
    returns.select(-1, t).copy_(running);
    running = running * m.select(-1, t);
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor adv,
                        Whiten("reinforce_plus_plus", returns, m));
  return AdvantageOutput{adv * m, returns};
}

absl::StatusOr<AdvantageOutput>
ComputeReinforcePlusPlusBaselineOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  std::vector<double> a(s.size());
  for (const auto& rows : GroupIndicesByUid(index)) {
    const double mu = rows.size() > 1 ? Mean(s, rows) : 0.0;
    for (int64_t r : rows) a[r] = s[r] - mu;
  }
  at::Tensor m = response_mask.to(rewards.scalar_type());
  at::Tensor tiled = BroadcastMasked(a, rewards, m);
  VERL_ASSIGN_OR_RETURN(at::Tensor adv,
                        Whiten("reinforce_plus_plus_baseline", tiled, m));
  adv = adv * m;
  return AdvantageOutput{adv, adv};
}

AdvantageOutput ComputeRemaxOutcomeAdvantage(const at::Tensor& rewards,
                                             const at::Tensor& reward_baselines,
                                             const at::Tensor& response_mask) {
  at::Tensor m = response_mask.to(rewards.scalar_type());
  at::Tensor returns = ReverseCumsum(rewards * m);
  at::Tensor adv =
      returns - reward_baselines.to(rewards.scalar_type()).unsqueeze(-1) * m;
  return {adv, returns};
}

AdvantageOutput ComputeOpoOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  at::Tensor len_t = response_mask.to(at::kDouble).sum(-1).cpu().contiguous();
  const double* len = len_t.data_ptr<double>();
  std::vector<double> a(s.size());
  for (const auto& rows : GroupIndicesByUid(index)) {
    double b = 0.0;
    if (rows.size() > 1) {
      double num = 0.0, den = 0.0;
      for (int64_t r : rows) {
        num += len[r] * s[r];
        den += len[r];
      }
      b = num / den;
    }
    for (int64_t r : rows) a[r] = s[r] - b;
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return {adv, adv};
}

AdvantageOutput ComputeGpgOutcomeAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const std::vector<std::string>& index, double f_norm) {
  CheckIndex(rewards, index);
  std::vector<double> s = SequenceScores(rewards);
  int64_t nonzero = 0;
  for (double v : s) nonzero += v != 0.0;
  const double alpha = static_cast<double>(s.size()) /
                       static_cast<double>(std::max<int64_t>(nonzero, 1));
  std::vector<double> a(s.size());
  for (const auto& rows : GroupIndicesByUid(index)) {
    const double mu = rows.size() > 1 ? Mean(s, rows) : 0.0;
    for (int64_t r : rows) a[r] = alpha * (s[r] - mu) / f_norm;
  }
  at::Tensor adv = BroadcastMasked(a, rewards, response_mask);
  return {adv, adv};
}

AdvantageOutput ComputeOptimalTokenBaselineAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const at::Tensor& old_log_prob, const at::Tensor& sum_pi_squared,
    const std::vector<std::string>& index, const at::Tensor& rollout_is_weights,
    bool handle_zero_tail, double epsilon) {
  CheckIndex(rewards, index);
  at::NoGradGuard no_grad;
  const auto dtype = rewards.scalar_type();
  at::Tensor m = response_mask.to(at::kDouble);
  at::Tensor returns = ReverseCumsum(rewards.to(at::kDouble) * m);
  at::Tensor pi = at::exp(old_log_prob.to(at::kDouble));
  at::Tensor w = 1.0 - 2.0 * pi + sum_pi_squared.to(at::kDouble);
  if (rollout_is_weights.defined()) {
    at::Tensor rho = rollout_is_weights.to(at::kDouble);
    w = w * rho * rho;
  }
  at::Tensor W = (w * m).cumsum(-1);
  at::Tensor baseline = at::zeros_like(returns);
  at::Tensor lengths = m.sum(-1).to(at::kLong).cpu();
  for (const auto& rows : GroupIndicesByUid(index)) {
    if (rows.size() < 2) continue;
    at::Tensor idx = at::tensor(rows, at::kLong).to(returns.device());
    at::Tensor g = returns.index_select(0, idx);
    at::Tensor wm = W.index_select(0, idx) * m.index_select(0, idx);
    at::Tensor b = (g * wm).sum(0) / (wm.sum(0) + epsilon);  // [T]
    for (int64_t r : rows) baseline[r].copy_(b);
    if (handle_zero_tail) {
      std::vector<int64_t> lens;
      for (int64_t r : rows) lens.push_back(lengths[r].item<int64_t>());
      const int64_t max_len = *std::max_element(lens.begin(), lens.end());
      int64_t n_max = 0, second = 0;
      for (int64_t l : lens) {
        if (l == max_len)
          ++n_max;
        else
          second = std::max(second, l);
      }
      if (n_max == 1 && second < returns.size(-1)) {
        for (size_t k = 0; k < rows.size(); ++k)
          if (lens[k] == max_len) baseline[rows[k]].slice(0, second).zero_();
      }
    }
  }
  at::Tensor adv = ((returns - baseline) * m).to(dtype);
  return {adv, returns.to(dtype)};
}

AdvantageOutput ComputeMultiTurnOptimalTokenBaselineAdvantage(
    const at::Tensor& rewards, const at::Tensor& response_mask,
    const at::Tensor& old_log_prob, const at::Tensor& sum_pi_squared,
    const std::vector<std::string>& index, const at::Tensor& rollout_is_weights,
    bool handle_zero_tail, double epsilon) {
  at::NoGradGuard no_grad;
  const int64_t B = rewards.size(0);
  // positions[i] = original columns of row i's trained tokens, in order.
  std::vector<at::Tensor> positions(B);
  at::Tensor mask_bool = response_mask.to(at::kBool);
  auto compact = [&](const at::Tensor& x) {
    if (!x.defined()) return x;
    at::Tensor out = at::zeros_like(x);
    for (int64_t i = 0; i < B; ++i) {
      const int64_t n = positions[i].numel();
      out[i].slice(0, 0, n).copy_(x[i].index_select(0, positions[i]));
    }
    return out;
  };
  for (int64_t i = 0; i < B; ++i)
    positions[i] = mask_bool[i].nonzero().squeeze(-1);
  at::Tensor compact_mask = at::zeros_like(response_mask);
  for (int64_t i = 0; i < B; ++i)
    compact_mask[i].slice(0, 0, positions[i].numel()).fill_(1);
  // verl leaves zero-length responses out of the group statistics: give each
  // its own singleton group (baseline 0; its advantages are masked to 0).
  std::vector<std::string> groups = index;
  for (int64_t i = 0; i < B; ++i)
    if (positions[i].numel() == 0) groups[i] = absl::StrCat("\x01empty-", i);
  at::Tensor masked_rewards = rewards * response_mask.to(rewards.scalar_type());
  AdvantageOutput c = ComputeOptimalTokenBaselineAdvantage(
      compact(masked_rewards), compact_mask, compact(old_log_prob),
      compact(sum_pi_squared), groups, compact(rollout_is_weights),
      handle_zero_tail, epsilon);
  // Returns as verl: (r·m) reverse-cumsum on the whole grid, so masked
  // positions inside a response (tool tokens) carry the reward-to-go.
  AdvantageOutput out{at::zeros_like(rewards), ReverseCumsum(masked_rewards)};
  for (int64_t i = 0; i < B; ++i) {
    const int64_t n = positions[i].numel();
    out.advantages[i].index_copy_(0, positions[i],
                                  c.advantages[i].slice(0, 0, n));
  }
  return out;
}

namespace {

void RegisterBuiltins(std::map<std::string, AdvantageEstimatorFn>& fns) {
  using In = AdvantageInputs;
  using Cfg = AdvantageConfig;
  using Out = absl::StatusOr<AdvantageOutput>;
  fns["gae"] = [](const In& in, const Cfg& c) -> Out {
    absl::Status st = Require(in.values, "values", "gae");
    if (!st.ok()) return st;
    return ComputeGaeAdvantageReturn(in.token_level_rewards, in.values,
                                     in.response_mask, c.gamma, c.lam);
  };
  // Outcome estimators that only need rewards, mask and uids.
  auto grouped = [&fns](const std::string& name, auto fn) {
    fns[name] = [name, fn](const In& in, const Cfg& c) -> Out {
      absl::Status st = RequireIndex(in, name);
      if (!st.ok()) return st;
      return fn(in, c);
    };
  };
  // verl's recipe/flowrl estimator: group-centred scores (FlowRL's r̂).
  grouped("flowrl", [](const In& in, const Cfg&) -> Out {
    at::Tensor adv = ComputeFlowRlOutcomeAdvantage(in.token_level_rewards,
                                                   in.response_mask, in.index);
    return AdvantageOutput{adv, adv};
  });
  grouped("grpo", [](const In& in, const Cfg& c) -> Out {
    return ComputeGrpoOutcomeAdvantage(in.token_level_rewards, in.response_mask,
                                       in.index, c.norm_adv_by_std_in_grpo);
  });
  grouped("grpo_vectorized", [](const In& in, const Cfg& c) -> Out {
    return ComputeGrpoVectorizedOutcomeAdvantage(in.token_level_rewards,
                                                 in.response_mask, in.index,
                                                 c.norm_adv_by_std_in_grpo);
  });
  grouped("grpo_passk", [](const In& in, const Cfg& c) -> Out {
    return ComputeGrpoPasskOutcomeAdvantage(in.token_level_rewards,
                                            in.response_mask, in.index,
                                            c.norm_adv_by_std_in_grpo);
  });
  grouped("rloo", [](const In& in, const Cfg&) -> Out {
    return ComputeRlooOutcomeAdvantage(in.token_level_rewards, in.response_mask,
                                       in.index);
  });
  grouped("rloo_vectorized", [](const In& in, const Cfg&) -> Out {
    return ComputeRlooVectorizedOutcomeAdvantage(in.token_level_rewards,
                                                 in.response_mask, in.index);
  });
  fns["reinforce_plus_plus"] = [](const In& in, const Cfg& c) -> Out {
    return ComputeReinforcePlusPlusOutcomeAdvantage(in.token_level_rewards,
                                                    in.response_mask, c.gamma);
  };
  grouped("reinforce_plus_plus_baseline", [](const In& in, const Cfg&) -> Out {
    return ComputeReinforcePlusPlusBaselineOutcomeAdvantage(
        in.token_level_rewards, in.response_mask, in.index);
  });
  fns["remax"] = [](const In& in, const Cfg&) -> Out {
    absl::Status st = Require(in.reward_baselines, "reward_baselines", "remax");
    if (!st.ok()) return st;
    return ComputeRemaxOutcomeAdvantage(in.token_level_rewards,
                                        in.reward_baselines, in.response_mask);
  };
  grouped("opo", [](const In& in, const Cfg&) -> Out {
    return ComputeOpoOutcomeAdvantage(in.token_level_rewards, in.response_mask,
                                      in.index);
  });
  grouped("gpg", [](const In& in, const Cfg& c) -> Out {
    return ComputeGpgOutcomeAdvantage(in.token_level_rewards, in.response_mask,
                                      in.index, c.gpg_f_norm);
  });
  auto otb = [](const std::string& name, bool multi_turn,
                bool default_zero_tail) {
    return [=](const In& in, const Cfg& c) -> Out {
      absl::Status st = Require(in.old_log_prob, "old_log_probs", name);
      if (st.ok()) {
        st = Require(in.sum_pi_squared,
                     "sum_pi_squared (set actor.calculate_sum_pi_squared=True)",
                     name);
      }
      if (!st.ok()) return st;
      const bool zero_tail = c.handle_zero_tail.value_or(default_zero_tail);
      auto fn = multi_turn ? ComputeMultiTurnOptimalTokenBaselineAdvantage
                           : ComputeOptimalTokenBaselineAdvantage;
      return fn(in.token_level_rewards, in.response_mask, in.old_log_prob,
                in.sum_pi_squared, in.index, in.rollout_is_weights, zero_tail,
                1e-8);
    };
  };
  grouped("optimal_token_baseline",
          otb("optimal_token_baseline", false, false));
  grouped("tir_optimal_token_baseline",
          otb("tir_optimal_token_baseline", true, true));
}

}  // namespace

absl::Status RegisterAdvantageEstimator(const std::string& name,
                                        AdvantageEstimatorFn fn) {
  return GetRegistry().Register(name, std::move(fn));
}

absl::StatusOr<AdvantageEstimatorFn> GetAdvantageEstimator(
    const std::string& name) {
  return GetRegistry().Get(name);
}

std::vector<std::string> AdvantageEstimatorNames() {
  return GetRegistry().Names();
}

absl::StatusOr<AdvantageOutput> ComputeAdvantage(const std::string& name,
                                                 const AdvantageInputs& in,
                                                 const AdvantageConfig& cfg) {
  absl::StatusOr<AdvantageEstimatorFn> fn = GetAdvantageEstimator(name);
  if (!fn.ok()) return fn.status();
  return (*fn)(in, cfg);
}

}  // namespace verl::rl
