// File: verl/parallel/megatron/parallel_state.cc
#include "verl/parallel/megatron/parallel_state.h"

#include <glog/logging.h>

#include <algorithm>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::parallel::megatron {
namespace {

constexpr int kNumGroups = static_cast<int>(MpuGroup::kEdp) + 1;

// Which grid a group lives on and the dims it spans (major to minor).
struct GroupSpec {
  bool expert;
  std::vector<std::string> dims;
  const char* name;
};

GroupSpec Spec(MpuGroup group) {
  switch (group) {
    case MpuGroup::kTp:
      return {false, {"tp"}, "tp"};
    case MpuGroup::kPp:
      return {false, {"pp"}, "pp"};
    case MpuGroup::kDp:
      return {false, {"dp"}, "dp"};
    case MpuGroup::kCp:
      return {false, {"cp"}, "cp"};
    case MpuGroup::kTpCp:
      return {false, {"cp", "tp"}, "tp_cp"};
    case MpuGroup::kDpCp:
      return {false, {"dp", "cp"}, "dp_cp"};
    case MpuGroup::kMp:
      return {false, {"pp", "tp"}, "mp"};
    case MpuGroup::kEtp:
      return {true, {"etp"}, "etp"};
    case MpuGroup::kEp:
      return {true, {"ep"}, "ep"};
    case MpuGroup::kEtpEp:
      return {true, {"ep", "etp"}, "etp_ep"};
    case MpuGroup::kEdp:
      return {true, {"edp"}, "edp"};
  }
  LOG(FATAL) << "unknown MpuGroup " << static_cast<int>(group);
  return {};
}

absl::Status Invalid(const std::string& key, int value,
                     const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat("megatron.", key, "=", value, ": ", why));
}

}  // namespace

const char* MpuGroupName(MpuGroup group) { return Spec(group).name; }

absl::StatusOr<MegatronLayout> MegatronLayout::Create(int world_size,
                                                      ModelParallelSizes s) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("world size ", world_size, " must be >= 1"));
  }
  const std::pair<const char*, int> checks[] = {
      {"tensor_model_parallel_size", s.tp},
      {"pipeline_model_parallel_size", s.pp},
      {"context_parallel_size", s.cp},
      {"expert_model_parallel_size", s.ep}};
  for (const auto& [key, value] : checks) {
    if (value < 1) return Invalid(key, value, "must be >= 1");
  }
  if (s.etp < 0) {
    return Invalid("expert_tensor_parallel_size", s.etp,
                   "must be >= 1 (or unset)");
  }
  if (s.vpp < 0 || (s.vpp > 1 && s.pp == 1)) {
    return Invalid("virtual_pipeline_model_parallel_size", s.vpp,
                   "needs pipeline_model_parallel_size > 1 (Megatron's "
                   "interleaved schedule)");
  }
  if (s.etp == 0) s.etp = s.tp;
  const int model = s.tp * s.pp * s.cp;
  if (world_size % model != 0) {
    return Invalid("tensor_model_parallel_size", s.tp,
                   absl::StrCat("world size ", world_size,
                                " is not divisible by tp*pp*cp = ", s.tp, "*",
                                s.pp, "*", s.cp, " = ", model));
  }
  const int expert = s.etp * s.ep * s.pp;
  if (world_size % expert != 0) {
    // Name etp when ep alone fits the world.
    const bool etp_breaks = world_size % (s.ep * s.pp) == 0;
    return Invalid(etp_breaks ? "expert_tensor_parallel_size"
                              : "expert_model_parallel_size",
                   etp_breaks ? s.etp : s.ep,
                   absl::StrCat("world size ", world_size,
                                " is not divisible by etp*ep*pp = ", s.etp, "*",
                                s.ep, "*", s.pp, " = ", expert));
  }
  MegatronLayout layout;
  layout.world_ = world_size;
  layout.sizes_ = s;
  layout.dp_ = world_size / model;
  layout.edp_ = world_size / expert;
  layout.dense_ = {
      {"pp", s.pp}, {"dp", layout.dp_}, {"cp", s.cp}, {"tp", s.tp}};
  layout.expert_ = {
      {"pp", s.pp}, {"edp", layout.edp_}, {"ep", s.ep}, {"etp", s.etp}};
  return layout;
}

std::vector<int> MegatronLayout::GroupRanks(MpuGroup group, int rank) const {
  const GroupSpec spec = Spec(group);
  absl::StatusOr<std::vector<int>> ranks =
      MeshGroupRanks(spec.expert ? expert_ : dense_, spec.dims, rank);
  VERL_CHECK_OK(ranks.status());
  return *std::move(ranks);
}

std::vector<std::vector<int>> MegatronLayout::AllGroups(MpuGroup group) const {
  std::set<std::vector<int>> groups;
  for (int r = 0; r < world_; ++r) groups.insert(GroupRanks(group, r));
  std::vector<std::vector<int>> out(groups.begin(), groups.end());
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a[0] < b[0]; });
  return out;
}

int MegatronLayout::Coordinate(const std::string& dim, int rank) const {
  for (const MeshDims* dims : {&dense_, &expert_}) {
    for (size_t i = 0; i < dims->size(); ++i) {
      if ((*dims)[i].first == dim) return MeshCoordinates(*dims, rank)[i];
    }
  }
  LOG(FATAL) << "no megatron dim '" << dim << "'";
  return -1;
}

absl::StatusOr<std::shared_ptr<ParallelState>> ParallelState::Initialize(
    std::shared_ptr<Communicator> world, ModelParallelSizes sizes,
    const std::string& name) {
  CHECK(world != nullptr);
  VERL_ASSIGN_OR_RETURN(MegatronLayout layout,
                        MegatronLayout::Create(world->size(), sizes));
  std::shared_ptr<ParallelState> state(new ParallelState());
  state->layout_ = layout;
  state->world_ = world;
  state->groups_.resize(kNumGroups);
  // One mesh per grid; its per-dim groups, then the flattened ones, in the
  // same order on every rank.
  VERL_ASSIGN_OR_RETURN(
      DeviceMesh dense,
      DeviceMesh::Create(world, layout.dense_dims(), absl::StrCat(name, "_d")));
  VERL_ASSIGN_OR_RETURN(DeviceMesh expert,
                        DeviceMesh::Create(world, layout.expert_dims(),
                                           absl::StrCat(name, "_e")));
  for (int g = 0; g < kNumGroups; ++g) {
    const GroupSpec spec = Spec(static_cast<MpuGroup>(g));
    DeviceMesh& mesh = spec.expert ? expert : dense;
    if (spec.dims.size() == 1) {
      VERL_ASSIGN_OR_RETURN(state->groups_[g], mesh.Get(spec.dims[0]));
    } else {
      VERL_ASSIGN_OR_RETURN(state->groups_[g],
                            mesh.Flatten(spec.dims, spec.name));
    }
    std::vector<int> expected;
    for (int r : layout.GroupRanks(static_cast<MpuGroup>(g), world->rank())) {
      expected.push_back(world->global_ranks()[r]);
    }
    CHECK(state->groups_[g]->global_ranks() == expected) << spec.name;
  }
  const std::shared_ptr<Communicator>& pp = state->group(MpuGroup::kPp);
  if (pp->size() <= 2) {
    state->embedding_ = pp;
  } else if (pp->rank() == 0 || pp->rank() == pp->size() - 1) {
    VERL_ASSIGN_OR_RETURN(
        state->embedding_,
        pp->NewGroup({0, pp->size() - 1},
                     absl::StrCat(name, "_emb_", pp->global_ranks()[0])));
  }
  return state;
}

const std::shared_ptr<Communicator>& ParallelState::group(MpuGroup g) const {
  return groups_[static_cast<int>(g)];
}

}  // namespace verl::parallel::megatron
