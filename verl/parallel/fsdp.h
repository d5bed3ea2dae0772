// File: verl/parallel/fsdp.h
//
// Fully sharded data parallelism (FSDP2 / ZeRO-3 semantics) over c10d
// collectives, generic over parameter tensors (no model dependency).
//
// Parameters are grouped into wrap units (one per decoder layer plus
// embeddings / head: verl's wrap_policy). Every parameter is sharded along
// dim 0 over the shard group, padded with zero rows to a multiple of the
// group size, so a rank's shard is exactly what a sharded checkpoint stores.
// Each rank keeps only its fp32 master shards (plus their fp32 gradients);
// the full parameters exist only while a unit is gathered:
//
//   FsdpModule fsdp(units, groups, options);    // shards, frees full params
//   VERL_RETURN_IF_ERROR(fsdp.Gather(u));       // one all-gather per unit
//   ... forward / backward through the model's parameters ...
//   VERL_RETURN_IF_ERROR(fsdp.ReduceGradients(u));  // reduce-scatter (avg)
//   fsdp.Reshard(u);                            // frees the full params
//
// Gather re-points the model's parameter tensors (set_data) at the gathered
// full tensors in the compute dtype, so the model's own code runs unchanged;
// Reshard points them at empty tensors. Hybrid sharding (fsdp_size < world)
// shards within `groups.shard` and averages gradients across
// `groups.replicate` with one all-reduce.
//
// ZeRO-3 during compute: PreForward / PostForward / PreBackward /
// PostBackward implement FSDP's per-unit schedule for a model's layer hooks
// (verl/models LayerHooks): a unit is gathered just before its forward,
// freed after it (reshard_after_forward: the storage is released but the
// tensors keep their shapes, so what autograd saved sees the data again
// once PreBackward re-gathers), and its gradients are reduce-scattered as
// soon as its backward is done. With `groups.async_shard` the all-gathers
// and reduce-scatters run on a background thread over that dedicated group,
// so the next unit's gather (forward_prefetch / backward prefetch) and the
// previous unit's reduce-scatter overlap with compute.
#ifndef VERL_PARALLEL_FSDP_H_
#define VERL_PARALLEL_FSDP_H_

#include <ATen/core/Tensor.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel {

// Where one parameter's rows live: dim 0 split into `world` shards of
// `shard_rows` rows each (the last ones zero-padded). 0-d tensors are
// treated as shape [1].
struct ShardLayout {
  std::vector<int64_t> full_shape;
  int world = 1;
  int64_t dim0 = 1;        // rows of the full parameter
  int64_t row_numel = 1;   // elements per row (product of dims 1..)
  int64_t shard_rows = 1;  // ceil(dim0 / world)

  int64_t shard_numel() const { return shard_rows * row_numel; }
  int64_t padded_rows() const { return shard_rows * world; }
  int64_t full_numel() const { return dim0 * row_numel; }
  // Rows of real (non-padding) data in `rank`'s shard.
  int64_t ValidRows(int rank) const;
  // The shard's shape: [shard_rows, dims 1..].
  std::vector<int64_t> ShardShape() const;
};

ShardLayout MakeShardLayout(at::IntArrayRef shape, int world);

// Rank `rank`'s shard of `full` (zero-padded, contiguous, same dtype).
at::Tensor ShardOf(const at::Tensor& full, const ShardLayout& layout, int rank);
// Inverse: the full tensor from all ranks' shards, in rank order.
at::Tensor Unshard(const std::vector<at::Tensor>& shards,
                   const ShardLayout& layout);

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// One wrap unit: its name and its parameters (HF names, the model's own
// parameter tensors, full and identical on every rank at construction).
struct FsdpUnitSpec {
  std::string name;
  NamedTensors params;
};

// Groups HF-named parameters into units: "embed" (everything before the
// first "layers.<i>." parameter), one "layers.<i>" unit per decoder layer,
// and "head" (the rest: final norm, lm_head, score). Order is preserved.
std::vector<FsdpUnitSpec> UnitsByLayer(const NamedTensors& params);

struct FsdpGroups {
  std::shared_ptr<Communicator> shard;      // parameters sharded over this
  std::shared_ptr<Communicator> replicate;  // null or size 1: pure FSDP
  // Same members as shard / replicate, used only by FSDP's background
  // communication thread (null: collectives run inline on the caller).
  std::shared_ptr<Communicator> async_shard;
  std::shared_ptr<Communicator> async_replicate;
};

// fsdp_size <= 0 or >= world size: one shard group over the whole world.
// Otherwise hybrid: world = replicate x shard with shard = fsdp_size
// (consecutive ranks share a shard group, as torch's HSDP mesh does).
// With more than one rank, also creates the async groups. Collective over
// `world`; every call creates new groups (unique names per call).
absl::StatusOr<FsdpGroups> MakeFsdpGroups(std::shared_ptr<Communicator> world,
                                          int64_t fsdp_size);

// Where a buffer lives: on the compute device, or in host memory (pinned
// when the device is CUDA). On CPU builds both are CPU memory; offloading
// there copies into separate host buffers, so the same code path runs.
enum class MemoryLocation { kDevice, kHost };
const char* MemoryLocationName(MemoryLocation where);

// A copy of `t` in host memory (pinned if `t` is on a CUDA device) / on
// `device` (always a fresh buffer, also when `t` is already there).
at::Tensor HostCopy(const at::Tensor& t);
at::Tensor DeviceCopy(const at::Tensor& t, c10::Device device);

struct FsdpOptions {
  // Dtype of the gathered parameters used for compute (fsdp_config.dtype);
  // master shards and gradient reduction are always fp32.
  at::ScalarType compute_dtype = at::kFloat;
  // The compute device: gathered parameters and full gradients live there.
  c10::Device device = c10::kCPU;
  // Shards (param_offload) / optimizer state (optimizer_offload) live in host
  // memory between uses (param_offload: the shards start there); the train
  // state moves them (MoveShards) to the device for the optimizer step and
  // back after it.
  bool param_offload = false;
  bool optimizer_offload = false;
  // Per-unit schedule (PreForward ... PostBackward): free a unit after its
  // forward (false: keep it until its backward, ZeRO-2 style), prefetch the
  // next unit's all-gather in forward / the previous one's in backward.
  bool reshard_after_forward = true;
  bool forward_prefetch = false;
  bool backward_prefetch = true;
};

// Communication timing: `comm_seconds` of collectives (on the background
// thread when async), `wait_seconds` the caller spent blocked on them; the
// difference ran while the caller computed.
struct FsdpCommStats {
  int64_t collectives = 0;
  double comm_seconds = 0;
  double wait_seconds = 0;
  // 1 - wait / comm, clamped to [0, 1] (0 without communication).
  double OverlapFraction() const;
};

// Bytes of live storage owned by this rank's FSDP state.
struct FsdpMemory {
  int64_t param_shard_bytes = 0;  // fp32 master shards
  int64_t grad_shard_bytes = 0;   // fp32 shard gradients
  int64_t gathered_bytes = 0;     // full parameters of gathered units
  int64_t full_grad_bytes = 0;    // full gradients not yet reduced
  // Most full-parameter bytes live at once (gathered units plus prefetch
  // buffers) since construction / ResetPeak().
  int64_t peak_gathered_bytes = 0;
  // Of the above (peak excluded), by where the buffers are: shards and shard
  // gradients where MoveShards last put them, full tensors on the device.
  int64_t host_bytes = 0;
  int64_t device_bytes = 0;
};

// One entry of a sharded state dict (a rank's part of one parameter).
struct ShardedTensor {
  std::string name;
  ShardLayout layout;
  int rank = 0;      // shard index within the shard group
  at::Tensor shard;  // [shard_rows, ...] fp32, zero-padded
};

class FsdpModule {
 public:
  // Shards every unit's parameters and frees the full copies (the params
  // are left resharded). CHECKs that groups.shard is set.
  FsdpModule(std::vector<FsdpUnitSpec> units, FsdpGroups groups,
             FsdpOptions options);
  ~FsdpModule();
  FsdpModule(const FsdpModule&) = delete;
  FsdpModule& operator=(const FsdpModule&) = delete;

  int num_units() const;
  const std::string& unit_name(int unit) const;
  bool gathered(int unit) const;
  const FsdpGroups& groups() const { return groups_; }
  const FsdpOptions& options() const { return options_; }

  // All-gathers the unit's shards (one collective over a flat buffer in the
  // compute dtype) and points its parameters at the full tensors. No-op if
  // already gathered; waits for a prefetch in flight.
  absl::Status Gather(int unit);
  absl::Status GatherAll();
  // Starts the unit's all-gather on the background thread (no-op without
  // async groups, or if gathered / already in flight).
  void Prefetch(int unit);
  // Frees the unit's full parameters (and any unreduced full gradients).
  void Reshard(int unit);
  void ReshardAll();
  // Releases the unit's full-parameter storage but keeps the tensors'
  // shapes (and identity), so tensors autograd saved in forward see the
  // values again after the next Gather(). Gathered units only.
  void FreeStorage(int unit);

  // FSDP's schedule around one unit's compute (see the file comment).
  // PreForward marks the unit for gradient reduction when grad mode is on
  // and prefetches `next` (forward_prefetch; -1: none). PostForward frees
  // the storage (grad mode on and reshard_after_forward), keeps the unit
  // (grad mode on, no reshard) or reshards it (no grad). PreBackward
  // re-gathers it and prefetches `prev` (backward_prefetch). PostBackward
  // starts its reduce-scatter and reshards it.
  absl::Status PreForward(int unit, int next = -1);
  void PostForward(int unit);
  absl::Status PreBackward(int unit, int prev = -1);
  absl::Status PostBackward(int unit);
  // Reduces every unit marked by PreForward and not reduced since (e.g.
  // the embeddings / head, which stay gathered through backward), then
  // waits for all reduce-scatters in flight.
  absl::Status ReduceMarkedGradients();
  // Whether PreForward marked the unit and its gradients were not reduced
  // since.
  bool marked_for_reduce(int unit) const;

  // Reduce-scatters the unit's full gradients (fp32, one collective,
  // averaged over the shard group, then over the replicate group) and adds
  // them to the shard gradients; frees the full gradients. Trainable
  // parameters without a gradient contribute zeros; frozen ones
  // (requires_grad false at construction, e.g. LoRA base weights) are
  // gathered but never reduced or optimized.
  absl::Status ReduceGradients(int unit);
  absl::Status ReduceAllGradients();
  // Like ReduceGradients, but the collective and the accumulation into the
  // shard gradients run on the background thread (inline without async
  // groups); the unit's full gradients are taken at once.
  absl::Status StartReduceGradients(int unit);
  // Waits for every background collective; the first error, sticky.
  absl::Status WaitPending();

  // Global L2 norm of the shard gradients: local squares all-reduced over
  // the shard group (replicas hold identical shards).
  absl::StatusOr<double> GradNorm();
  void ScaleGrads(double factor);
  // Zeroes shard gradients and any full gradients of gathered units.
  void ZeroGrad();

  // Moves every master shard and shard gradient to `to` (param_offload).
  // The shard tensors keep their identity, so the optimizer's references
  // and state stay valid; only their storage moves. Waits for background
  // collectives first. Gathers read host shards straight into the
  // all-gather's device buffer and reduce-scatters accumulate into host
  // gradients, so shards can stay on the host through forward/backward.
  absl::Status MoveShards(MemoryLocation to);
  MemoryLocation shard_location() const { return shard_location_; }
  // Bytes MoveShards copied so far (either direction).
  int64_t offload_bytes_moved() const { return offload_bytes_moved_; }

  // The trainable fp32 master shards (leaf tensors whose grad() is the
  // shard gradient), for the optimizer.
  std::vector<at::Tensor> shard_params() const;

  // The full fp32 state dict (HF names, unit order), gathered unit by unit;
  // returned on `root` of the shard group, empty on the other ranks.
  absl::StatusOr<NamedTensors> FullStateDict(int root = 0);
  // Hybrid-engine weight sync: for each unit in order, gathers it (compute
  // dtype), calls `fn(unit name, its full parameters)` on every rank, and
  // reshards it again unless it was gathered before, so at most one extra
  // unit is ever materialised. Stops at the first error from `fn`.
  absl::Status ForEachGatheredUnit(
      const std::function<absl::Status(const std::string&,
                                       const NamedTensors&)>& fn);
  // This rank's shards with their layouts (clones).
  std::vector<ShardedTensor> ShardedStateDict() const;
  // Loads shards saved by a run with the same layout; InvalidArgument
  // naming the parameter on a missing name or a layout mismatch.
  absl::Status LoadShardedStateDict(const std::vector<ShardedTensor>& shards);

  FsdpMemory Memory() const;
  void ResetPeak();
  FsdpCommStats comm_stats() const;
  // Bytes of collective buffers this rank took part in so far: the full
  // gathered buffer of an all-gather, the full input of a reduce-scatter,
  // the buffer of an all-reduce (ZeRO-3 expects ~3x the parameter bytes per
  // step: gather for forward, re-gather for backward, reduce-scatter).
  int64_t bytes_communicated() const;

 private:
  struct Param;
  struct Unit;
  class CommQueue;
  struct Task;
  Unit& unit(int i);
  const Unit& unit(int i) const;
  // Fills the unit's parameters from gathered [world, shard_numel] rows.
  void Materialize(Unit& u, const at::Tensor& rows);
  // Prepares the flat fp32 full gradients of `u` (clearing them); empty
  // when the unit has no trainable parameters.
  at::Tensor TakeFlatGrads(Unit& u);
  // Reduce-scatters `flat` over the given groups into `u`'s shard grads.
  absl::Status ReduceInto(Unit& u, const at::Tensor& flat, Communicator& shard,
                          Communicator* replicate);
  void AddLive(int64_t bytes);
  absl::Status Sticky(absl::Status s);

  std::vector<Unit> units_;
  FsdpGroups groups_;
  FsdpOptions options_;
  std::unique_ptr<CommQueue> queue_;  // null: inline collectives
  std::vector<std::shared_ptr<Task>> pending_reduces_;
  absl::Status first_error_;
  MemoryLocation shard_location_ = MemoryLocation::kDevice;
  int64_t offload_bytes_moved_ = 0;
  int64_t live_gathered_bytes_ = 0;
  int64_t peak_gathered_bytes_ = 0;
  // Inline collectives' timing (the queue keeps its own).
  FsdpCommStats inline_stats_;
  double wait_seconds_ = 0;
  std::atomic<int64_t> bytes_communicated_{0};
};

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_FSDP_H_
