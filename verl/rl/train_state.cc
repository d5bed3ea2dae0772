#include "verl/rl/train_state.h"

#include <torch/torch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "verl/rl/torch_functional.h"

namespace verl::rl {

absl::StatusOr<OptimizerOptions> OptimizerOptionsFromConfig(
    const parallel::OptimConfig& optim, double grad_clip, int64_t total_steps) {
  OptimizerOptions o;
  o.lr = optim.lr();
  if (optim.betas_size() != 0 && optim.betas_size() != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optim.betas: expected 2 values, got ", optim.betas_size()));
  }
  if (optim.betas_size() == 2) {
    o.beta1 = optim.betas(0);
    o.beta2 = optim.betas(1);
  }
  o.weight_decay = optim.weight_decay();
  o.grad_clip = grad_clip;
  std::string schedule = optim.lr_scheduler_type();
  if (optim.has_warmup_style() && !optim.warmup_style().empty())
    schedule = optim.warmup_style();
  if (schedule != "constant" && schedule != "cosine") {
    return absl::InvalidArgumentError(
        absl::StrCat("optim.lr_scheduler_type: \"", schedule,
                     "\" (expected constant or cosine)"));
  }
  if (optim.optimizer() != "AdamW") {
    return absl::InvalidArgumentError(
        absl::StrCat("optim.optimizer: \"", optim.optimizer(),
                     "\" (only AdamW is built in)"));
  }
  o.lr_scheduler_type = schedule;
  o.total_steps = optim.total_training_steps() > 0
                      ? optim.total_training_steps()
                      : total_steps;
  o.warmup_steps =
      optim.lr_warmup_steps() >= 0
          ? optim.lr_warmup_steps()
          : static_cast<int64_t>(optim.lr_warmup_steps_ratio() * o.total_steps);
  o.min_lr_ratio = optim.min_lr_ratio();
  o.num_cycles = optim.num_cycles();
  return o;
}

double GlobalGradNorm(const std::vector<at::Tensor>& params) {
  double sq = 0;
  for (const auto& p : params) {
    if (p.grad().defined())
      sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(sq);
}

ReplicatedTrainState::ReplicatedTrainState(
    std::vector<at::Tensor> params, const OptimizerOptions& options,
    std::shared_ptr<parallel::Communicator> dp_group)
    : params_(std::move(params)),
      options_(options),
      dp_group_(std::move(dp_group)) {
  torch::optim::AdamWOptions adam(options.lr);
  adam.betas({options.beta1, options.beta2})
      .eps(options.eps)
      .weight_decay(options.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(params_, adam);
  ApplyLr(ScheduledLr(options_, 0));
}

ReplicatedTrainState::~ReplicatedTrainState() = default;

void ReplicatedTrainState::ZeroGrad() {
  for (auto& p : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

absl::StatusOr<double> ReplicatedTrainState::Step() {
  if (dp_group_ && dp_group_->size() > 1) {
    // One flat fp32 buffer: a single collective per step.
    std::vector<at::Tensor> grads;
    for (auto& p : params_) {
      grads.push_back(p.grad().defined() ? p.grad().to(at::kFloat).reshape(-1)
                                         : at::zeros({p.numel()}, at::kFloat));
    }
    at::Tensor flat = at::cat(grads);
    absl::Status s = dp_group_->AllReduce(flat, parallel::ReduceOp::kAvg);
    if (!s.ok()) return s;
    int64_t offset = 0;
    for (auto& p : params_) {
      at::Tensor g =
          flat.narrow(0, offset, p.numel()).view(p.sizes()).to(p.scalar_type());
      if (p.grad().defined()) {
        p.mutable_grad().copy_(g);
      } else {
        p.mutable_grad() = g.clone();
      }
      offset += p.numel();
    }
  }
  const double norm = GlobalGradNorm(params_);
  if (!std::isfinite(norm)) {
    ++skipped_steps_;
    ZeroGrad();
    return norm;
  }
  if (options_.grad_clip > 0) {
    const double coef = options_.grad_clip / (norm + 1e-6);
    if (coef < 1.0) {
      for (auto& p : params_) {
        if (p.grad().defined()) p.mutable_grad().mul_(coef);
      }
    }
  }
  optimizer_->step();
  return norm;
}

double ScheduledLr(const OptimizerOptions& o, int64_t step) {
  double factor = 1.0;
  if (o.lr_scheduler_type == "cosine") {
    factor = CosineScheduleWithWarmup(step, o.warmup_steps, o.total_steps,
                                      o.min_lr_ratio, o.num_cycles);
  } else if (o.lr_scheduler_type == "wsd") {
    factor = WsdScheduleWithWarmup(step, o.warmup_steps, o.total_steps,
                                   o.min_lr_ratio, o.num_cycles);
  } else {
    factor = ConstantScheduleWithWarmup(step, o.warmup_steps);
  }
  return o.lr * factor;
}

void ReplicatedTrainState::ApplyLr(double lr) {
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  }
}

double ReplicatedTrainState::lr() const {
  return static_cast<const torch::optim::AdamWOptions&>(
             optimizer_->param_groups().front().options())
      .lr();
}

double ReplicatedTrainState::StepSchedule() {
  const double used = lr();
  ++schedule_step_;
  ApplyLr(ScheduledLr(options_, schedule_step_));
  return used;
}

void ReplicatedTrainState::set_schedule_step(int64_t step) {
  schedule_step_ = step;
  ApplyLr(ScheduledLr(options_, step));
}

}  // namespace verl::rl
