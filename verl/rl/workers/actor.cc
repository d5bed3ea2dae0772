#include "verl/rl/workers/actor.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/lora.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/algos/kl.h"
#include "verl/rl/algos/rollout_correction.h"
#include "verl/rl/algos/value_loss.h"

namespace verl::rl {

Actor::Actor(std::shared_ptr<models::CausalLM> model,
             std::unique_ptr<TrainState> train_state, ActorOptions options,
             std::shared_ptr<parallel::Communicator> dp_group)
    : model_(std::move(model)),
      train_state_(std::move(train_state)),
      options_(std::move(options)),
      dp_group_(dp_group ? std::move(dp_group)
                         : parallel::SingleProcessCommunicator()) {
  if (options_.loss_mode == "flowrl" && train_state_) {
    // A seeded init that leaves the global generator as it was.
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    at::Tensor saved = gen.get_state();
    at::manual_seed(options_.flowrl_log_z_seed);
    log_z_head_ = LogZHead(model_->config().hidden_size,
                           options_.flowrl_log_z_layers, /*dropout=*/0.1);
    gen.set_state(saved);
    log_z_head_->set_dropout_generator(log_z_dropout_);
    // Under Megatron the head is replicated on the tp ranks as well: its
    // checkpoint is chunked over the whole world, as FSDP's.
    log_z_state_ = std::make_unique<ReplicatedTrainState>(
        NamedParameters(*log_z_head_), options_.flowrl_log_z_optim, dp_group_,
        options_.megatron ? options_.megatron->mpu()->world() : dp_group_);
  }
}

absl::StatusOr<ResponseForward> Actor::Forward(const core::Batch& mb,
                                               int64_t response_length,
                                               bool with_entropy,
                                               ForwardExtras extras) {
  VERL_ASSIGN_OR_RETURN(extras.images, BatchImageInputs(mb));
  if (options_.megatron) {
    if (extras.images.defined()) {
      return absl::InvalidArgumentError(
          "image inputs are not available with strategy=megatron");
    }
    return ForwardResponses(
        *options_.megatron, mb.tensor("input_ids"), mb.tensor("attention_mask"),
        mb.tensor("position_ids"), response_length, options_.temperature,
        with_entropy, extras, stage_output_);
  }
  if (extras.images.defined() &&
      (SequenceParallel{options_.sp_group}.enabled() || extras.prompt_hidden)) {
    return absl::InvalidArgumentError(
        "image inputs are not available with Ulysses sequence parallelism "
        "or loss_mode=flowrl");
  }
  return ForwardResponses(
      *model_, mb.tensor("input_ids"), mb.tensor("attention_mask"),
      mb.tensor("position_ids"), response_length, options_.temperature,
      with_entropy, SequenceParallel{options_.sp_group}, extras);
}

absl::StatusOr<LogProbResult> Actor::ComputeLogProb(const core::Batch& batch,
                                                    bool with_entropy) {
  if (options_.megatron) {
    VERL_ASSIGN_OR_RETURN(
        ResponseForward f,
        ForwardBatchNoGrad(*options_.megatron, batch, options_.log_prob_micro,
                           options_.temperature, with_entropy));
    return LogProbResult{f.log_probs, f.entropy, f.sum_pi_squared};
  }
  std::optional<models::ScopedLoraDisabled> base_only;
  if (options_.disable_lora) base_only.emplace(*model_);
  VERL_ASSIGN_OR_RETURN(
      ResponseForward f,
      ForwardBatchNoGrad(*model_, batch, options_.log_prob_micro,
                         options_.temperature, with_entropy,
                         SequenceParallel{options_.sp_group},
                         options_.calculate_sum_pi_squared));
  return LogProbResult{f.log_probs, f.entropy, f.sum_pi_squared};
}

namespace {

// The row index column UpdatePolicy adds when capturing on-policy rows (the
// micro-batches are row subsets of the batch).
constexpr char kUpdateRow[] = "update_row_index";

}  // namespace

absl::StatusOr<MetricMap> Actor::UpdatePolicy(const core::Batch& input,
                                              OnPolicyCapture* on_policy) {
  if (!train_state_)
    return absl::FailedPreconditionError("this role has no optimizer");
  const bool flowrl = options_.loss_mode == "flowrl";
  core::Batch batch = input;
  if (on_policy != nullptr) {
    const bool pipeline =
        options_.megatron && options_.megatron->mpu()->pp_size() > 1;
    if (options_.ppo_epochs != 1 || flowrl || pipeline ||
        on_policy->rows != options_.mini_batch_size ||
        !input.HasTensor("responses")) {
      return absl::FailedPreconditionError(absl::StrCat(
          "update_actor: on-policy old log-probs need ppo_epochs == 1 (",
          options_.ppo_epochs,
          "), no flowrl or pipeline stages, and the "
          "first mini-batch's ",
          options_.mini_batch_size, " rows (got ", on_policy->rows, ")"));
    }
    VERL_RETURN_IF_ERROR(
        batch.SetTensor(kUpdateRow, at::arange(batch.size(), at::kLong)));
    const int64_t resp = input.tensor("responses").size(1);
    on_policy->log_probs = at::zeros({on_policy->rows, resp}, at::kFloat);
    on_policy->entropy = at::zeros({on_policy->rows, resp}, at::kFloat);
  }
  PolicyLossFn loss_fn;
  if (!flowrl) {
    VERL_ASSIGN_OR_RETURN(loss_fn, GetPolicyLoss(options_.loss_mode));
  } else if (!log_z_head_) {
    return absl::FailedPreconditionError("flowrl: the actor has no log-Z head");
  }
  for (const char* key :
       {"input_ids", "attention_mask", "position_ids", "responses",
        "response_mask", "old_log_probs", "advantages"}) {
    if (!batch.HasTensor(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_actor: batch lacks \"", key, "\""));
    }
  }
  if ((options_.use_kl_loss || flowrl) && !batch.HasTensor("ref_log_prob")) {
    return absl::InvalidArgumentError(
        absl::StrCat("update_actor: ", flowrl ? "flowrl" : "use_kl_loss",
                     " needs \"ref_log_prob\""));
  }
  const int64_t R = batch.tensor("responses").size(1);
  const bool want_entropy =
      options_.calculate_entropy || options_.entropy_coeff != 0;
  const double dp = dp_group_->size();
  model_->train();
  if (options_.megatron) options_.megatron->train();

  if (flowrl) {
    log_z_head_->train();
    // Dropout masks seeded by (seed, update, dp rank): the same on the tp
    // ranks of a dp rank, and again after resuming from a checkpoint.
    log_z_dropout_.set_current_seed(
        options_.flowrl_log_z_seed * 1000003ULL +
        static_cast<uint64_t>(log_z_state_->schedule_step()) * 7919ULL +
        static_cast<uint64_t>(dp_group_->rank()));
  }
  // FlowRL (recipe/flowrl): the trajectory-balance loss alone.
  auto flowrl_fn =
      [&](const core::Batch& mb,
          const AggOptions& agg) -> absl::StatusOr<MicroBatchResult> {
    ForwardExtras extras;
    extras.prompt_hidden = true;
    VERL_ASSIGN_OR_RETURN(ResponseForward f,
                          Forward(mb, R, /*with_entropy=*/false, extras));
    FlowRlInputs in;
    in.log_prob = f.log_probs;
    in.old_log_prob = mb.tensor("old_log_probs");
    in.ref_log_prob = mb.tensor("ref_log_prob");
    in.log_z = log_z_head_->forward(f.prompt_hidden);
    in.advantages = mb.tensor("advantages");
    in.response_mask = mb.tensor("response_mask");
    if (mb.HasTensor("rollout_log_probs"))
      in.rollout_log_probs = mb.tensor("rollout_log_probs");
    VERL_ASSIGN_OR_RETURN(FlowRlOutput out,
                          ComputeFlowRlLoss(in, options_.flowrl, agg));
    MicroBatchResult r;
    r.loss = out.loss;
    r.keep_alive = f.attention;
    r.token_means = out.metrics;
    r.summed["actor/pg_loss"] = out.loss.item<double>() / dp;
    return r;
  };
  auto micro_fn =
      [&](const core::Batch& mb,
          const AggOptions& agg) -> absl::StatusOr<MicroBatchResult> {
    // A micro-batch lies inside one mini-batch: its first row tells whether
    // it belongs to the on-policy first one.
    at::Tensor rows;
    if (on_policy != nullptr) {
      rows = mb.tensor(kUpdateRow);
      if (rows[0].item<int64_t>() >= on_policy->rows) rows = at::Tensor();
    }
    const bool capture = rows.defined();
    VERL_ASSIGN_OR_RETURN(ResponseForward f,
                          Forward(mb, R, want_entropy || capture));
    PolicyLossConfig loss_config = options_.policy_loss;
    loss_config.agg = agg;
    PolicyLossInputs in;
    in.old_log_prob = mb.tensor("old_log_probs");
    if (capture) {
      in.old_log_prob = f.log_probs.detach();
      on_policy->log_probs.index_copy_(0, rows, in.old_log_prob);
      on_policy->entropy.index_copy_(0, rows, f.entropy.detach());
    }
    in.log_prob = f.log_probs;
    in.advantages = mb.tensor("advantages");
    in.response_mask = mb.tensor("response_mask");
    if (mb.HasTensor("rollout_is_weights"))
      in.rollout_is_weights = mb.tensor("rollout_is_weights");
    VERL_ASSIGN_OR_RETURN(PolicyLossOutput pg, loss_fn(in, loss_config));
    MicroBatchResult r;
    r.loss = pg.loss;
    r.keep_alive = f.attention;
    r.token_means = pg.metrics;
    if (options_.loss_mode != "bypass_mode" &&
        mb.HasTensor("rollout_log_probs")) {
      for (const auto& [k, v] : ComputeOffPolicyMetrics(
               f.log_probs.detach(), mb.tensor("rollout_log_probs"),
               in.response_mask)) {
        r.token_means["rollout_corr/" + k] = v;
      }
    }
    // Globally normalised losses: this rank's micro-batches add up to dp x its
    // share.
    r.summed["actor/pg_loss"] = pg.loss.item<double>() / dp;
    if (want_entropy) {
      VERL_ASSIGN_OR_RETURN(at::Tensor ent,
                            ComputeEntropyLoss(f.entropy, in.response_mask,
                                               loss_config.loss_agg_mode, agg));
      r.summed["actor/entropy"] = ent.item<double>() / dp;
      if (options_.entropy_coeff != 0)
        r.loss = r.loss - options_.entropy_coeff * ent;
    }
    if (options_.use_kl_loss) {
      VERL_ASSIGN_OR_RETURN(at::Tensor kld,
                            KlPenalty(f.log_probs, mb.tensor("ref_log_prob"),
                                      options_.kl_loss_type));
      VERL_ASSIGN_OR_RETURN(
          at::Tensor kl_loss,
          AggLoss(kld, in.response_mask, loss_config.loss_agg_mode, agg));
      r.loss = r.loss + options_.kl_loss_coef * kl_loss;
      r.summed["actor/kl_loss"] = kl_loss.item<double>() / dp;
    }
    return r;
  };
  PpoUpdateOptions update;
  update.mini_batch_size = options_.mini_batch_size;
  update.epochs = options_.ppo_epochs;
  update.micro = options_.update_micro;
  update.grad_norm_key = "actor/grad_norm";
  if (options_.megatron) {
    UseMegatronModel(*options_.megatron, &stage_output_, &update);
  }
  MetricMap metrics;
  if (flowrl) {
    JointTrainState joint(*train_state_, *log_z_state_);
    VERL_ASSIGN_OR_RETURN(
        metrics, RunPpoUpdate(batch, update, *dp_group_, joint, flowrl_fn));
    metrics["actor/log_z_grad_norm"] = joint.head_grad_norm();
    log_z_state_->StepSchedule();
  } else {
    VERL_ASSIGN_OR_RETURN(metrics, RunPpoUpdate(batch, update, *dp_group_,
                                                *train_state_, micro_fn));
  }
  if (update.runner) {  // the losses were computed on the last stage
    parallel::Communicator& pp =
        *options_.megatron->mpu()->group(parallel::megatron::MpuGroup::kPp);
    VERL_RETURN_IF_ERROR(BroadcastMetrics(pp, pp.size() - 1, &metrics));
  }
  // actor/entropy is a mean over optimizer steps, not a sum.
  if (metrics.count("actor/entropy")) {
    metrics["actor/entropy"] /=
        options_.ppo_epochs * (batch.size() / options_.mini_batch_size);
  }
  if (options_.use_kl_loss) metrics["actor/kl_coef"] = options_.kl_loss_coef;
  metrics["actor/num_skipped_steps"] = train_state_->skipped_steps();
  if (options_.megatron && options_.megatron->config().IsMoe()) {
    // Expert load of this step's forwards (log-probs and updates), over
    // every token of the batch: summed over tp x cp, then dp.
    std::map<int64_t, std::vector<double>> load =
        options_.megatron->TakeExpertLoad();
    for (auto& [layer, counts] : load) {
      at::Tensor t = at::tensor(counts, at::kDouble);
      VERL_RETURN_IF_ERROR(dp_group_->AllReduce(t));
      counts.assign(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
    }
    for (const auto& [k, v] : models::ExpertLoadMetrics(load)) {
      metrics["actor/" + k] = v;
    }
    // The load-balancing / z losses of the update's forwards: the same
    // number of micro-batches on every dp rank, so the mean over dp.
    const std::map<std::string, double> aux =
        options_.megatron->TakeMoeAuxLosses();
    std::vector<double> values;
    for (const auto& [k, v] : aux) values.push_back(v / dp_group_->size());
    VERL_RETURN_IF_ERROR(AllReduceSum(dp_group_.get(), values));
    size_t i = 0;
    for (const auto& [k, v] : aux) metrics["actor/" + k] = values[i++];
  }
  return metrics;
}

}  // namespace verl::rl
