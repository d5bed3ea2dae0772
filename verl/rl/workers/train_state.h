// File: verl/rl/workers/train_state.h
//
// The trainable state of one role's model (actor, critic, SFT): parameters,
// AdamW, gradient synchronisation over the data-parallel group, global
// grad-norm clipping with verl's non-finite skip, and the LR schedule
// stepped once per PPO step. `TrainState` is the seam where sharded training
// plugs in: `ReplicatedTrainState` keeps a full copy of the parameters on
// every rank and averages gradients with one all-reduce (DDP); an FSDP state
// (verl/parallel) shards parameters, gradients and optimizer state instead.
#ifndef VERL_RL_WORKERS_TRAIN_STATE_H_
#define VERL_RL_WORKERS_TRAIN_STATE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/fsdp_config.pb.h"
#include "verl/parallel/process_group.h"

namespace torch::optim {
class Optimizer;
}
namespace torch::nn {
class Module;
}

namespace verl::rl {

struct OptimizerOptions {
  double lr = 1e-6;
  double beta1 = 0.9, beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.01;
  double grad_clip =
      1.0;  // <= 0 disables clipping (the norm is still reported)
  // LR schedule (verl optim.*): warmup steps resolved, total steps known.
  std::string lr_scheduler_type = "constant";  // constant | cosine | wsd
  int64_t warmup_steps = 0;
  int64_t total_steps = 0;
  double min_lr_ratio = 0.0;
  double num_cycles = 0.5;
};

// Maps verl's optim.* block (plus the role's grad_clip) to OptimizerOptions;
// warmup = lr_warmup_steps if >= 0 else floor(ratio * total_steps).
absl::StatusOr<OptimizerOptions> OptimizerOptionsFromConfig(
    const parallel::OptimConfig &optim, double grad_clip, int64_t total_steps);

// One rank's part of a TrainState in verl's sharded-checkpoint layout (what
// model_/optim_world_size_{W}_rank_{R}.pt hold). Tensors are chunked along
// dim 0 over `shard_world` ranks as torch.chunk / FSDP2 split them: ceil(n/W)
// rows each, the last ranks fewer or none, no padding; 0-d tensors are whole.
struct TrainStateShard {
  int shard_rank = 0;   // this rank's chunk index
  int shard_world = 1;  // number of chunks (the shard group size)
  // Every parameter's HF name and full shape, in the state's order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  std::map<std::string, at::Tensor> model;  // name -> this rank's chunk
  // AdamW state: "<name>.exp_avg", "<name>.exp_avg_sq" (chunked like the
  // parameter) and "<name>.step" (int64 0-d). Parameters without state
  // (before their first step, frozen) have no entries.
  std::map<std::string, at::Tensor> optimizer;
  // The optimizer's parameters (HF names) in its order: the indices of the
  // optimizer file (torch's state_dict layout). Empty: the names of `shapes`.
  std::vector<std::string> optimizer_params;
  OptimizerOptions optimizer_options;  // AdamW's hyperparameters, base LR
  double lr = 0;                       // the LR in effect
  int64_t schedule_step = 0;
  int64_t skipped_steps = 0;
};

// What TrainState::LoadShard restores (verl's checkpoint.load_contents).
struct TrainStateLoadParts {
  bool model = true;
  bool optimizer = true;
  bool counters = true;  // schedule step (hence the LR) and skipped steps
};

using NamedParams = std::vector<std::pair<std::string, at::Tensor>>;
// The module's parameters with their (HF) names, in parameter order.
NamedParams NamedParameters(const torch::nn::Module &module);

class TrainState {
 public:
  virtual ~TrainState() = default;
  virtual void ZeroGrad() = 0;
  // Averages gradients over the data-parallel group, clips the global norm,
  // and steps the optimizer unless the norm is non-finite (then the grads are
  // zeroed and the step is skipped, as verl does). Returns the pre-clip norm.
  virtual absl::StatusOr<double> Step() = 0;
  // Advances the LR schedule by one PPO step; returns the LR used so far
  // (verl logs actor/lr before stepping the scheduler).
  virtual double StepSchedule() = 0;
  virtual double lr() const = 0;
  virtual int64_t skipped_steps() const = 0;
  virtual int64_t schedule_step() const = 0;
  virtual void set_schedule_step(int64_t step) = 0;
  virtual torch::optim::Optimizer &optimizer() = 0;

  // --- checkpoints ---
  // This rank's shard (copies; no communication).
  virtual absl::StatusOr<TrainStateShard> SaveShard() = 0;
  // Restores a shard saved with the same parameters and chunking; collective
  // over the data-parallel group. Errors name the parameter and rank.
  virtual absl::Status LoadShard(const TrainStateShard &shard,
                                 const TrainStateLoadParts &parts) = 0;
  // The full parameters (HF names, state order) on rank 0 of the group,
  // empty on the others; collective.
  virtual absl::StatusOr<NamedParams> FullStateDict() = 0;

  // --- Megatron's dist checkpoints (verl's <role>/dist_ckpt/ layout) ---
  // States that shard beyond dim-0 chunks (MegatronTrainState) save this
  // instead of the world-size files. Default: not supported.
  virtual bool UsesDistCheckpoint() const { return false; }
  // Writes this rank's file of `role_dir`/dist_ckpt/ (ckpt/dist_ckpt.h):
  // the model, the optimizer when parts.optimizer, the counters and `rng`
  // (this rank's generator states) when parts.counters; rank 0 also writes
  // role_dir/transformer_config.json. The caller finalizes the folder
  // (ckpt::FinalizeDistCkpt) on rank 0 once every rank succeeded.
  // PrepareDistCheckpoint does the collective part (e.g. gathering the
  // distributed optimizer's ranges) and returns the writer, which only
  // writes files: a rank that fails writing never leaves the others waiting
  // in a collective. SaveDistCheckpoint = prepare + write (collective).
  using DistCheckpointWriter =
      std::function<absl::Status(const std::string &role_dir)>;
  virtual absl::StatusOr<DistCheckpointWriter> PrepareDistCheckpoint(
      const TrainStateLoadParts &parts,
      const std::map<std::string, at::Tensor> &rng);
  absl::Status SaveDistCheckpoint(const std::string &role_dir,
                                  const TrainStateLoadParts &parts,
                                  const std::map<std::string, at::Tensor> &rng);
  // Restores `parts` from a finalized role_dir/dist_ckpt/ saved with any
  // parallel layout of the same model (resharding on load). Returns the RNG
  // states saved by this rank (by rank 0 when the checkpoint has fewer
  // ranks); empty without parts.counters. Collective.
  virtual absl::StatusOr<std::map<std::string, at::Tensor>> LoadDistCheckpoint(
      const std::string &role_dir, const TrainStateLoadParts &parts);
};

// What both built-in states share: AdamW over the trainable tensors, the LR
// schedule and step counters, verl's clip-or-skip step rule, and the
// optimizer's entries in a checkpoint shard.
class AdamWTrainState : public TrainState {
 public:
  ~AdamWTrainState() override;

  double StepSchedule() override;
  double lr() const override;
  int64_t skipped_steps() const override { return skipped_steps_; }
  int64_t schedule_step() const override { return schedule_step_; }
  void set_schedule_step(int64_t step) override;
  torch::optim::Optimizer &optimizer() override { return *optimizer_; }

 protected:
  // AdamW over `params`, at the schedule's LR for step 0.
  AdamWTrainState(const std::vector<at::Tensor> &params,
                  const OptimizerOptions &options);

  // Given the global gradient norm: not finite => ZeroGrad() and a skipped
  // step; else the gradients are scaled (`scale_grads(coef)`) down to
  // grad_clip when above it and AdamW steps. Returns `norm`.
  double ClipAndStep(double norm,
                     const std::function<void(double coef)> &scale_grads);

  // Writes `param`'s AdamW state as "<name>.exp_avg", "<name>.exp_avg_sq"
  // (each moment through `chunk`, this rank's rows) and "<name>.step";
  // nothing before its first step.
  void SaveAdamState(const std::string &name, const at::Tensor &param,
                     const std::function<at::Tensor(const at::Tensor &)> &chunk,
                     TrainStateShard *shard);
  // Restores `param`'s AdamW state from `shard` (cleared when the shard has
  // none); `local` turns a saved moment chunk (with its key) into the
  // moment this state holds.
  absl::Status LoadAdamState(
      const TrainStateShard &shard, const std::string &name,
      const at::Tensor &param,
      const std::function<absl::StatusOr<at::Tensor>(
          const std::string &key, const at::Tensor &chunk)> &local);
  // The schedule step, skipped steps and (saved only) the optimizer's
  // options and LR.
  void SaveCounters(TrainStateShard *shard) const;
  void LoadCounters(const TrainStateShard &shard);

  std::unique_ptr<torch::optim::Optimizer> optimizer_;

 private:
  void ApplyLr(double lr);

  OptimizerOptions options_;
  int64_t skipped_steps_ = 0;
  int64_t schedule_step_ = 0;
};

// `m[key]`, or InvalidArgument "checkpoint has no tensor <key>".
absl::StatusOr<at::Tensor> FindCheckpointTensor(
    const std::map<std::string, at::Tensor> &m, const std::string &key);

// Full parameter copy per rank; gradients averaged with one flat all-reduce.
class ReplicatedTrainState : public AdamWTrainState {
 public:
  ReplicatedTrainState(std::vector<at::Tensor> params,
                       const OptimizerOptions &options,
                       std::shared_ptr<parallel::Communicator> dp_group);
  // With HF names, which checkpoints need (the unnamed state cannot save).
  // Checkpoint chunks are over `checkpoint_group` (null: the dp group): a
  // state replicated beyond its dp group (FlowRL's log-Z head on every tp
  // rank under strategy=megatron) saves over the whole world, as FSDP does.
  ReplicatedTrainState(
      const NamedParams &params, const OptimizerOptions &options,
      std::shared_ptr<parallel::Communicator> dp_group,
      std::shared_ptr<parallel::Communicator> checkpoint_group = nullptr);
  ~ReplicatedTrainState() override;

  void ZeroGrad() override;
  absl::StatusOr<double> Step() override;

  // Chunks of the full parameters over the checkpoint group (rank r saves
  // chunk r); loading all-gathers the chunks back.
  absl::StatusOr<TrainStateShard> SaveShard() override;
  absl::Status LoadShard(const TrainStateShard &shard,
                         const TrainStateLoadParts &parts) override;
  absl::StatusOr<NamedParams> FullStateDict() override;

 private:
  std::vector<at::Tensor> params_;
  std::vector<std::string> names_;  // empty: built without names
  std::shared_ptr<parallel::Communicator> dp_group_;
  std::shared_ptr<parallel::Communicator> ckpt_group_;  // default dp_group_
};

// LR at scheduler step `step` (lr x the constant / cosine / wsd factor).
double ScheduledLr(const OptimizerOptions &options, int64_t step);

// Rows [begin, end) of dim 0 in chunk `rank` of `world` (torch.chunk).
std::pair<int64_t, int64_t> ChunkRows(int64_t rows, int rank, int world);

// Chunk `rank` of `world` of `full` along dim 0 (a contiguous copy, so a
// saved chunk holds only its own bytes); 0-d tensors whole.
at::Tensor ChunkOf(const at::Tensor &full, int rank, int world);
// The full tensor of `shape` from every rank's ChunkOf chunk (collective
// over `group`; null: one rank). A chunk of the wrong shape is
// InvalidArgument naming `name` and the rank.
absl::StatusOr<at::Tensor> GatherChunks(parallel::Communicator *group,
                                        const std::string &name,
                                        const at::Tensor &chunk,
                                        at::IntArrayRef shape);

// AdamW's per-parameter state, for checkpoints.
struct AdamMoments {
  int64_t step = 0;
  at::Tensor exp_avg, exp_avg_sq;
};
// The state of `param` in `optimizer` (an AdamW), nullopt before its first
// step. The tensors are the optimizer's own (not copies).
std::optional<AdamMoments> GetAdamState(torch::optim::Optimizer &optimizer,
                                        const at::Tensor &param);
// Replaces (nullopt: removes) the state of `param`.
void SetAdamState(torch::optim::Optimizer &optimizer, const at::Tensor &param,
                  const std::optional<AdamMoments> &moments);

// L2 norm of all gradients (undefined grads count as zero).
double GlobalGradNorm(const std::vector<at::Tensor> &params);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_TRAIN_STATE_H_
