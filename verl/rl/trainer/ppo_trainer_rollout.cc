// Generation and rewards for the PPO trainer: prompts → trajectories on the
// rollout engine (sharded over ranks), rule or model rewards, DAPO's dynamic
// sampling, and rollout correction on the driver.
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/batch_comm.h"
#include "verl/rl/algos/dapo.h"
#include "verl/rl/trainer/ppo_trainer_internal.h"
#include "verl/rl/workers/dp_dispatch.h"

namespace verl::rl {
namespace {

using core::Batch;

// Per-trajectory value of algorithm.filter_groups.metric: seq_reward and
// seq_final_reward sum token_level_scores (KL-in-reward is applied after the
// filter here, so both are the sequence score); any other name is a reward
// extra-info column (acc, score, ...).
absl::StatusOr<std::vector<double>> GroupFilterMetric(
    const Batch& batch, const std::string& metric) {
  std::vector<double> out;
  if (metric == "seq_reward" || metric == "seq_final_reward") {
    VERL_ASSIGN_OR_RETURN(at::Tensor scores,
                          batch.GetTensor("token_level_scores"));
    at::Tensor sums = scores.sum(1).to(at::kDouble).contiguous();
    out.assign(sums.data_ptr<double>(), sums.data_ptr<double>() + sums.numel());
    return out;
  }
  if (!batch.HasNonTensor(metric)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "algorithm.filter_groups.metric: \"", metric,
        "\" is neither seq_reward, seq_final_reward nor a reward extra info"));
  }
  for (const auto& v : batch.non_tensor(metric)) {
    if (!v.is_number() && !v.is_boolean()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "algorithm.filter_groups.metric: \"", metric, "\" is not numeric"));
    }
    out.push_back(v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0)
                                 : v.get<double>());
  }
  return out;
}

}  // namespace

absl::StatusOr<Batch> PpoTrainer::GenerateSequences(const Batch& prompts,
                                                    int64_t step,
                                                    bool validate) {
  // Each engine replica (a rollout tp group; one rank without rollout tp)
  // generates its chunk of prompts; seeds use global row indices. The ranks
  // of a replica generate the same tokens; the chunks are gathered over the
  // ranks holding the same shard in every replica.
  parallel::Communicator& replicas = *rollout_par_.dp;
  if (progress_out_ != nullptr && !validate) {
    const int64_t local =
        (prompts.size() + replicas.size() - 1) / replicas.size();
    gen_bar_ = std::make_unique<profiler::ProgressBar>("gen", local, "prompts",
                                                       progress_out_);
  }
  if (replicas.size() == 1) {
    auto out = rollout_->Generate(prompts, 0, step, validate);
    gen_bar_.reset();
    return out;
  }
  VERL_ASSIGN_OR_RETURN(auto padded, prompts.PadToDivisor(replicas.size()));
  const int64_t per_replica = padded.first.size() / replicas.size();
  VERL_ASSIGN_OR_RETURN(Batch local,
                        parallel::LocalChunk(replicas, padded.first));
  VERL_ASSIGN_OR_RETURN(
      Batch out,
      rollout_->Generate(local, per_replica * replicas.rank(), step, validate));
  gen_bar_.reset();
  VERL_ASSIGN_OR_RETURN(Batch all, parallel::GatherBatch(replicas, out));
  const int64_t samples = validate ? rollout_->options().val_params.n : n();
  return all.Unpad(padded.second * samples);
}

absl::StatusOr<std::vector<RewardRequest>> PpoTrainer::RewardRequests(
    const Batch& batch) const {
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
  VERL_ASSIGN_OR_RETURN(auto data_sources,
                        batch.GetNonTensor(config_.data().reward_fn_key()));
  VERL_ASSIGN_OR_RETURN(auto reward_models, batch.GetNonTensor("reward_model"));
  VERL_ASSIGN_OR_RETURN(auto extra_infos, batch.GetNonTensor("extra_info"));
  std::vector<RewardRequest> out;
  for (int64_t i = 0; i < batch.size(); ++i) {
    RewardRequest r;
    r.valid_response_length = static_cast<int64_t>(mask[i].sum().item<float>());
    r.sample.solution = tokenizer_->Decode(MaskedIds(responses, mask, i),
                                           /*skip_special=*/true);
    r.sample.data_source = data_sources[i];
    r.sample.ground_truth = GroundTruth(reward_models[i]);
    r.sample.extra_info = extra_infos[i];
    out.push_back(std::move(r));
  }
  return out;
}

absl::StatusOr<RewardOutput> PpoTrainer::ComputeReward(const Batch& batch) {
  if (!reward_model_) {
    VERL_ASSIGN_OR_RETURN(auto requests, RewardRequests(batch));
    VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
    return reward_->Score(requests, responses.size(1));
  }
  VERL_ASSIGN_OR_RETURN(
      Batch rm,
      ShardedCall(*world_, batch,
                  [&](const Batch& local) -> absl::StatusOr<Batch> {
                    VERL_ASSIGN_OR_RETURN(at::Tensor scores,
                                          reward_model_->ComputeRmScore(local));
                    return Batch::FromColumns({{"rm_scores", scores}});
                  }));
  // verl's reward managers return rm_scores as they are when present.
  RewardOutput out;
  VERL_ASSIGN_OR_RETURN(out.reward_tensor, rm.GetTensor("rm_scores"));
  return out;
}

absl::Status PpoTrainer::ApplyRolloutCorrection(Batch& batch,
                                                MetricMap* metrics) {
  if (rollout_corr_.bypass_mode || !batch.HasTensor("rollout_log_probs"))
    return absl::OkStatus();
  VERL_ASSIGN_OR_RETURN(at::Tensor old_lp, batch.GetTensor("old_log_probs"));
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
  VERL_ASSIGN_OR_RETURN(
      RolloutCorrectionOutput c,
      ComputeRolloutCorrection(old_lp, batch.tensor("rollout_log_probs"), mask,
                               rollout_corr_));
  if (c.rollout_is_weights.defined()) {
    VERL_RETURN_IF_ERROR(
        batch.SetTensor("rollout_is_weights", c.rollout_is_weights));
  }
  VERL_RETURN_IF_ERROR(batch.SetTensor("response_mask", c.response_mask));
  for (const auto& [k, v] : c.metrics) (*metrics)[k] = v;
  return absl::OkStatus();
}

// gen → (gen_max) → reward for one set of prompt rows: the trajectories with
// their non-tensor columns (repeated n times, interleaved) and
// token_level_scores plus the reward extra infos.
absl::StatusOr<Batch> PpoTrainer::GenerateScored(
    const std::vector<nlohmann::json>& rows, int64_t step, Timing* timing) {
  std::vector<std::string> uids;
  for (size_t i = 0; i < rows.size(); ++i)
    uids.push_back(absl::StrCat("uid", uid_counter_++));
  VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(rows, uids));
  prompts.meta_info()["temperature"] = rollout_cfg().temperature();
  prompts.meta_info()["global_steps"] = step;
  Batch batch;
  {
    Timer t(timing, "gen");
    VERL_ASSIGN_OR_RETURN(batch, GenerateSequences(prompts, step, false));
  }
  if (config_.algorithm().adv_estimator() == "remax") {
    // ReMax's baseline: the greedy response's reward.
    Timer t(timing, "gen_max");
    VERL_ASSIGN_OR_RETURN(Batch greedy, GenerateSequences(prompts, step, true));
    VERL_ASSIGN_OR_RETURN(Batch meta,
                          prompts.Select(std::vector<std::string>{}));
    VERL_RETURN_IF_ERROR(greedy.Union(meta));
    VERL_ASSIGN_OR_RETURN(RewardOutput base, ComputeReward(greedy));
    VERL_ASSIGN_OR_RETURN(
        Batch base_batch,
        Batch::FromColumns({{"reward_baselines", base.reward_tensor.sum(1)}}));
    VERL_ASSIGN_OR_RETURN(Batch rep, base_batch.Repeat(n(), true));
    VERL_RETURN_IF_ERROR(batch.Union(rep));
  }
  // Non-tensor columns follow the trajectories (repeat interleave).
  VERL_ASSIGN_OR_RETURN(Batch meta, prompts.Select(std::vector<std::string>{}));
  VERL_ASSIGN_OR_RETURN(Batch repeated, meta.Repeat(n(), true));
  VERL_RETURN_IF_ERROR(batch.Union(repeated));

  Timer t(timing, "reward");
  VERL_ASSIGN_OR_RETURN(RewardOutput scores, ComputeReward(batch));
  if (reward_model_) {
    VERL_RETURN_IF_ERROR(batch.SetTensor("rm_scores", scores.reward_tensor));
  }
  VERL_RETURN_IF_ERROR(
      batch.SetTensor("token_level_scores", scores.reward_tensor));
  reward_extra_keys_.clear();
  for (const auto& [k, v] : scores.extra_numeric) {
    std::vector<nlohmann::json> col(v.begin(), v.end());
    VERL_RETURN_IF_ERROR(batch.SetNonTensor(k, col));
    reward_extra_keys_.push_back(k);
  }
  return batch;
}

// The training batch of one step. With algorithm.filter_groups.enable, DAPO's
// dynamic sampling: prompt groups whose metric is constant are dropped and
// more prompts are drawn from the loader until train_batch_size groups are
// kept (truncated to exactly that many); metric train/num_gen_batches.
absl::StatusOr<Batch> PpoTrainer::GenerateBatch(
    const std::vector<nlohmann::json>& rows, int64_t step, Timing* timing,
    MetricMap* metrics) {
  const FilterGroupsConfig& fg = config_.algorithm().filter_groups();
  if (!fg.enable()) return GenerateScored(rows, step, timing);
  const int64_t want = config_.data().train_batch_size();
  std::vector<Batch> kept;
  int64_t kept_prompts = 0, rounds = 0;
  std::vector<nlohmann::json> current = rows;
  while (true) {
    ++rounds;
    VERL_ASSIGN_OR_RETURN(Batch b, GenerateScored(current, step, timing));
    VERL_ASSIGN_OR_RETURN(std::vector<double> metric,
                          GroupFilterMetric(b, fg.metric()));
    VERL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> uids,
                          b.GetNonTensor("uid"));
    GroupFilterResult f = FilterGroupsByStd(ToStrings(uids), metric);
    VERL_ASSIGN_OR_RETURN(Batch k, b.Index(f.kept_rows));
    if (k.size() > 0) kept.push_back(std::move(k));
    kept_prompts += static_cast<int64_t>(f.kept_uids.size());
    VERL_ASSIGN_OR_RETURN(
        bool more, DynamicSamplingNeedsMoreRounds(kept_prompts, want, rounds,
                                                  fg.max_num_gen_batches()));
    if (!more) break;
    auto next = train_loader_->Next();
    if (!next) next = train_loader_->Next();  // epoch boundary
    if (!next) return absl::InternalError("filter_groups: loader is empty");
    current = std::move(*next);
  }
  (*metrics)["train/num_gen_batches"] = static_cast<double>(rounds);
  VERL_ASSIGN_OR_RETURN(Batch all, Batch::Concat(kept));
  return all.Slice(0, want * n());
}

}  // namespace verl::rl
