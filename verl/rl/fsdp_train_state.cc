#include "verl/rl/fsdp_train_state.h"

#include <torch/torch.h>

#include <cmath>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/rl/torch_functional.h"

namespace verl::rl {

absl::StatusOr<std::unique_ptr<FsdpTrainState>> FsdpTrainState::Create(
    std::vector<parallel::FsdpUnitSpec> units, const OptimizerOptions& options,
    parallel::FsdpGroups groups, parallel::FsdpOptions fsdp_options) {
  auto fsdp = std::make_unique<parallel::FsdpModule>(
      std::move(units), std::move(groups), fsdp_options);
  VERL_RETURN_IF_ERROR(fsdp->GatherAll());
  return std::unique_ptr<FsdpTrainState>(
      new FsdpTrainState(std::move(fsdp), options));
}

absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name) {
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  if (name == "fp32" || name == "float32") return at::kFloat;
  return absl::InvalidArgumentError(
      absl::StrCat("fsdp_config.dtype: \"", name,
                   "\" (expected bf16, bfloat16, fp16, float16, fp32 or "
                   "float32)"));
}

absl::StatusOr<std::unique_ptr<FsdpTrainState>> FsdpTrainState::ForModule(
    torch::nn::Module& model, const parallel::FsdpConfig& config,
    const OptimizerOptions& options,
    std::shared_ptr<parallel::Communicator> dp_group) {
  if (config.ulysses_sequence_parallel_size() > 1) {
    return absl::UnimplementedError(
        "fsdp_config.ulysses_sequence_parallel_size > 1 is not supported by "
        "the FSDP train state yet");
  }
  parallel::FsdpOptions fsdp_options;
  VERL_ASSIGN_OR_RETURN(fsdp_options.compute_dtype,
                        DtypeFromName(config.dtype()));
  fsdp_options.param_offload = config.param_offload();
  fsdp_options.optimizer_offload = config.optimizer_offload();
  VERL_ASSIGN_OR_RETURN(
      parallel::FsdpGroups groups,
      parallel::MakeFsdpGroups(std::move(dp_group), config.fsdp_size()));
  parallel::NamedTensors params;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    params.emplace_back(item.key(), item.value());
  }
  return Create(parallel::UnitsByLayer(params), options, std::move(groups),
                fsdp_options);
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
