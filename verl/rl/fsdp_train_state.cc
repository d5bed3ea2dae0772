#include "verl/rl/fsdp_train_state.h"

#include <torch/torch.h>

#include <cmath>

#include "verl/core/status.h"
#include "verl/rl/torch_functional.h"

namespace verl::rl {

double ScheduledLr(const OptimizerOptions& o, int64_t step) {
  const double factor =
      o.lr_scheduler_type == "cosine"
          ? CosineScheduleWithWarmup(step, o.warmup_steps, o.total_steps,
                                     o.min_lr_ratio, o.num_cycles)
          : ConstantScheduleWithWarmup(step, o.warmup_steps);
  return o.lr * factor;
}

absl::StatusOr<std::unique_ptr<FsdpTrainState>> FsdpTrainState::Create(
    std::vector<parallel::FsdpUnitSpec> units, const OptimizerOptions& options,
    parallel::FsdpGroups groups, parallel::FsdpOptions fsdp_options) {
  auto fsdp = std::make_unique<parallel::FsdpModule>(
      std::move(units), std::move(groups), fsdp_options);
  VERL_RETURN_IF_ERROR(fsdp->GatherAll());
  return std::unique_ptr<FsdpTrainState>(
      new FsdpTrainState(std::move(fsdp), options));
}

FsdpTrainState::FsdpTrainState(std::unique_ptr<parallel::FsdpModule> fsdp,
                               const OptimizerOptions& options)
    : fsdp_(std::move(fsdp)), options_(options) {
  torch::optim::AdamWOptions adam(options.lr);
  adam.betas({options.beta1, options.beta2})
      .eps(options.eps)
      .weight_decay(options.weight_decay);
  optimizer_ =
      std::make_unique<torch::optim::AdamW>(fsdp_->shard_params(), adam);
  ApplyLr(ScheduledLr(options_, 0));
}

FsdpTrainState::~FsdpTrainState() = default;

void FsdpTrainState::ZeroGrad() { fsdp_->ZeroGrad(); }

absl::StatusOr<double> FsdpTrainState::Step() {
  VERL_RETURN_IF_ERROR(fsdp_->ReduceAllGradients());
  VERL_ASSIGN_OR_RETURN(const double norm, fsdp_->GradNorm());
  if (!std::isfinite(norm)) {
    ++skipped_steps_;
    fsdp_->ZeroGrad();
    return norm;
  }
  if (options_.grad_clip > 0) {
    const double coef = options_.grad_clip / (norm + 1e-6);
    if (coef < 1.0) fsdp_->ScaleGrads(coef);
  }
  optimizer_->step();
  // The model computes on full parameters until per-layer hooks exist:
  // gather the updated shards back.
  fsdp_->ReshardAll();
  VERL_RETURN_IF_ERROR(fsdp_->GatherAll());
  return norm;
}

void FsdpTrainState::ApplyLr(double lr) {
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

double FsdpTrainState::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(
             optimizer_->param_groups().front().options())
      .lr();
}

double FsdpTrainState::StepSchedule() {
  const double used = lr();
  ++schedule_step_;
  ApplyLr(ScheduledLr(options_, schedule_step_));
  return used;
}

void FsdpTrainState::set_schedule_step(int64_t step) {
  schedule_step_ = step;
  ApplyLr(ScheduledLr(options_, step));
}

int64_t FsdpTrainState::OptimizerStateBytes() const {
  int64_t bytes = 0;
  for (const auto& [key, state] : optimizer_->state()) {
    const auto& s = static_cast<const torch::optim::AdamWParamState&>(*state);
    for (const at::Tensor& t : {s.exp_avg(), s.exp_avg_sq()}) {
      if (t.defined()) bytes += t.numel() * t.element_size();
    }
  }
  return bytes;
}

}  // namespace verl::rl
