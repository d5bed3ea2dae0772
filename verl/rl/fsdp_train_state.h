// File: verl/rl/fsdp_train_state.h
//
// TrainState over verl::parallel::FsdpModule (ZeRO-3 sharding of parameters,
// gradients and AdamW state over the data-parallel group). A drop-in for
// ReplicatedTrainState: the actor/critic run forward/backward on the model's
// own parameters, which this state keeps gathered between steps (the model
// has no per-layer FSDP hooks yet); Step() reduce-scatters the gradients
// unit by unit into fp32 shard gradients, clips by the global norm across
// shards, skips non-finite steps, runs AdamW on the local shards only and
// re-gathers the updated parameters.
#ifndef VERL_RL_FSDP_TRAIN_STATE_H_
#define VERL_RL_FSDP_TRAIN_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/fsdp_config.pb.h"
#include "verl/rl/train_state.h"

namespace torch::nn {
class Module;
}

namespace verl::rl {

// fsdp_config dtype names: bf16/bfloat16, fp16/float16, fp32/float32.
absl::StatusOr<at::ScalarType> DtypeFromName(const std::string& name);

class FsdpTrainState : public TrainState {
 public:
  // Shards the units' parameters over `groups` and gathers them back for
  // compute. Collective over the groups.
  static absl::StatusOr<std::unique_ptr<FsdpTrainState>> Create(
      std::vector<parallel::FsdpUnitSpec> units,
      const OptimizerOptions& options, parallel::FsdpGroups groups,
      parallel::FsdpOptions fsdp_options);
  // The state for `model` under verl's `<role>.fsdp_config`: one unit per
  // decoder layer plus embed/head (HF parameter names), hybrid groups from
  // fsdp_size, compute dtype from `dtype`, offload flags. Collective over
  // `dp_group`.
  static absl::StatusOr<std::unique_ptr<FsdpTrainState>> ForModule(
      torch::nn::Module& model, const parallel::FsdpConfig& config,
      const OptimizerOptions& options,
      std::shared_ptr<parallel::Communicator> dp_group);
  ~FsdpTrainState() override;

  void ZeroGrad() override;
  absl::StatusOr<double> Step() override;
  double StepSchedule() override;
  double lr() const override;
  int64_t skipped_steps() const override { return skipped_steps_; }
  int64_t schedule_step() const override { return schedule_step_; }
  void set_schedule_step(int64_t step) override;
  torch::optim::Optimizer& optimizer() override { return *optimizer_; }

  // Checkpoints: this rank's unpadded master shards (chunks over the shard
  // group) and their AdamW state; loading pads them back and re-gathers.
  absl::StatusOr<TrainStateShard> SaveShard() override;
  absl::Status LoadShard(const TrainStateShard& shard,
                         const TrainStateLoadParts& parts) override;
  absl::StatusOr<NamedParams> FullStateDict() override;

  parallel::FsdpModule& fsdp() { return *fsdp_; }
  // Bytes of AdamW state (exp_avg, exp_avg_sq) held by this rank.
  int64_t OptimizerStateBytes() const;

 private:
  FsdpTrainState(std::unique_ptr<parallel::FsdpModule> fsdp,
                 const OptimizerOptions& options);
  void ApplyLr(double lr);

  std::unique_ptr<parallel::FsdpModule> fsdp_;
  OptimizerOptions options_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  // Names of fsdp_->shard_params(), in order (the trainable parameters).
  std::vector<std::string> trainable_names_;
  int64_t skipped_steps_ = 0;
  int64_t schedule_step_ = 0;
};

}  // namespace verl::rl

#endif  // VERL_RL_FSDP_TRAIN_STATE_H_
