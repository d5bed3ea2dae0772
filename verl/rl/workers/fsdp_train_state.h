// File: verl/rl/workers/fsdp_train_state.h
//
// TrainState over verl::parallel::FsdpModule (ZeRO-3 sharding of parameters,
// gradients and AdamW state over the data-parallel group). A drop-in for
// ReplicatedTrainState: the actor/critic run forward/backward on the model's
// own parameters.
//
// Per-layer mode (ForModule on a models::CausalLM): the state installs the
// decoder's LayerHooks, so each layer is all-gathered just before its
// forward, freed after it, re-gathered for its backward and its gradients
// reduce-scattered right after (FSDP's schedule, with prefetch); the
// embeddings / final norm / heads form the root unit, gathered from the
// first forward until Step() (as FSDP2 keeps its root). Between steps every
// parameter is resharded (empty); stream them with fsdp().ForEachGatheredUnit.
//
// Eager mode (Create, other modules): all units stay gathered between steps
// and Step() reduce-scatters every unit.
//
// Step(): reduce the remaining gradients into fp32 shard gradients, clip by
// the global norm across shards, skip non-finite steps, AdamW on the local
// shards only, then reshard (per-layer) or re-gather (eager).
#ifndef VERL_RL_WORKERS_FSDP_TRAIN_STATE_H_
#define VERL_RL_WORKERS_FSDP_TRAIN_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/fsdp_config.pb.h"
#include "verl/rl/workers/train_state.h"

namespace torch::nn {
class Module;
}
namespace verl::models {
class CausalLM;
}

namespace verl::rl {

// fsdp_config dtype names: bf16/bfloat16, fp16/float16, fp32/float32.
absl::StatusOr<at::ScalarType> DtypeFromName(const std::string &name);

// Forward-only sharding of `model` (verl's reference policy under FSDP: no
// gradients, no optimizer). Its parameters are frozen and sharded over
// `group` as ForModule does (hybrid groups from fsdp_size, compute dtype,
// offload flags), with the per-layer hooks: each no-grad forward gathers
// one layer at a time, and ForwardBatchNoGrad frees the root at its end,
// so nothing stays gathered between passes. The hooks hold a weak
// reference: keep the module alive as long as the model runs. Collective
// over `group`.
absl::StatusOr<std::shared_ptr<parallel::FsdpModule>> ShardForInference(
    models::CausalLM &model, const parallel::FsdpConfig &config,
    std::shared_ptr<parallel::Communicator> group);

class FsdpTrainState : public AdamWTrainState {
 public:
  // Shards the units' parameters over `groups` and gathers them back for
  // compute. Collective over the groups.
  static absl::StatusOr<std::unique_ptr<FsdpTrainState>> Create(
      std::vector<parallel::FsdpUnitSpec> units,
      const OptimizerOptions &options, parallel::FsdpGroups groups,
      parallel::FsdpOptions fsdp_options);
  // The state for `model` under verl's `<role>.fsdp_config`: one unit per
  // decoder layer plus embed/head (HF parameter names), hybrid groups from
  // fsdp_size, compute dtype from `dtype`, offload flags,
  // reshard_after_forward, forward_prefetch. Per-layer mode when `model` is
  // a models::CausalLM and `per_layer` (which needs the same number of
  // forward/backward passes on every rank: false with dynamic batch sizes),
  // else eager. Collective over `dp_group`. Under Ulysses sequence
  // parallelism (ulysses_sequence_parallel_size > 1, handled by the caller:
  // parallel::MakeUlyssesGroups + SequenceParallel in the forward passes)
  // `dp_group` is still every rank (dp x sp), as in verl: parameters are
  // sharded over all of them.
  static absl::StatusOr<std::unique_ptr<FsdpTrainState>> ForModule(
      torch::nn::Module &model, const parallel::FsdpConfig &config,
      const OptimizerOptions &options,
      std::shared_ptr<parallel::Communicator> dp_group, bool per_layer = true);
  ~FsdpTrainState() override;

  void ZeroGrad() override;
  absl::StatusOr<double> Step() override;

  // Checkpoints: this rank's unpadded master shards (chunks over the shard
  // group) and their AdamW state; loading pads them back and re-gathers.
  absl::StatusOr<TrainStateShard> SaveShard() override;
  absl::Status LoadShard(const TrainStateShard &shard,
                         const TrainStateLoadParts &parts) override;
  absl::StatusOr<NamedParams> FullStateDict() override;

  parallel::FsdpModule &fsdp() { return *fsdp_; }
  bool per_layer() const { return per_layer_; }
  // Bytes of AdamW state (exp_avg, exp_avg_sq) held by this rank.
  int64_t OptimizerStateBytes() const;
  parallel::MemoryLocation optimizer_location() const {
    return optimizer_location_;
  }
  // This rank's FSDP bytes plus the AdamW state, by location (host_bytes /
  // device_bytes include the optimizer state).
  parallel::FsdpMemory Memory() const;

 private:
  FsdpTrainState(std::shared_ptr<parallel::FsdpModule> fsdp,
                 const OptimizerOptions &options);
  // After the shards changed: reshard, and re-gather in eager mode.
  absl::Status RefreshParams();
  // param_offload / optimizer_offload: shards and AdamW state to `to`.
  absl::Status PlaceOffloaded(parallel::MemoryLocation to);
  absl::StatusOr<double> StepOnDevice();
  void MoveOptimizerState(parallel::MemoryLocation to);

  // Shared with the model's layer hooks (which hold a weak reference).
  std::shared_ptr<parallel::FsdpModule> fsdp_;
  bool per_layer_ = false;
  // Names of fsdp_->shard_params(), in order (the trainable parameters).
  std::vector<std::string> trainable_names_;
  parallel::MemoryLocation optimizer_location_ =
      parallel::MemoryLocation::kDevice;
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_FSDP_TRAIN_STATE_H_
