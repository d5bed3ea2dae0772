#include "verl/rl/workers/critic.h"

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/rl/algos/value_loss.h"
#include "verl/rl/workers/model_forward.h"

namespace verl::rl {

Critic::Critic(std::shared_ptr<models::CausalLM> model,
               std::unique_ptr<TrainState> train_state, CriticOptions options,
               std::shared_ptr<parallel::Communicator> dp_group)
    : model_(std::move(model)),
      train_state_(std::move(train_state)),
      options_(std::move(options)),
      dp_group_(dp_group ? std::move(dp_group)
                         : parallel::SingleProcessCommunicator()) {}

absl::StatusOr<at::Tensor> Critic::ComputeValues(const core::Batch& batch) {
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("response_mask"));
  VERL_ASSIGN_OR_RETURN(
      ResponseForward f,
      options_.megatron
          ? ForwardBatchNoGrad(*options_.megatron, batch,
                               options_.forward_micro, 1.0, false)
          : ForwardBatchNoGrad(*model_, batch, options_.forward_micro, 1.0,
                               false, SequenceParallel{options_.sp_group}));
  return f.values * mask.to(torch::kFloat);
}

absl::StatusOr<MetricMap> Critic::UpdateCritic(const core::Batch& batch) {
  if (!train_state_)
    return absl::FailedPreconditionError("critic has no optimizer");
  for (const char* key : {"input_ids", "attention_mask", "position_ids",
                          "responses", "response_mask", "values", "returns"}) {
    if (!batch.HasTensor(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_critic: batch lacks \"", key, "\""));
    }
  }
  const int64_t R = batch.tensor("responses").size(1);
  const double dp = dp_group_->size();
  model_->train();
  if (options_.megatron) options_.megatron->train();
  auto micro_fn =
      [&](const core::Batch& mb,
          const AggOptions& agg) -> absl::StatusOr<MicroBatchResult> {
    const at::Tensor &ids = mb.tensor("input_ids"),
                     &attn = mb.tensor("attention_mask"),
                     &pos = mb.tensor("position_ids");
    // A vision-language critic sees the rows' images as the actor does.
    ForwardExtras extras;
    VERL_ASSIGN_OR_RETURN(extras.images, BatchImageInputs(mb));
    if (extras.images.defined() &&
        (options_.megatron || SequenceParallel{options_.sp_group}.enabled())) {
      return absl::InvalidArgumentError(
          "update_critic: image inputs are not available with "
          "strategy=megatron or Ulysses sequence parallelism");
    }
    ResponseForward f =
        options_.megatron
            ? ForwardResponses(*options_.megatron, ids, attn, pos, R, 1.0,
                               false, {}, stage_output_)
            : ForwardResponses(*model_, ids, attn, pos, R, 1.0, false,
                               SequenceParallel{options_.sp_group}, extras);
    const at::Tensor& mask = mb.tensor("response_mask");
    VERL_ASSIGN_OR_RETURN(
        ValueLossOutput vl,
        ComputeValueLoss(f.values, mb.tensor("values"), mb.tensor("returns"),
                         mask, options_.cliprange_value, options_.loss_agg_mode,
                         agg));
    MicroBatchResult r;
    r.loss = vl.loss;
    r.keep_alive = f.attention;
    r.summed["critic/vf_loss"] = vl.loss.item<double>() / dp;
    r.token_means["critic/vf_clipfrac"] = vl.vf_clipfrac;
    const at::Tensor m = mask.to(torch::kFloat);
    r.token_means["critic/vpred_mean"] =
        ((f.values.detach() * m).sum() / (m.sum() + 1e-8)).item<double>();
    return r;
  };
  PpoUpdateOptions update;
  update.mini_batch_size = options_.mini_batch_size;
  update.epochs = options_.ppo_epochs;
  update.micro = options_.update_micro;
  update.grad_norm_key = "critic/grad_norm";
  if (options_.megatron) {
    UseMegatronModel(*options_.megatron, &stage_output_, &update);
  }
  VERL_ASSIGN_OR_RETURN(
      MetricMap metrics,
      RunPpoUpdate(batch, update, *dp_group_, *train_state_, micro_fn));
  if (update.runner) {  // the losses were computed on the last stage
    parallel::Communicator& pp =
        *options_.megatron->mpu()->group(parallel::megatron::MpuGroup::kPp);
    VERL_RETURN_IF_ERROR(BroadcastMetrics(pp, pp.size() - 1, &metrics));
  }
  return metrics;
}

}  // namespace verl::rl
