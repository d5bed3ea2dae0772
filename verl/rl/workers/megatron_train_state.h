// File: verl/rl/workers/megatron_train_state.h
//
// TrainState of a role under `strategy: megatron`: the parameters are this
// rank's tensor-parallel shards of a models::MegatronGPTModel (dp x tp
// ranks, Megatron's rank order from parallel::megatron::ParallelState).
//
// Step(), as Megatron's DDP + optimizer do:
//   1. FinalizeGrads: partial gradients of replicated parameters summed over
//      tp (norms under sequence parallelism, q/k norms).
//   2. Gradients averaged over dp. With `use_distributed_optimizer`
//      (ZeRO-1/2): the gradients of all parameters, flattened into one
//      buffer (padded to a multiple of dp), are reduce-scattered so that
//      dp rank r holds the averaged gradient of its contiguous range, AdamW
//      (exp_avg, exp_avg_sq) steps an fp32 master copy of that range only,
//      and the updated ranges are all-gathered back into the parameters.
//      An MoE model's local experts form a second flat buffer split over
//      the expert-data-parallel group (edp: the ranks holding the same
//      expert shards), as Megatron's expert-parallel buffers: their
//      gradients are reduce-scattered over edp (FinalizeGrads leaves that
//      sum to it) and scaled by 1/dp, each edp rank steps its range, and
//      the ranges are all-gathered over edp after.
//      Without it: one all-reduce of the dense flat buffer, AdamW on every
//      parameter.
//   3. The global grad norm over tp x dp: tp-sharded parameters (column /
//      row weights, vocab-parallel tables) count on every tp rank, the
//      replicated ones on tp rank 0 only (Megatron's
//      get_grad_norm_fp32), each expert shard once, so it equals the
//      single-process norm. Then verl's clip-or-skip rule
//      (AdamWTrainState::ClipAndStep).
//
// Half precision (Megatron's Float16Module + mixed-precision optimizer;
// megatron.dtype bfloat16 — fp16 parameters work alike here, but the
// trainer refuses them, having no loss scaling): the model's parameters are
// half (CastMegatronParameters) and the forward / backward compute in it;
// each half parameter's gradient is an fp32 buffer set up front (Megatron's
// main_grad), which autograd accumulates the micro-batches into, so
// gradients are accumulated, reduced (dp all-reduce / reduce-scatter) and
// clipped in fp32 (Megatron forces accumulate_allreduce_grads_in_fp32 for
// bf16). AdamW steps fp32 master copies (one per parameter, or the
// distributed optimizer's fp32 range), and the updated masters are rounded
// into the half parameters (the distributed optimizer all-gathers them in
// the half dtype, as Megatron's param all-gather). Checkpoints keep the fp32
// masters ("optimizer.state.fp32_param.<name>" in dist_ckpt; the model
// tensors of the HF-layout shards).
//
// Offload (megatron.param_offload / grad_offload / optimizer_offload, as
// verl's offload_megatron_model_to_cpu / offload_megatron_optimizer): the
// flagged buffers rest in host memory (pinned with CUDA; on CPU a separate
// host copy) between uses. OffloadToHost() / LoadToDevice() move the
// parameters (param_offload) and gradient buffers (grad_offload) around a
// pass; Step() brings the optimizer's state (AdamW moments, fp32 masters)
// to the device for the step only (optimizer_offload). Tensors keep their
// identity (storage moves), so the model and the optimizer state stay valid.
//
// Checkpoints: the trainer saves Megatron's dist_ckpt/ (SaveDistCheckpoint
// / LoadDistCheckpoint below: Megatron names, each rank's box of the global
// tensors, resharding on load). SaveShard / LoadShard still write and read
// the FSDP world-size layout (each stage gathered over tp to HF tensors with
// models::GatherHfTensors, saved as this rank's dim-0 chunk over the
// world), which checkpoints of earlier versions used.
#ifndef VERL_RL_WORKERS_MEGATRON_TRAIN_STATE_H_
#define VERL_RL_WORKERS_MEGATRON_TRAIN_STATE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

// Casts `model`'s floating-point parameters (not its buffers: RoPE's
// inverse frequencies stay fp32; nor MoE routers' `expert_bias`, fp32 as in
// Megatron) to `dtype` in place (identity kept): megatron.dtype bfloat16 /
// float16 after the weights are loaded.
void CastMegatronParameters(torch::nn::Module& model, at::ScalarType dtype);

// Moves every parameter of `model` to host memory (pinned with CUDA; on CPU
// a separate host copy) or to `device`, keeping the tensors' identity (so
// the model's references stay valid): param_offload of a forward-only
// model (the reference), which has no train state.
void MoveModuleParameters(torch::nn::Module& model, parallel::MemoryLocation to,
                          c10::Device device);

// What the state does beyond AdamW (verl's <role>.megatron.* keys).
struct MegatronStateOptions {
  bool distributed_optimizer = true;  // use_distributed_optimizer
  bool param_offload = false;
  bool grad_offload = false;
  bool optimizer_offload = false;
};

class MegatronTrainState : public AdamWTrainState {
 public:
  // AdamW over `model`'s parameters on the groups of `mpu` (the one the
  // model was built with). Collective over the mpu's world. Offloaded
  // buffers start in host memory.
  static absl::StatusOr<std::unique_ptr<MegatronTrainState>> Create(
      std::shared_ptr<models::MegatronGPTModel> model,
      std::shared_ptr<parallel::megatron::ParallelState> mpu,
      const OptimizerOptions& options, const MegatronStateOptions& state);
  static absl::StatusOr<std::unique_ptr<MegatronTrainState>> Create(
      std::shared_ptr<models::MegatronGPTModel> model,
      std::shared_ptr<parallel::megatron::ParallelState> mpu,
      const OptimizerOptions& options, bool distributed_optimizer);
  ~MegatronTrainState() override;

  // param_offload / grad_offload: the parameters / gradient buffers to the
  // device before a forward (and backward) pass, and back to host memory
  // after it. No-ops for the buffers not offloaded.
  absl::Status LoadToDevice();
  absl::Status OffloadToHost();
  // This rank's bytes by location: param_shard_bytes (the model's
  // parameters), grad_shard_bytes (their gradient buffers), host_bytes /
  // device_bytes of those plus the optimizer state (moments and masters).
  parallel::FsdpMemory Memory() const;
  // The fp32 tensors AdamW steps: one per parameter (the parameter itself
  // when it is fp32), or the distributed optimizer's range.
  std::vector<at::Tensor> MasterParams() const;

  void ZeroGrad() override;
  absl::StatusOr<double> Step() override;

  absl::StatusOr<TrainStateShard> SaveShard() override;
  absl::Status LoadShard(const TrainStateShard& shard,
                         const TrainStateLoadParts& parts) override;
  // HF-named full tensors on world rank 0 (gathered stage by stage).
  absl::StatusOr<NamedParams> FullStateDict() override;

  // Megatron's dist_ckpt (what the trainer saves for strategy: megatron):
  // every parameter under its Megatron name in the global tp = 1 layout
  // (models::MegatronSliceOf), this rank's box of it; the AdamW moments as
  // "optimizer.state.exp_avg.<name>" / "exp_avg_sq" (and the distributed
  // optimizer's "fp32_param") in the same boxes, gathered over dp; the step
  // and counters in the common state; "rng_state.<kind>" as one row per
  // rank. Replicas save once: replicated parameters on tp rank 0, and each
  // parameter on dp rank (index % dp), which spreads the writing over dp.
  // Loading reads each box of the current layout from whatever chunks
  // overlap it, so any tp (and dp) loads any other's checkpoint.
  bool UsesDistCheckpoint() const override { return true; }
  absl::StatusOr<DistCheckpointWriter> PrepareDistCheckpoint(
      const TrainStateLoadParts& parts,
      const std::map<std::string, at::Tensor>& rng) override;
  absl::StatusOr<std::map<std::string, at::Tensor>> LoadDistCheckpoint(
      const std::string& role_dir, const TrainStateLoadParts& parts) override;

  models::MegatronGPTModel& model() { return *model_; }
  bool distributed_optimizer() const { return distributed_; }
  // Bytes of this rank's parameter shards and of its AdamW moments (and,
  // with the distributed optimizer, the fp32 master range).
  int64_t ParameterBytes() const;
  int64_t OptimizerStateBytes() const;

 private:
  struct Bucket;  // dense or expert parameters in one flat buffer
  struct Flat;    // the flat-buffer layout of the parameters
  MegatronTrainState(std::shared_ptr<models::MegatronGPTModel> model,
                     std::shared_ptr<parallel::megatron::ParallelState> mpu,
                     const OptimizerOptions& options,
                     std::unique_ptr<Flat> flat);
  // What AdamW steps: the buckets' master ranges (distributed optimizer) or
  // one tensor per parameter.
  static std::vector<at::Tensor> BucketMasters(const Flat& f);

  // This rank's full (tp-local) AdamW moments per parameter, or empty
  // before the first step; `step` gets AdamW's step count.
  absl::StatusOr<std::vector<std::pair<at::Tensor, at::Tensor>>> LocalMoments(
      int64_t* step);
  // Installs this rank's full (tp-local) moments per parameter (empty:
  // clears the optimizer state); with the distributed optimizer, its dp
  // range of them.
  void SetLocalMoments(int64_t step, const std::vector<at::Tensor>& avg,
                       const std::vector<at::Tensor>& avg_sq);
  absl::StatusOr<double> StepOnDevice();
  // The fp32 master of every parameter, tp-local and full (the distributed
  // optimizer's ranges all-gathered over dp: collective).
  absl::StatusOr<std::vector<at::Tensor>> FullMasters();
  // Sets the fp32 masters from full (tp-local) fp32 tensors per parameter
  // (empty: from the parameters themselves).
  void SetMasters(const std::vector<at::Tensor>& full);
  // Moves the flagged buffers (params, grads, optimizer) to `to`.
  void Move(bool params, bool grads, bool optimizer,
            parallel::MemoryLocation to);

  std::shared_ptr<models::MegatronGPTModel> model_;
  std::shared_ptr<parallel::megatron::ParallelState> mpu_;
  std::unique_ptr<Flat> flat_;
  bool distributed_ = false;
  MegatronStateOptions state_options_;
  parallel::MemoryLocation param_location_ = parallel::MemoryLocation::kDevice;
  parallel::MemoryLocation grad_location_ = parallel::MemoryLocation::kDevice;
  parallel::MemoryLocation optimizer_location_ =
      parallel::MemoryLocation::kDevice;
  c10::Device device_ = c10::kCPU;  // where the parameters were built
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_MEGATRON_TRAIN_STATE_H_
