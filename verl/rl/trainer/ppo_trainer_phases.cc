// One PPO/GRPO training step as verl's dataflow, one method per phase:
//   gen → reward → old_log_prob → ref → values → adv → update_critic →
//   update_actor → update_weights
// Every phase reads and writes named Batch columns; a missing column is an
// error naming it (Batch::GetTensor), never an abort.
#include <ATen/ops/cat.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include "absl/strings/match.h"
#include "verl/core/status.h"
#include "verl/rl/algos/advantage.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/algos/pf_ppo.h"
#include "verl/rl/algos/value_loss.h"
#include "verl/rl/data/seqlen_balancing.h"
#include "verl/rl/trainer/metrics.h"
#include "verl/rl/trainer/ppo_trainer_internal.h"
#include "verl/rl/workers/dp_dispatch.h"
#include "verl/rl/workers/megatron_train_state.h"

namespace verl::rl {

using core::Batch;

absl::StatusOr<MetricMap> PpoTrainer::TrainStep(
    const std::vector<nlohmann::json>& rows, int64_t step) {
  Timing timing;
  MetricMap metrics;
  Batch batch;
  {
    Timer step_timer(&timing, "step");
    VERL_ASSIGN_OR_RETURN(batch, GenerateBatch(rows, step, &timing, &metrics));
    if (config_.trainer().balance_batch()) {
      VERL_RETURN_IF_ERROR(BalanceBatch(batch, &metrics));
    }
    const int64_t on_policy_rows = OnPolicyRows(batch, step);
    at::Tensor entropys;  // of the old pass's rows, with on_policy_rows
    if (rollout_corr_.bypass_mode) {
      // verl's apply_bypass_mode: the rollout policy is the old policy.
      VERL_ASSIGN_OR_RETURN(at::Tensor rollout_lp,
                            batch.GetTensor("rollout_log_probs"));
      VERL_RETURN_IF_ERROR(batch.SetTensor("old_log_probs", rollout_lp));
    } else {
      Timer t(&timing, "old_log_prob");
      VERL_RETURN_IF_ERROR(
          ComputeOldLogProbs(batch, on_policy_rows, &entropys, &metrics));
    }
    if (ref_) {
      Timer t(&timing, "ref");
      VERL_RETURN_IF_ERROR(ComputeRefLogProbs(batch));
    }
    if (critic_) {
      Timer t(&timing, "values");
      VERL_RETURN_IF_ERROR(ComputeValues(batch));
    }
    {
      Timer t(&timing, "adv");
      VERL_RETURN_IF_ERROR(ComputeAdvantages(batch, step, &metrics));
    }
    if (critic_) {
      Timer t(&timing, "update_critic");
      VERL_RETURN_IF_ERROR(UpdateCritic(batch, &metrics));
    }
    if (config_.trainer().critic_warmup() <= step) {
      {
        Timer t(&timing, "update_actor");
        VERL_RETURN_IF_ERROR(
            UpdateActor(batch, on_policy_rows, entropys, &metrics));
      }
      Timer t(&timing, "update_weights");
      VERL_RETURN_IF_ERROR(SyncRolloutWeights());
    }
    const std::string& dump_dir = config_.trainer().rollout_data_dir();
    if (!dump_dir.empty() && world_->rank() == 0) {
      Timer t(&timing, "dump_rollout_generations");
      VERL_ASSIGN_OR_RETURN(at::Tensor scores,
                            batch.GetTensor("token_level_scores"));
      VERL_ASSIGN_OR_RETURN(GenerationRecords records,
                            Records(batch, scores.sum(1), reward_extra_keys_));
      VERL_RETURN_IF_ERROR(DumpGenerations(dump_dir, step, records));
    }
  }
  VERL_RETURN_IF_ERROR(AddStepMetrics(batch, timing, &metrics));
  return metrics;
}

// Balanced per actor mini-batch, so the rows of each mini-batch (and the
// run's metrics) do not depend on the number of processes.
absl::Status PpoTrainer::BalanceBatch(Batch& batch, MetricMap* metrics) {
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("attention_mask"));
  at::Tensor lens = mask.sum(1).to(at::kLong).contiguous();
  std::vector<int64_t> seqlens(lens.data_ptr<int64_t>(),
                               lens.data_ptr<int64_t>() + lens.numel());
  const int64_t mini_rows = actor_cfg().ppo_mini_batch_size() * n();
  VERL_ASSIGN_OR_RETURN(
      BalancedOrder order,
      rl::BalanceBatch(seqlens, actor_par_.dp->size(),
                       batch.size() % mini_rows == 0 ? mini_rows : 0));
  VERL_RETURN_IF_ERROR(batch.Reorder(at::tensor(order.order, at::kLong)));
  metrics->insert(order.metrics.begin(), order.metrics.end());
  return absl::OkStatus();
}

namespace {

// megatron.param_offload / grad_offload: a role's parameters and gradient
// buffers come to the device for its pass and go back to host memory after
// it (verl's load_megatron_model_to_gpu / offload_megatron_model_to_cpu
// around each worker call). No-op for other strategies.
absl::Status PlaceMegatron(TrainState* state, bool on_device) {
  auto* mg = dynamic_cast<MegatronTrainState*>(state);
  if (mg == nullptr) return absl::OkStatus();
  return on_device ? mg->LoadToDevice() : mg->OffloadToHost();
}

}  // namespace

int64_t PpoTrainer::OnPolicyRows(const Batch& batch, int64_t step) const {
  const AlgorithmConfig& alg = config_.algorithm();
  const ActorOptions& ao = actor_->options();
  const bool pipeline = actor_mpu_ && actor_mpu_->pp_size() > 1;
  const int64_t mini_rows = actor_cfg().ppo_mini_batch_size() * n();
  if (rollout_corr_.bypass_mode || ao.ppo_epochs != 1 ||
      config_.trainer().critic_warmup() > step || alg.use_kl_in_reward() ||
      alg.use_pf_ppo() || batch.HasTensor("rollout_log_probs") ||
      ao.calculate_sum_pi_squared || ao.loss_mode == "flowrl" || pipeline ||
      mini_rows <= 0 || batch.size() % mini_rows != 0) {
    return 0;
  }
  return mini_rows;
}

absl::Status PpoTrainer::ComputeOldLogProbs(Batch& batch, int64_t skip_rows,
                                            at::Tensor* entropys,
                                            MetricMap* metrics) {
  Batch lp;
  if (skip_rows < batch.size()) {
    VERL_ASSIGN_OR_RETURN(Batch rows, batch.Slice(skip_rows, batch.size()));
    VERL_RETURN_IF_ERROR(PlaceMegatron(actor_->train_state(), true));
    VERL_ASSIGN_OR_RETURN(
        lp, ShardedCall(
                *actor_par_.dp, rows,
                [&](const Batch& local) -> absl::StatusOr<Batch> {
                  VERL_ASSIGN_OR_RETURN(LogProbResult r,
                                        actor_->ComputeLogProb(local, true));
                  std::map<std::string, at::Tensor> cols = {
                      {"old_log_probs", r.log_probs}, {"entropys", r.entropy}};
                  if (r.sum_pi_squared.defined()) {
                    cols["sum_pi_squared"] = r.sum_pi_squared;
                  }
                  return Batch::FromColumns(cols);
                }));
    VERL_RETURN_IF_ERROR(PlaceMegatron(actor_->train_state(), false));
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
  if (skip_rows > 0) {
    // The update fills the first rows (UpdateActor).
    at::Tensor old_lp = at::zeros(mask.sizes(), at::kFloat);
    if (lp.size() > 0) {
      old_lp.narrow(0, skip_rows, lp.size()).copy_(lp.tensor("old_log_probs"));
      *entropys = lp.tensor("entropys");
    }
    return batch.SetTensor("old_log_probs", old_lp);
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor old_lp, lp.GetTensor("old_log_probs"));
  VERL_ASSIGN_OR_RETURN(at::Tensor ent_rows, lp.GetTensor("entropys"));
  VERL_ASSIGN_OR_RETURN(
      at::Tensor ent,
      ComputeEntropyLoss(ent_rows, mask, actor_cfg().loss_agg_mode()));
  (*metrics)["actor/entropy"] = ent.item<double>();
  VERL_RETURN_IF_ERROR(batch.SetTensor("old_log_probs", old_lp));
  if (lp.HasTensor("sum_pi_squared")) {
    VERL_RETURN_IF_ERROR(
        batch.SetTensor("sum_pi_squared", lp.tensor("sum_pi_squared")));
  }
  if (batch.HasTensor("rollout_log_probs")) {
    VERL_ASSIGN_OR_RETURN(at::Tensor rollout_lp,
                          batch.GetTensor("rollout_log_probs"));
    VERL_ASSIGN_OR_RETURN(MetricMap diff, ComputeRolloutProbsDiffMetrics(
                                              old_lp, rollout_lp, mask));
    metrics->insert(diff.begin(), diff.end());
  }
  return absl::OkStatus();
}

absl::Status PpoTrainer::ComputeRefLogProbs(Batch& batch) {
  // megatron.param_offload of the forward-only reference (no train state):
  // its parameters come to the device for this pass only. Megatron runs on
  // CPU here (the "device" is CPU memory, host a separate copy).
  const bool offload =
      ref_->options().megatron &&
      config_.actor_rollout_ref().ref().megatron().param_offload();
  if (offload) {
    MoveModuleParameters(*ref_->options().megatron,
                         parallel::MemoryLocation::kDevice, c10::kCPU);
  }
  VERL_ASSIGN_OR_RETURN(
      Batch lp,
      ShardedCall(*ref_par_.dp, batch,
                  [&](const Batch& local) -> absl::StatusOr<Batch> {
                    VERL_ASSIGN_OR_RETURN(LogProbResult r,
                                          ref_->ComputeLogProb(local, false));
                    return Batch::FromColumns({{"ref_log_prob", r.log_probs}});
                  }));
  if (offload) {
    MoveModuleParameters(*ref_->options().megatron,
                         parallel::MemoryLocation::kHost, c10::kCPU);
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor ref_lp, lp.GetTensor("ref_log_prob"));
  return batch.SetTensor("ref_log_prob", ref_lp);
}

absl::Status PpoTrainer::ComputeValues(Batch& batch) {
  VERL_RETURN_IF_ERROR(PlaceMegatron(critic_->train_state(), true));
  VERL_ASSIGN_OR_RETURN(
      Batch v, ShardedCall(*critic_par_.dp, batch,
                           [&](const Batch& local) -> absl::StatusOr<Batch> {
                             VERL_ASSIGN_OR_RETURN(
                                 at::Tensor values,
                                 critic_->ComputeValues(local));
                             return Batch::FromColumns({{"values", values}});
                           }));
  VERL_RETURN_IF_ERROR(PlaceMegatron(critic_->train_state(), false));
  VERL_ASSIGN_OR_RETURN(at::Tensor values, v.GetTensor("values"));
  return batch.SetTensor("values", values);
}

absl::Status PpoTrainer::ComputeAdvantages(Batch& batch, int64_t step,
                                           MetricMap* metrics) {
  const AlgorithmConfig& alg = config_.algorithm();
  VERL_ASSIGN_OR_RETURN(at::Tensor scores,
                        batch.GetTensor("token_level_scores"));
  VERL_ASSIGN_OR_RETURN(at::Tensor old_lp, batch.GetTensor("old_log_probs"));
  at::Tensor rewards = scores;
  if (alg.use_kl_in_reward()) {
    VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
    VERL_ASSIGN_OR_RETURN(at::Tensor ref_lp, batch.GetTensor("ref_log_prob"));
    VERL_ASSIGN_OR_RETURN(KlInRewardResult kl,
                          ApplyKlPenalty(rewards, old_lp, ref_lp, mask,
                                         *kl_ctrl_, alg.kl_penalty()));
    rewards = kl.token_level_rewards;
    metrics->insert(kl.metrics.begin(), kl.metrics.end());
  }
  VERL_RETURN_IF_ERROR(batch.SetTensor("token_level_rewards", rewards));
  VERL_RETURN_IF_ERROR(ApplyRolloutCorrection(batch, metrics));
  AdvantageInputs in;
  in.token_level_rewards = rewards;
  // After rejection sampling.
  VERL_ASSIGN_OR_RETURN(in.response_mask, batch.GetTensor("response_mask"));
  VERL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> uids,
                        batch.GetNonTensor("uid"));
  in.index = ToStrings(uids);
  if (batch.HasTensor("values")) in.values = batch.tensor("values");
  if (batch.HasTensor("reward_baselines"))
    in.reward_baselines = batch.tensor("reward_baselines");
  in.old_log_prob = old_lp;
  // The optimal-token-baseline estimators (verl passes both when present).
  if (batch.HasTensor("sum_pi_squared"))
    in.sum_pi_squared = batch.tensor("sum_pi_squared");
  if (batch.HasTensor("rollout_is_weights"))
    in.rollout_is_weights = batch.tensor("rollout_is_weights");
  AdvantageConfig ac;
  ac.gamma = alg.gamma();
  ac.lam = alg.lam();
  ac.norm_adv_by_std_in_grpo = alg.norm_adv_by_std_in_grpo();
  VERL_ASSIGN_OR_RETURN(AdvantageOutput adv,
                        ComputeAdvantage(alg.adv_estimator(), in, ac));
  VERL_RETURN_IF_ERROR(batch.SetTensor("advantages", adv.advantages));
  VERL_RETURN_IF_ERROR(batch.SetTensor("returns", adv.returns));
  if (alg.use_pf_ppo() && alg.adv_estimator() == "gae") {
    // PF-PPO: resample the batch with replacement, weighted by score.
    VERL_ASSIGN_OR_RETURN(
        at::Tensor w,
        PfPpoWeights(scores.sum(-1), alg.pf_ppo().reweight_method(),
                     alg.pf_ppo().weight_pow()));
    VERL_ASSIGN_OR_RETURN(batch,
                          batch.Index(PfPpoResampleIndices(
                              w, RolloutSeed(seed_, step, /*index=*/-1))));
  }
  return absl::OkStatus();
}

absl::Status PpoTrainer::UpdateCritic(const Batch& batch, MetricMap* metrics) {
  VERL_ASSIGN_OR_RETURN(
      Batch local, UpdateShard(*critic_par_.dp, batch,
                               config_.critic().ppo_mini_batch_size() * n()));
  VERL_RETURN_IF_ERROR(PlaceMegatron(critic_->train_state(), true));
  VERL_ASSIGN_OR_RETURN(MetricMap m, critic_->UpdateCritic(local));
  VERL_RETURN_IF_ERROR(PlaceMegatron(critic_->train_state(), false));
  m["critic/lr"] = critic_->train_state()->StepSchedule();
  metrics->insert(m.begin(), m.end());
  return absl::OkStatus();
}

absl::Status PpoTrainer::UpdateActor(Batch& batch, int64_t on_policy_rows,
                                     const at::Tensor& entropys,
                                     MetricMap* metrics) {
  VERL_ASSIGN_OR_RETURN(Batch local,
                        UpdateShard(*actor_par_.dp, batch,
                                    actor_cfg().ppo_mini_batch_size() * n()));
  VERL_RETURN_IF_ERROR(PlaceMegatron(actor_->train_state(), true));
  OnPolicyCapture capture;
  capture.rows = on_policy_rows / actor_par_.dp->size();
  VERL_ASSIGN_OR_RETURN(
      MetricMap m,
      actor_->UpdatePolicy(local, on_policy_rows > 0 ? &capture : nullptr));
  VERL_RETURN_IF_ERROR(PlaceMegatron(actor_->train_state(), false));
  if (on_policy_rows > 0) {
    // Every rank's first mini-batch rows back in batch order (UpdateShard
    // split global mini-batch 0 over the ranks as ShardedCall chunks it).
    VERL_ASSIGN_OR_RETURN(Batch head, batch.Slice(0, on_policy_rows));
    VERL_ASSIGN_OR_RETURN(
        Batch got,
        ShardedCall(
            *actor_par_.dp, head, [&](const Batch&) -> absl::StatusOr<Batch> {
              return Batch::FromColumns({{"old_log_probs", capture.log_probs},
                                         {"entropys", capture.entropy}});
            }));
    VERL_ASSIGN_OR_RETURN(at::Tensor old_lp, batch.GetTensor("old_log_probs"));
    old_lp.narrow(0, 0, on_policy_rows).copy_(got.tensor("old_log_probs"));
    at::Tensor ent_rows = got.tensor("entropys");
    if (entropys.defined()) ent_rows = at::cat({ent_rows, entropys});
    VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
    VERL_ASSIGN_OR_RETURN(
        at::Tensor ent,
        ComputeEntropyLoss(ent_rows, mask, actor_cfg().loss_agg_mode()));
    (*metrics)["actor/entropy"] = ent.item<double>();
  }
  m["actor/lr"] = actor_->train_state()->StepSchedule();
  // verl's metrics.update: the update's rollout_corr/* (current policy vs
  // rollout) replace the driver's.
  for (const auto& [k, v] : m) (*metrics)[k] = v;
  return absl::OkStatus();
}

absl::Status PpoTrainer::AddStepMetrics(const Batch& batch, Timing& timing,
                                        MetricMap* metrics) {
  DataMetricsInputs dm;
  VERL_ASSIGN_OR_RETURN(dm.token_level_scores,
                        batch.GetTensor("token_level_scores"));
  VERL_ASSIGN_OR_RETURN(dm.token_level_rewards,
                        batch.GetTensor("token_level_rewards"));
  VERL_ASSIGN_OR_RETURN(dm.advantages, batch.GetTensor("advantages"));
  VERL_ASSIGN_OR_RETURN(dm.returns, batch.GetTensor("returns"));
  if (batch.HasTensor("values")) dm.values = batch.tensor("values");
  VERL_ASSIGN_OR_RETURN(dm.attention_mask, batch.GetTensor("attention_mask"));
  VERL_ASSIGN_OR_RETURN(dm.response_mask, batch.GetTensor("response_mask"));
  // Multi-turn rollouts: per-trajectory turns and tool calls.
  for (auto [key, out] :
       {std::pair{"__num_turns__", &dm.num_turns},
        std::pair{"tool_call_counts", &dm.tool_call_counts}}) {
    if (!batch.HasNonTensor(key)) continue;
    for (const auto& v : batch.non_tensor(key)) {
      out->push_back(v.is_number() ? v.get<double>() : 0.0);
    }
  }
  VERL_ASSIGN_OR_RETURN(MetricMap data_metrics,
                        ComputeDataMetrics(dm, critic_ != nullptr));
  metrics->insert(data_metrics.begin(), data_metrics.end());
  if (batch.HasTensor("sum_pi_squared")) {
    VarianceProxyInputs vp;
    vp.old_log_probs = batch.tensor("old_log_probs");
    vp.sum_pi_squared = batch.tensor("sum_pi_squared");
    vp.advantages = dm.advantages;
    vp.response_mask = dm.response_mask;
    if (batch.HasTensor("rollout_is_weights"))
      vp.rollout_is_weights = batch.tensor("rollout_is_weights");
    auto grad_norm = metrics->find("actor/grad_norm");
    if (grad_norm != metrics->end()) vp.grad_norm = grad_norm->second;
    MetricMap proxy = ComputeVarianceProxyMetrics(vp);
    metrics->insert(proxy.begin(), proxy.end());
  }
  // Agent-loop rollouts: agent_loop/* are verl timing keys; tool_calls/*
  // are step metrics (this rank's trajectories).
  for (const auto& [k, v] : rollout_->last_stats().agent_metrics) {
    if (absl::StartsWith(k, "agent_loop/")) {
      timing[k] = v;
    } else {
      (*metrics)[k] = v;
    }
  }
  const int64_t response_tokens =
      static_cast<int64_t>(dm.response_mask.sum().item<double>());
  const int64_t total_tokens =
      static_cast<int64_t>(dm.attention_mask.sum().item<double>());
  MetricMap tm = ComputeTimingMetrics(timing, total_tokens - response_tokens,
                                      response_tokens);
  metrics->insert(tm.begin(), tm.end());
  MetricMap thr =
      ComputeThroughputMetrics(total_tokens, timing["step"], world_->size());
  metrics->insert(thr.begin(), thr.end());
  MetricMap perf = profiler_->PerfMetrics(actor_->model().config(),
                                          dm.attention_mask, timing);
  metrics->insert(perf.begin(), perf.end());
  return absl::OkStatus();
}

}  // namespace verl::rl
