// File: verl/rl/rewards/reward_manager.cc
#include "verl/rl/rewards/reward_manager.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>

#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "verl/rl/algos/dapo.h"

namespace verl::rl {
namespace {

// Appends sample i's extras, padding keys other samples reported.
void AddExtras(size_t i, size_t batch, const reward::RewardResult& r,
               bool log_score, RewardOutput& out) {
  auto numeric = r.numeric;
  if (log_score) numeric["score"] = r.score;
  for (const auto& [k, v] : numeric) {
    auto& col = out.extra_numeric[k];
    col.resize(batch, NAN);
    col[i] = v;
  }
  for (const auto& [k, v] : r.text) {
    auto& col = out.extra_text[k];
    col.resize(batch);
    col[i] = v;
  }
}

}  // namespace

ComputeScoreFn DefaultScoreFn() {
  return [](const reward::ScoreRequest& q) {
    return reward::DefaultComputeScore(q.data_source, q.solution,
                                       q.ground_truth, q.extra_info);
  };
}

BatchComputeScoreFn ExternalCommandScoreFn(const std::string& command,
                                           double timeout_s) {
  return [command, timeout_s](const std::vector<reward::ScoreRequest>& qs) {
    return reward::RunExternalScorer(command, qs, timeout_s);
  };
}

absl::StatusOr<std::unique_ptr<RewardManager>> RewardManager::Create(
    const RewardManagerConfig& config, ComputeScoreFn fn,
    BatchComputeScoreFn batch_fn) {
  if (config.name != "naive" && config.name != "batch" &&
      config.name != "dapo") {
    return absl::InvalidArgumentError(
        absl::StrCat("reward_model.reward_manager: unknown manager '",
                     config.name, "' (expected naive, batch or dapo)"));
  }
  if (config.name == "dapo" && config.overlong_buffer_enable) {
    absl::StatusOr<double> check = OverlongBufferPenalty(
        0, config.max_resp_len, config.overlong_buffer_len, 1.0);
    if (!check.ok()) return check.status();
  }
  if (!fn && !batch_fn) {
    return absl::InvalidArgumentError("reward manager needs a score function");
  }
  return std::unique_ptr<RewardManager>(
      new RewardManager(config, std::move(fn), std::move(batch_fn)));
}

absl::StatusOr<RewardOutput> RewardManager::Score(
    const std::vector<RewardRequest>& batch, int64_t response_length) const {
  const size_t B = batch.size();
  const bool dapo = config_.name == "dapo";
  std::vector<reward::ScoreRequest> samples;
  for (const RewardRequest& r : batch) {
    reward::ScoreRequest q = r.sample;
    if (dapo && !config_.eos_text.empty() &&
        absl::EndsWith(q.solution, config_.eos_text)) {
      q.solution.resize(q.solution.size() - config_.eos_text.size());
    }
    samples.push_back(std::move(q));
  }
  std::vector<reward::RewardResult> results;
  if (config_.name == "batch" && batch_fn_) {
    absl::StatusOr<std::vector<reward::RewardResult>> r = batch_fn_(samples);
    if (!r.ok()) return r.status();
    if (r->size() != B) {
      return absl::InternalError(absl::StrCat("batch reward function returned ",
                                              r->size(), " scores for ", B,
                                              " samples"));
    }
    results = *std::move(r);
  } else {
    for (const auto& q : samples) {
      absl::StatusOr<reward::RewardResult> r = fn_(q);
      if (!r.ok()) return r.status();
      results.push_back(*std::move(r));
    }
  }
  RewardOutput out;
  std::vector<float> flat(B * response_length, 0.0f);
  for (size_t i = 0; i < B; ++i) {
    const reward::RewardResult& r = results[i];
    const bool dict_like = !r.numeric.empty() || !r.text.empty();
    AddExtras(i, B, r, dict_like, out);
    double reward = r.score;
    if (dapo) {
      if (!dict_like) {
        auto& acc = out.extra_numeric["acc"];
        acc.resize(B, NAN);
        acc[i] = r.score;
      }
      if (config_.overlong_buffer_enable) {
        absl::StatusOr<double> penalty = OverlongBufferPenalty(
            batch[i].valid_response_length, config_.max_resp_len,
            config_.overlong_buffer_len, config_.overlong_penalty_factor);
        if (!penalty.ok()) return penalty.status();
        reward += *penalty;
        if (config_.overlong_log) {
          for (const auto& [k, v] :
               {std::pair<const char*, double>{"overlong_reward", *penalty},
                {"overlong", *penalty < 0 ? 1.0 : 0.0}}) {
            auto& col = out.extra_numeric[k];
            col.resize(B, NAN);
            col[i] = v;
          }
        }
      }
    }
    // Python index valid_len − 1 (−1 wraps to the last column).
    int64_t pos = batch[i].valid_response_length - 1;
    if (pos < 0) pos += response_length;
    if (pos < 0 || pos >= response_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "reward manager: sample ", i, " has valid_response_length ",
          batch[i].valid_response_length, " > response length ",
          response_length));
    }
    flat[i * response_length + pos] = static_cast<float>(reward);
  }
  for (auto& [k, v] : out.extra_numeric) v.resize(B, NAN);
  for (auto& [k, v] : out.extra_text) v.resize(B);
  out.reward_tensor = at::tensor(flat, at::kFloat)
                          .reshape({static_cast<int64_t>(B), response_length});
  return out;
}

}  // namespace verl::rl
