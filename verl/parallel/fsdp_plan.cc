// The sharding plan of //verl/parallel:fsdp (declared in fsdp.h): how a
// parameter splits into equal row shards (ShardLayout, ShardOf, Unshard), how
// parameters group into units (UnitsByLayer), and the process groups FSDP and
// HSDP communicate over (MakeFsdpGroups). fsdp.cc runs the collectives.
#include <ATen/core/Tensor.h>
#include <ATen/ops/cat.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "verl/parallel/device_mesh.h"
#include "verl/parallel/fsdp.h"
#include "verl/parallel/fsdp_rows.h"

namespace verl::parallel {

using fsdp_rows::FromShardRows;
using fsdp_rows::PaddedRows;

int64_t ShardLayout::ValidRows(int rank) const {
  const int64_t begin = rank * shard_rows;
  return std::max<int64_t>(0, std::min(shard_rows, dim0 - begin));
}

std::vector<int64_t> ShardLayout::ShardShape() const {
  std::vector<int64_t> shape = {shard_rows};
  for (size_t i = 1; i < full_shape.size(); ++i) shape.push_back(full_shape[i]);
  return shape;
}

ShardLayout MakeShardLayout(at::IntArrayRef shape, int world) {
  CHECK_GE(world, 1);
  ShardLayout l;
  l.full_shape = shape.vec();
  l.world = world;
  l.dim0 = shape.empty() ? 1 : shape[0];
  l.row_numel = 1;
  for (size_t i = 1; i < shape.size(); ++i) l.row_numel *= shape[i];
  l.shard_rows = (l.dim0 + world - 1) / world;
  return l;
}

at::Tensor ShardOf(const at::Tensor& full, const ShardLayout& l, int rank) {
  CHECK_EQ(full.numel(), l.full_numel());
  return PaddedRows(full, l)
      .narrow(0, rank * l.shard_rows, l.shard_rows)
      .reshape(l.ShardShape())
      .clone();
}

at::Tensor Unshard(const std::vector<at::Tensor>& shards,
                   const ShardLayout& l) {
  CHECK_EQ(static_cast<int>(shards.size()), l.world);
  std::vector<at::Tensor> flat;
  for (const at::Tensor& s : shards) flat.push_back(s.reshape(-1));
  return FromShardRows(at::cat(flat), l);
}

std::vector<FsdpUnitSpec> UnitsByLayer(const NamedTensors& params) {
  std::vector<FsdpUnitSpec> units;
  std::map<std::string, size_t> index;
  bool seen_layer = false;
  for (const auto& [name, tensor] : params) {
    std::string unit;
    const size_t pos = name.find("layers.");
    if (pos != std::string::npos && (pos == 0 || name[pos - 1] == '.')) {
      const size_t end = name.find('.', pos + 7);
      unit = name.substr(0, end);
      seen_layer = true;
    } else {
      unit = seen_layer ? "head" : "embed";
    }
    auto it = index.find(unit);
    if (it == index.end()) {
      it = index.emplace(unit, units.size()).first;
      units.push_back({unit, {}});
    }
    units[it->second].params.emplace_back(name, tensor);
  }
  return units;
}

namespace {

// Groups made by MakeFsdpGroups are named after a per-process call counter:
// every rank calls it in the same order, so names agree across ranks and
// differ between calls (actor and critic each get their own groups).
int NextGroupsId() {
  static std::atomic<int> next{0};
  return next++;
}

// A second group with the members of `comm`, for the background thread.
absl::StatusOr<std::shared_ptr<Communicator>> AsyncTwin(
    const std::shared_ptr<Communicator>& comm, const std::string& prefix) {
  if (!comm || comm->size() <= 1) return std::shared_ptr<Communicator>();
  std::vector<int> ranks(comm->size());
  std::iota(ranks.begin(), ranks.end(), 0);
  return comm->NewGroup(
      ranks,
      absl::StrCat(prefix, "_", absl::StrJoin(comm->global_ranks(), "_")));
}

}  // namespace

absl::StatusOr<FsdpGroups> MakeFsdpGroups(std::shared_ptr<Communicator> world,
                                          int64_t fsdp_size) {
  const int n = world->size();
  const std::string id = absl::StrCat("fsdp", NextGroupsId());
  FsdpGroups groups;
  if (fsdp_size <= 0 || fsdp_size >= n) {
    groups.shard = world;
  } else {
    if (n % fsdp_size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("fsdp_config.fsdp_size: ", fsdp_size,
                       " does not divide the world size ", n));
    }
    auto mesh =
        DeviceMesh::Create(world,
                           {{"replicate", static_cast<int>(n / fsdp_size)},
                            {"shard", static_cast<int>(fsdp_size)}},
                           absl::StrCat(id, "_hsdp_", fsdp_size));
    if (!mesh.ok()) return mesh.status();
    auto shard = mesh->Get("shard");
    if (!shard.ok()) return shard.status();
    auto replicate = mesh->Get("replicate");
    if (!replicate.ok()) return replicate.status();
    groups.shard = *shard;
    groups.replicate = *replicate;
  }
  // Shard twins first, then replicate twins: the same order on every rank.
  auto async_shard = AsyncTwin(groups.shard, id + "_async_shard");
  if (!async_shard.ok()) return async_shard.status();
  groups.async_shard = *async_shard;
  auto async_replicate = AsyncTwin(groups.replicate, id + "_async_replicate");
  if (!async_replicate.ok()) return async_replicate.status();
  groups.async_replicate = *async_replicate;
  return groups;
}

double FsdpCommStats::OverlapFraction() const {
  if (comm_seconds <= 0) return 0;
  return std::clamp(1.0 - wait_seconds / comm_seconds, 0.0, 1.0);
}

}  // namespace verl::parallel
