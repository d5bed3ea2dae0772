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
#ifndef VERL_PARALLEL_FSDP_H_
#define VERL_PARALLEL_FSDP_H_

#include <ATen/core/Tensor.h>

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
};

// fsdp_size <= 0 or >= world size: one shard group over the whole world.
// Otherwise hybrid: world = replicate x shard with shard = fsdp_size
// (consecutive ranks share a shard group, as torch's HSDP mesh does).
// Collective over `world`.
absl::StatusOr<FsdpGroups> MakeFsdpGroups(std::shared_ptr<Communicator> world,
                                          int64_t fsdp_size);

struct FsdpOptions {
  // Dtype of the gathered parameters used for compute (fsdp_config.dtype);
  // master shards and gradient reduction are always fp32.
  at::ScalarType compute_dtype = at::kFloat;
  // Shards (param_offload) / optimizer state (optimizer_offload) live in host
  // memory between uses. CPU builds run the same path; the flags only change
  // where Memory() accounts the bytes.
  bool param_offload = false;
  bool optimizer_offload = false;
};

// Bytes of live storage owned by this rank's FSDP state.
struct FsdpMemory {
  int64_t param_shard_bytes = 0;  // fp32 master shards
  int64_t grad_shard_bytes = 0;   // fp32 shard gradients
  int64_t gathered_bytes = 0;     // full parameters of gathered units
  int64_t full_grad_bytes = 0;    // full gradients not yet reduced
  int64_t host_bytes = 0;         // of the above, in host memory
  int64_t device_bytes = 0;       // of the above, on the compute device
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

  // All-gathers the unit's shards (one collective over a flat buffer in the
  // compute dtype) and points its parameters at the full tensors. No-op if
  // already gathered.
  absl::Status Gather(int unit);
  absl::Status GatherAll();
  // Frees the unit's full parameters (and any unreduced full gradients).
  void Reshard(int unit);
  void ReshardAll();

  // Reduce-scatters the unit's full gradients (fp32, one collective,
  // averaged over the shard group, then over the replicate group) and adds
  // them to the shard gradients; frees the full gradients. Trainable
  // parameters without a gradient contribute zeros; frozen ones
  // (requires_grad false at construction, e.g. LoRA base weights) are
  // gathered but never reduced or optimized.
  absl::Status ReduceGradients(int unit);
  absl::Status ReduceAllGradients();

  // Global L2 norm of the shard gradients: local squares all-reduced over
  // the shard group (replicas hold identical shards).
  absl::StatusOr<double> GradNorm();
  void ScaleGrads(double factor);
  // Zeroes shard gradients and any full gradients of gathered units.
  void ZeroGrad();

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
  // Bytes of collective buffers this rank took part in so far: the full
  // gathered buffer of an all-gather, the full input of a reduce-scatter,
  // the buffer of an all-reduce (ZeRO-3 expects ~3x the parameter bytes per
  // step: gather for forward, re-gather for backward, reduce-scatter).
  int64_t bytes_communicated() const { return bytes_communicated_; }

 private:
  struct Param;
  struct Unit;
  Unit& unit(int i);
  const Unit& unit(int i) const;

  std::vector<Unit> units_;
  FsdpGroups groups_;
  FsdpOptions options_;
  int64_t bytes_communicated_ = 0;
};

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_FSDP_H_
