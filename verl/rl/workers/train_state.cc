#include "verl/rl/workers/train_state.h"

#include <ATen/core/grad_mode.h>
#include <torch/optim/adamw.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/status.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {

absl::StatusOr<OptimizerOptions> OptimizerOptionsFromConfig(
    const parallel::OptimConfig &optim, double grad_clip, int64_t total_steps) {
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

double GlobalGradNorm(const std::vector<at::Tensor> &params) {
  double sq = 0;
  for (const auto &p : params) {
    if (p.grad().defined())
      sq += p.grad().to(at::kDouble).pow(2).sum().item<double>();
  }
  return std::sqrt(sq);
}

AdamWTrainState::AdamWTrainState(const std::vector<at::Tensor> &params,
                                 const OptimizerOptions &options)
    : options_(options) {
  torch::optim::AdamWOptions adam(options.lr);
  adam.betas({options.beta1, options.beta2})
      .eps(options.eps)
      .weight_decay(options.weight_decay);
  optimizer_ = std::make_unique<torch::optim::AdamW>(params, adam);
  ApplyLr(ScheduledLr(options_, 0));
}

AdamWTrainState::~AdamWTrainState() = default;

double AdamWTrainState::ClipAndStep(
    double norm, const std::function<void(double coef)> &scale_grads) {
  if (!std::isfinite(norm)) {
    ++skipped_steps_;
    ZeroGrad();
    return norm;
  }
  if (options_.grad_clip > 0) {
    const double coef = options_.grad_clip / (norm + 1e-6);
    if (coef < 1.0) scale_grads(coef);
  }
  optimizer_->step();
  return norm;
}

void AdamWTrainState::SaveAdamState(
    const std::string &name, const at::Tensor &param,
    const std::function<at::Tensor(const at::Tensor &)> &chunk,
    TrainStateShard *shard) {
  auto m = GetAdamState(*optimizer_, param);
  if (!m) return;
  shard->optimizer[name + ".exp_avg"] = chunk(m->exp_avg);
  shard->optimizer[name + ".exp_avg_sq"] = chunk(m->exp_avg_sq);
  shard->optimizer[name + ".step"] = at::scalar_tensor(m->step, at::kLong);
}

absl::Status AdamWTrainState::LoadAdamState(
    const TrainStateShard &shard, const std::string &name,
    const at::Tensor &param,
    const std::function<absl::StatusOr<at::Tensor>(
        const std::string &key, const at::Tensor &chunk)> &local) {
  auto step = shard.optimizer.find(name + ".step");
  if (step == shard.optimizer.end()) {
    SetAdamState(*optimizer_, param, std::nullopt);
    return absl::OkStatus();
  }
  AdamMoments m;
  m.step = step->second.item<int64_t>();
  for (auto [suffix, out] : {std::pair{".exp_avg", &m.exp_avg},
                             std::pair{".exp_avg_sq", &m.exp_avg_sq}}) {
    const std::string key = name + suffix;
    VERL_ASSIGN_OR_RETURN(at::Tensor chunk,
                          FindCheckpointTensor(shard.optimizer, key));
    VERL_ASSIGN_OR_RETURN(*out, local(key, chunk));
  }
  SetAdamState(*optimizer_, param, m);
  return absl::OkStatus();
}

void AdamWTrainState::SaveCounters(TrainStateShard *shard) const {
  shard->schedule_step = schedule_step_;
  shard->skipped_steps = skipped_steps_;
  shard->optimizer_options = options_;
  shard->lr = lr();
}

void AdamWTrainState::LoadCounters(const TrainStateShard &shard) {
  skipped_steps_ = shard.skipped_steps;
  set_schedule_step(shard.schedule_step);
}

absl::StatusOr<TrainState::DistCheckpointWriter>
TrainState::PrepareDistCheckpoint(const TrainStateLoadParts &,
                                  const std::map<std::string, at::Tensor> &) {
  return absl::UnimplementedError(
      "this train state has no dist checkpoint (only strategy: megatron)");
}

absl::Status TrainState::SaveDistCheckpoint(
    const std::string &role_dir, const TrainStateLoadParts &parts,
    const std::map<std::string, at::Tensor> &rng) {
  absl::StatusOr<DistCheckpointWriter> write =
      PrepareDistCheckpoint(parts, rng);
  if (!write.ok()) return write.status();
  return (*write)(role_dir);
}
absl::StatusOr<std::map<std::string, at::Tensor>>
TrainState::LoadDistCheckpoint(const std::string &,
                               const TrainStateLoadParts &) {
  return absl::UnimplementedError(
      "this train state has no dist checkpoint (only strategy: megatron)");
}

absl::StatusOr<at::Tensor> FindCheckpointTensor(
    const std::map<std::string, at::Tensor> &m, const std::string &key) {
  auto it = m.find(key);
  if (it == m.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint has no tensor ", key));
  }
  return it->second;
}

ReplicatedTrainState::ReplicatedTrainState(
    std::vector<at::Tensor> params, const OptimizerOptions &options,
    std::shared_ptr<parallel::Communicator> dp_group)
    : AdamWTrainState(params, options),
      params_(std::move(params)),
      dp_group_(std::move(dp_group)),
      ckpt_group_(dp_group_) {}

namespace {

std::vector<at::Tensor> Tensors(const NamedParams &params) {
  std::vector<at::Tensor> out;
  for (const auto &[name, t] : params) out.push_back(t);
  return out;
}

std::vector<std::string> Names(const NamedParams &params) {
  std::vector<std::string> out;
  for (const auto &[name, t] : params) out.push_back(name);
  return out;
}

}  // namespace

at::Tensor ChunkOf(const at::Tensor &full, int rank, int world) {
  at::Tensor t = full.detach();
  if (t.dim() == 0) return t.clone();
  const auto [begin, end] = ChunkRows(t.size(0), rank, world);
  return t.narrow(0, begin, end - begin).clone();
}

// Chunks are padded to ceil(n/W) rows so one even all-gather serves every
// rank.
absl::StatusOr<at::Tensor> GatherChunks(parallel::Communicator *group,
                                        const std::string &name,
                                        const at::Tensor &chunk,
                                        at::IntArrayRef shape) {
  const int world = group ? group->size() : 1;
  const int rank = group ? group->rank() : 0;
  if (shape.empty()) {
    if (chunk.dim() != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("checkpoint tensor ", name, ": expected a scalar"));
    }
    return chunk;
  }
  const auto [begin, end] = ChunkRows(shape[0], rank, world);
  std::vector<int64_t> want(shape.begin(), shape.end());
  want[0] = end - begin;
  if (chunk.sizes().vec() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint tensor ", name, ": chunk of rank ", rank, " of ", world,
        " has shape [", absl::StrJoin(chunk.sizes(), ","), "], expected [",
        absl::StrJoin(want, ","), "]"));
  }
  if (world == 1) return chunk;
  const int64_t rows = ChunkRows(shape[0], 0, world).second;
  std::vector<int64_t> padded_shape = want;
  padded_shape[0] = rows;
  at::Tensor padded = at::zeros(padded_shape, chunk.options());
  padded.narrow(0, 0, want[0]).copy_(chunk);
  VERL_ASSIGN_OR_RETURN(at::Tensor all, group->AllGatherCat(padded));
  return all.narrow(0, 0, shape[0]);
}

NamedParams NamedParameters(const torch::nn::Module &module) {
  NamedParams out;
  for (const auto &item : module.named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int rank, int world) {
  const int64_t per = (rows + world - 1) / world;
  const int64_t begin = std::min(rows, per * rank);
  return {begin, std::min(rows, begin + per)};
}

std::optional<AdamMoments> GetAdamState(torch::optim::Optimizer &optimizer,
                                        const at::Tensor &param) {
  auto it =
      optimizer.state().find(c10::guts::to_string(param.unsafeGetTensorImpl()));
  if (it == optimizer.state().end()) return std::nullopt;
  const auto &s =
      static_cast<const torch::optim::AdamWParamState &>(*it->second);
  return AdamMoments{s.step(), s.exp_avg(), s.exp_avg_sq()};
}

void SetAdamState(torch::optim::Optimizer &optimizer, const at::Tensor &param,
                  const std::optional<AdamMoments> &moments) {
  const std::string key = c10::guts::to_string(param.unsafeGetTensorImpl());
  if (!moments) {
    optimizer.state().erase(key);
    return;
  }
  auto state = std::make_unique<torch::optim::AdamWParamState>();
  state->step(moments->step);
  state->exp_avg(moments->exp_avg);
  state->exp_avg_sq(moments->exp_avg_sq);
  optimizer.state()[key] = std::move(state);
}

ReplicatedTrainState::ReplicatedTrainState(
    const NamedParams &params, const OptimizerOptions &options,
    std::shared_ptr<parallel::Communicator> dp_group,
    std::shared_ptr<parallel::Communicator> checkpoint_group)
    : ReplicatedTrainState(Tensors(params), options, std::move(dp_group)) {
  names_ = Names(params);
  if (checkpoint_group) ckpt_group_ = std::move(checkpoint_group);
}

ReplicatedTrainState::~ReplicatedTrainState() = default;

absl::StatusOr<TrainStateShard> ReplicatedTrainState::SaveShard() {
  if (names_.size() != params_.size()) {
    return absl::FailedPreconditionError(
        "ReplicatedTrainState built without parameter names cannot be "
        "checkpointed");
  }
  TrainStateShard shard;
  shard.shard_world = ckpt_group_ ? ckpt_group_->size() : 1;
  shard.shard_rank = ckpt_group_ ? ckpt_group_->rank() : 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string &name = names_[i];
    shard.shapes.emplace_back(name, params_[i].sizes().vec());
    shard.model[name] =
        ChunkOf(params_[i], shard.shard_rank, shard.shard_world);
    SaveAdamState(
        name, params_[i],
        [&](const at::Tensor &t) {
          return ChunkOf(t, shard.shard_rank, shard.shard_world);
        },
        &shard);
  }
  SaveCounters(&shard);
  return shard;
}

absl::Status ReplicatedTrainState::LoadShard(const TrainStateShard &shard,
                                             const TrainStateLoadParts &parts) {
  if (names_.size() != params_.size()) {
    return absl::FailedPreconditionError(
        "ReplicatedTrainState built without parameter names cannot load a "
        "checkpoint");
  }
  const int world = ckpt_group_ ? ckpt_group_->size() : 1;
  if (shard.shard_world != world) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint shard is chunked over ", shard.shard_world,
                     " ranks but this state's group has ", world));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    const std::string &name = names_[i];
    at::Tensor &p = params_[i];
    if (parts.model) {
      VERL_ASSIGN_OR_RETURN(at::Tensor chunk,
                            FindCheckpointTensor(shard.model, name));
      VERL_ASSIGN_OR_RETURN(
          at::Tensor full,
          GatherChunks(ckpt_group_.get(), name, chunk, p.sizes()));
      p.detach().copy_(full);
    }
    if (parts.optimizer) {
      VERL_RETURN_IF_ERROR(LoadAdamState(
          shard, name, p,
          [&](const std::string &key,
              const at::Tensor &chunk) -> absl::StatusOr<at::Tensor> {
            VERL_ASSIGN_OR_RETURN(
                at::Tensor full,
                GatherChunks(ckpt_group_.get(), key, chunk, p.sizes()));
            return full.to(p.options()).clone();
          }));
    }
  }
  if (parts.counters) LoadCounters(shard);
  return absl::OkStatus();
}

absl::StatusOr<NamedParams> ReplicatedTrainState::FullStateDict() {
  NamedParams out;
  if (ckpt_group_ && ckpt_group_->rank() != 0) return out;
  for (size_t i = 0; i < params_.size(); ++i) {
    out.emplace_back(i < names_.size() ? names_[i] : absl::StrCat("param.", i),
                     params_[i].detach().clone());
  }
  return out;
}

void ReplicatedTrainState::ZeroGrad() {
  for (auto &p : params_) {
    if (p.grad().defined()) p.mutable_grad().zero_();
  }
}

absl::StatusOr<double> ReplicatedTrainState::Step() {
  if (dp_group_ && dp_group_->size() > 1) {
    // One flat fp32 buffer: a single collective per step.
    std::vector<at::Tensor> grads;
    for (auto &p : params_) {
      grads.push_back(p.grad().defined() ? p.grad().to(at::kFloat).reshape(-1)
                                         : at::zeros({p.numel()}, at::kFloat));
    }
    at::Tensor flat = at::cat(grads);
    absl::Status s = dp_group_->AllReduce(flat, parallel::ReduceOp::kAvg);
    if (!s.ok()) return s;
    int64_t offset = 0;
    for (auto &p : params_) {
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
  return ClipAndStep(GlobalGradNorm(params_), [&](double coef) {
    for (auto &p : params_) {
      if (p.grad().defined()) p.mutable_grad().mul_(coef);
    }
  });
}

double ScheduledLr(const OptimizerOptions &o, int64_t step) {
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

void AdamWTrainState::ApplyLr(double lr) {
  for (auto &group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions &>(group.options()).lr(lr);
  }
}

double AdamWTrainState::lr() const {
  return static_cast<const torch::optim::AdamWOptions &>(
             optimizer_->param_groups().front().options())
      .lr();
}

double AdamWTrainState::StepSchedule() {
  const double used = lr();
  ++schedule_step_;
  ApplyLr(ScheduledLr(options_, schedule_step_));
  return used;
}

void AdamWTrainState::set_schedule_step(int64_t step) {
  schedule_step_ = step;
  ApplyLr(ScheduledLr(options_, step));
}

}  // namespace verl::rl
