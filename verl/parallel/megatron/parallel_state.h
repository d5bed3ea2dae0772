// File: verl/parallel/megatron/parallel_state.h
//
// Megatron-LM's model-parallel state (`megatron.core.parallel_state`,
// "mpu") on the project's c10d communicators: the world is arranged as
// Megatron's default order "tp-cp-ep-dp-pp", i.e. tensor parallel fastest,
// then context, data, pipeline:
//
//   global_rank = ((pp * dp_size + dp) * cp_size + cp) * tp_size + tp
//
// (world 8, tp 2, pp 2: tp groups {0,1} {2,3} {4,5} {6,7}, dp groups
// {0,2} {1,3} {4,6} {5,7}, pp groups {0,4} {1,5} {2,6} {3,7}). Expert
// layers use their own grid "etp-ep-edp-pp" over the same world, with
// edp = world / (etp * ep * pp) (shape reserved for the MoE issue).
//
//   ModelParallelSizes sizes;
//   sizes.tp = 2;
//   VERL_ASSIGN_OR_RETURN(auto mpu, ParallelState::Initialize(world, sizes));
//   mpu->tp()->AllReduce(partial_sum);
//
// The layout arithmetic is pure (MegatronLayout) so it is unit-tested
// without processes; Initialize() builds the groups (collective over world).
#ifndef VERL_PARALLEL_MEGATRON_PARALLEL_STATE_H_
#define VERL_PARALLEL_MEGATRON_PARALLEL_STATE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/device_mesh.h"
#include "verl/parallel/process_group.h"

namespace verl::parallel::megatron {

// initialize_model_parallel's sizes (verl's actor.megatron.* keys).
struct ModelParallelSizes {
  int tp = 1;   // tensor_model_parallel_size
  int pp = 1;   // pipeline_model_parallel_size
  int vpp = 0;  // virtual_pipeline_model_parallel_size (0: none)
  int cp = 1;   // context_parallel_size
  int ep = 1;   // expert_model_parallel_size
  int etp = 0;  // expert_tensor_parallel_size (0: = tp, Megatron's None)
};

// The groups Megatron builds, named as its get_*_group() accessors.
enum class MpuGroup {
  kTp,     // tensor model parallel
  kPp,     // pipeline model parallel
  kDp,     // data parallel (without cp)
  kCp,     // context parallel
  kTpCp,   // tensor x context (Megatron "tp-cp")
  kDpCp,   // data x context (with_context_parallel=True)
  kMp,     // model parallel: tensor x pipeline ("tp-pp")
  kEtp,    // expert tensor parallel
  kEp,     // expert model parallel
  kEtpEp,  // expert tensor x expert model ("tp-ep")
  kEdp,    // expert data parallel
};
const char* MpuGroupName(MpuGroup group);

// Rank arithmetic of one world under Megatron's orders (pure, no processes).
class MegatronLayout {
 public:
  // InvalidArgument (one line naming the key) when a size is < 1, world is
  // not divisible by tp*pp*cp or by etp*ep*pp, or vpp is set with pp == 1.
  static absl::StatusOr<MegatronLayout> Create(int world_size,
                                               ModelParallelSizes sizes);

  int world_size() const { return world_; }
  const ModelParallelSizes& sizes() const { return sizes_; }  // etp resolved
  int dp() const { return dp_; }    // world / (tp * pp * cp)
  int edp() const { return edp_; }  // world / (etp * ep * pp)

  // Dense grid {pp, dp, cp, tp} and expert grid {pp, edp, ep, etp}, major
  // to minor (DeviceMesh order).
  const MeshDims& dense_dims() const { return dense_; }
  const MeshDims& expert_dims() const { return expert_; }

  // Global ranks of `group` that contain `rank`, ascending (Megatron's
  // in-group order).
  std::vector<int> GroupRanks(MpuGroup group, int rank) const;
  // Every group of that kind, ordered by smallest member.
  std::vector<std::vector<int>> AllGroups(MpuGroup group) const;

  // This rank's coordinate along "tp", "cp", "dp", "pp" (dense grid) or
  // "etp", "ep", "edp" (expert grid).
  int Coordinate(const std::string& dim, int rank) const;

 private:
  int world_ = 1, dp_ = 1, edp_ = 1;
  ModelParallelSizes sizes_;
  MeshDims dense_, expert_;
};

// The built groups of this rank (Megatron's module-level globals, held by
// value: several models with different layouts can coexist in a job).
class ParallelState {
 public:
  // Collective over `world`: every rank calls it with the same sizes.
  // `name` keys the rendezvous of the groups (distinct per call in a job).
  static absl::StatusOr<std::shared_ptr<ParallelState>> Initialize(
      std::shared_ptr<Communicator> world, ModelParallelSizes sizes,
      const std::string& name = "mpu");

  const MegatronLayout& layout() const { return layout_; }
  // The communicator of `group` containing this rank (its rank() is this
  // rank's index in the group).
  const std::shared_ptr<Communicator>& group(MpuGroup group) const;
  const std::shared_ptr<Communicator>& tp() const {
    return group(MpuGroup::kTp);
  }
  const std::shared_ptr<Communicator>& dp() const {
    return group(MpuGroup::kDp);
  }
  const std::shared_ptr<Communicator>& world() const { return world_; }
  // Megatron's embedding group: the first and last pipeline stage of this
  // rank's pp group (the pp group itself for pp <= 2), over which the tied
  // embedding's two copies sum their gradients; null on middle stages.
  const std::shared_ptr<Communicator>& embedding() const { return embedding_; }

  int tp_rank() const { return tp()->rank(); }
  int tp_size() const { return tp()->size(); }
  int pp_rank() const { return group(MpuGroup::kPp)->rank(); }
  int dp_rank() const { return dp()->rank(); }
  int cp_rank() const { return group(MpuGroup::kCp)->rank(); }
  int pp_size() const { return group(MpuGroup::kPp)->size(); }

 private:
  ParallelState() = default;
  MegatronLayout layout_;
  std::shared_ptr<Communicator> world_;
  std::vector<std::shared_ptr<Communicator>> groups_;  // by MpuGroup
  std::shared_ptr<Communicator> embedding_;
};

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_PARALLEL_STATE_H_
