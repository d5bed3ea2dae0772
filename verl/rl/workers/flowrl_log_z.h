// File: verl/rl/workers/flowrl_log_z.h
//
// FlowRL's learned log-partition head (verl recipe/flowrl ProjZModule): an
// MLP on the mean final hidden state of the prompt, (Linear(H,H) → GELU →
// LayerNorm(H) → Dropout(0.1)) × (layers − 1) → Linear(H, 1). It has its own
// parameters and optimizer (a replicated train state: gradients averaged over
// the data-parallel group, same AdamW settings as the actor), stepped
// together with the policy through JointTrainState. Under strategy=megatron
// every tp rank holds the whole head and computes the same log Z, so its
// dropout masks come from a generator seeded alike on those ranks.
#ifndef VERL_RL_WORKERS_FLOWRL_LOG_Z_H_
#define VERL_RL_WORKERS_FLOWRL_LOG_Z_H_

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <cstdint>
#include <memory>
#include <optional>

#include "verl/rl/workers/train_state.h"

namespace verl::rl {

class LogZHeadImpl : public torch::nn::Module {
 public:
  LogZHeadImpl(int64_t hidden_size, int64_t num_layers, double dropout);
  // prompt_hidden [B, H] -> log Z [B].
  at::Tensor forward(const at::Tensor& prompt_hidden);
  // Training-mode dropout masks from `generator` instead of the global one.
  void set_dropout_generator(at::Generator generator) {
    dropout_generator_ = std::move(generator);
  }

 private:
  torch::nn::Sequential net_{nullptr};
  std::optional<at::Generator> dropout_generator_;
};
TORCH_MODULE(LogZHead);

// The policy's and the head's train states as one: ZeroGrad/Step act on
// both (Step returns the policy's grad norm; the head's is `head_grad_norm`),
// the schedule and checkpoint methods are the policy's.
class JointTrainState : public TrainState {
 public:
  JointTrainState(TrainState& policy, TrainState& head)
      : policy_(policy), head_(head) {}
  void ZeroGrad() override;
  absl::StatusOr<double> Step() override;
  double StepSchedule() override { return policy_.StepSchedule(); }
  double lr() const override { return policy_.lr(); }
  int64_t skipped_steps() const override { return policy_.skipped_steps(); }
  int64_t schedule_step() const override { return policy_.schedule_step(); }
  void set_schedule_step(int64_t step) override {
    policy_.set_schedule_step(step);
  }
  torch::optim::Optimizer& optimizer() override { return policy_.optimizer(); }
  absl::StatusOr<TrainStateShard> SaveShard() override {
    return policy_.SaveShard();
  }
  absl::Status LoadShard(const TrainStateShard& shard,
                         const TrainStateLoadParts& parts) override {
    return policy_.LoadShard(shard, parts);
  }
  absl::StatusOr<NamedParams> FullStateDict() override {
    return policy_.FullStateDict();
  }
  double head_grad_norm() const { return head_grad_norm_; }

 private:
  TrainState& policy_;
  TrainState& head_;
  double head_grad_norm_ = 0.0;
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_FLOWRL_LOG_Z_H_
