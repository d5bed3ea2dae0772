#include "verl/parallel/fsdp.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/parallel/device_mesh.h"

namespace verl::parallel {

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

namespace {

// `t` as [dim0, row_numel] rows.
at::Tensor AsRows(const at::Tensor& t, const ShardLayout& l) {
  return t.reshape({l.dim0, l.row_numel});
}

// `t` as [padded_rows, row_numel], zero rows appended.
at::Tensor PaddedRows(const at::Tensor& t, const ShardLayout& l) {
  at::Tensor rows = AsRows(t, l);
  if (l.padded_rows() == l.dim0) return rows;
  return at::constant_pad_nd(rows, {0, 0, 0, l.padded_rows() - l.dim0});
}

// Full tensor from the [world, shard_numel] concatenation of shards.
at::Tensor FromShardRows(const at::Tensor& per_rank, const ShardLayout& l) {
  return per_rank.reshape({l.padded_rows(), l.row_numel})
      .narrow(0, 0, l.dim0)
      .reshape(l.full_shape)
      .contiguous();
}

int64_t Bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace

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

absl::StatusOr<FsdpGroups> MakeFsdpGroups(std::shared_ptr<Communicator> world,
                                          int64_t fsdp_size) {
  const int n = world->size();
  if (fsdp_size <= 0 || fsdp_size >= n) return FsdpGroups{world, nullptr};
  if (n % fsdp_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("fsdp_config.fsdp_size: ", fsdp_size,
                     " does not divide the world size ", n));
  }
  auto mesh =
      DeviceMesh::Create(world,
                         {{"replicate", static_cast<int>(n / fsdp_size)},
                          {"shard", static_cast<int>(fsdp_size)}},
                         absl::StrCat("fsdp_hsdp_", fsdp_size));
  if (!mesh.ok()) return mesh.status();
  auto shard = mesh->Get("shard");
  if (!shard.ok()) return shard.status();
  auto replicate = mesh->Get("replicate");
  if (!replicate.ok()) return replicate.status();
  return FsdpGroups{*shard, *replicate};
}

struct FsdpModule::Param {
  std::string name;
  at::Tensor param;  // the model's tensor (re-pointed by Gather/Reshard)
  ShardLayout layout;
  at::Tensor shard;  // fp32 master shard; a leaf requiring grad if trainable
  bool trainable = true;  // the model's parameter requires grad
};

struct FsdpModule::Unit {
  std::string name;
  std::vector<Param> params;
  int64_t shard_numel = 0;  // sum of the params' shard_numel
  int64_t grad_numel = 0;   // the same over trainable params
  bool gathered = false;
};

FsdpModule::FsdpModule(std::vector<FsdpUnitSpec> units, FsdpGroups groups,
                       FsdpOptions options)
    : groups_(std::move(groups)), options_(options) {
  CHECK(groups_.shard != nullptr) << "FSDP needs a shard group";
  const int world = groups_.shard->size();
  const int rank = groups_.shard->rank();
  for (FsdpUnitSpec& spec : units) {
    Unit u;
    u.name = spec.name;
    for (auto& [name, tensor] : spec.params) {
      Param p;
      p.name = name;
      p.param = tensor;
      p.layout = MakeShardLayout(tensor.sizes(), world);
      p.shard = ShardOf(tensor.detach().to(at::kFloat), p.layout, rank);
      p.trainable = tensor.requires_grad();
      p.shard.set_requires_grad(p.trainable);
      u.shard_numel += p.layout.shard_numel();
      if (p.trainable) u.grad_numel += p.layout.shard_numel();
      u.params.push_back(std::move(p));
    }
    units_.push_back(std::move(u));
  }
  ReshardAll();
}

FsdpModule::~FsdpModule() = default;

int FsdpModule::num_units() const { return static_cast<int>(units_.size()); }

FsdpModule::Unit& FsdpModule::unit(int i) {
  CHECK(i >= 0 && i < num_units()) << "FSDP unit " << i;
  return units_[i];
}
const FsdpModule::Unit& FsdpModule::unit(int i) const {
  CHECK(i >= 0 && i < num_units()) << "FSDP unit " << i;
  return units_[i];
}

const std::string& FsdpModule::unit_name(int i) const { return unit(i).name; }
bool FsdpModule::gathered(int i) const { return unit(i).gathered; }

namespace {

// All-gathers the flat concatenation of `u`'s shards in `dtype` and returns
// [world, shard_numel] rows (one per rank).
absl::StatusOr<at::Tensor> GatherFlat(Communicator& group,
                                      const std::vector<at::Tensor>& shards,
                                      int64_t shard_numel, at::ScalarType dtype,
                                      int64_t* bytes) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& s : shards) flat.push_back(s.detach().reshape(-1));
  at::Tensor local = at::cat(flat).to(dtype);
  *bytes += Bytes(local) * group.size();
  auto all = group.AllGatherCat(local);
  if (!all.ok()) return all.status();
  return all->view({group.size(), shard_numel});
}

}  // namespace

absl::Status FsdpModule::Gather(int i) {
  Unit& u = unit(i);
  if (u.gathered) return absl::OkStatus();
  std::vector<at::Tensor> shards;
  for (const Param& p : u.params) shards.push_back(p.shard);
  auto rows = GatherFlat(*groups_.shard, shards, u.shard_numel,
                         options_.compute_dtype, &bytes_communicated_);
  if (!rows.ok()) return rows.status();
  int64_t offset = 0;
  for (Param& p : u.params) {
    at::Tensor full = FromShardRows(
        rows->narrow(1, offset, p.layout.shard_numel()), p.layout);
    p.param.set_data(full);
    offset += p.layout.shard_numel();
  }
  u.gathered = true;
  return absl::OkStatus();
}

absl::Status FsdpModule::GatherAll() {
  for (int i = 0; i < num_units(); ++i) {
    absl::Status s = Gather(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

void FsdpModule::Reshard(int i) {
  Unit& u = unit(i);
  for (Param& p : u.params) {
    p.param.set_data(at::empty({0}, p.param.options()));
    if (p.param.grad().defined()) p.param.mutable_grad() = at::Tensor();
  }
  u.gathered = false;
}

void FsdpModule::ReshardAll() {
  for (int i = 0; i < num_units(); ++i) Reshard(i);
}

absl::Status FsdpModule::ReduceGradients(int i) {
  Unit& u = unit(i);
  const int world = groups_.shard->size();
  // [world, shard_numel]: row r is what rank r's shards receive.
  if (u.grad_numel == 0) return absl::OkStatus();  // frozen unit
  std::vector<at::Tensor> parts;
  for (Param& p : u.params) {
    if (!p.trainable) continue;
    at::Tensor g = p.param.grad();
    at::Tensor full = g.defined() && g.numel() == p.layout.full_numel()
                          ? g.detach().to(at::kFloat)
                          : at::zeros(p.layout.full_shape, at::kFloat);
    parts.push_back(PaddedRows(full, p.layout).view({world, -1}));
  }
  at::Tensor flat = at::cat(parts, 1).reshape(-1);
  bytes_communicated_ += Bytes(flat);
  auto mine = groups_.shard->ReduceScatter(flat, ReduceOp::kAvg);
  if (!mine.ok()) return mine.status();
  at::Tensor grad = *mine;
  if (groups_.replicate && groups_.replicate->size() > 1) {
    bytes_communicated_ += Bytes(grad);
    absl::Status s = groups_.replicate->AllReduce(grad, ReduceOp::kAvg);
    if (!s.ok()) return s;
  }
  int64_t offset = 0;
  for (Param& p : u.params) {
    if (!p.trainable) continue;
    at::Tensor g = grad.narrow(0, offset, p.layout.shard_numel())
                       .view(p.layout.ShardShape());
    if (p.shard.grad().defined()) {
      p.shard.mutable_grad().add_(g);
    } else {
      p.shard.mutable_grad() = g.clone();
    }
    if (p.param.grad().defined()) p.param.mutable_grad() = at::Tensor();
    offset += p.layout.shard_numel();
  }
  return absl::OkStatus();
}

absl::Status FsdpModule::ReduceAllGradients() {
  for (int i = 0; i < num_units(); ++i) {
    absl::Status s = ReduceGradients(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<double> FsdpModule::GradNorm() {
  double sq = 0;
  for (const Unit& u : units_) {
    for (const Param& p : u.params) {
      if (p.shard.grad().defined())
        sq += p.shard.grad().to(at::kDouble).pow(2).sum().item<double>();
    }
  }
  at::Tensor t = at::full({1}, sq, at::kDouble);
  absl::Status s = groups_.shard->AllReduce(t, ReduceOp::kSum);
  if (!s.ok()) return s;
  return std::sqrt(t.item<double>());
}

void FsdpModule::ScaleGrads(double factor) {
  for (Unit& u : units_) {
    for (Param& p : u.params) {
      if (p.shard.grad().defined()) p.shard.mutable_grad().mul_(factor);
    }
  }
}

void FsdpModule::ZeroGrad() {
  for (Unit& u : units_) {
    for (Param& p : u.params) {
      if (p.shard.grad().defined()) p.shard.mutable_grad().zero_();
      if (p.param.grad().defined()) p.param.mutable_grad().zero_();
    }
  }
}

std::vector<at::Tensor> FsdpModule::shard_params() const {
  std::vector<at::Tensor> out;
  for (const Unit& u : units_) {
    for (const Param& p : u.params) {
      if (p.trainable) out.push_back(p.shard);
    }
  }
  return out;
}

absl::StatusOr<NamedTensors> FsdpModule::FullStateDict(int root) {
  NamedTensors out;
  for (const Unit& u : units_) {
    std::vector<at::Tensor> shards;
    for (const Param& p : u.params) shards.push_back(p.shard);
    auto rows = GatherFlat(*groups_.shard, shards, u.shard_numel, at::kFloat,
                           &bytes_communicated_);
    if (!rows.ok()) return rows.status();
    if (groups_.shard->rank() != root) continue;
    int64_t offset = 0;
    for (const Param& p : u.params) {
      out.emplace_back(
          p.name, FromShardRows(rows->narrow(1, offset, p.layout.shard_numel()),
                                p.layout));
      offset += p.layout.shard_numel();
    }
  }
  return out;
}

absl::Status FsdpModule::ForEachGatheredUnit(
    const std::function<absl::Status(const std::string&, const NamedTensors&)>&
        fn) {
  for (int i = 0; i < num_units(); ++i) {
    const bool was_gathered = gathered(i);
    absl::Status s = Gather(i);
    NamedTensors full;
    for (const Param& p : units_[i].params) full.emplace_back(p.name, p.param);
    if (s.ok()) s = fn(units_[i].name, full);
    if (!was_gathered) Reshard(i);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<ShardedTensor> FsdpModule::ShardedStateDict() const {
  std::vector<ShardedTensor> out;
  for (const Unit& u : units_) {
    for (const Param& p : u.params) {
      out.push_back(
          {p.name, p.layout, groups_.shard->rank(), p.shard.detach().clone()});
    }
  }
  return out;
}

absl::Status FsdpModule::LoadShardedStateDict(
    const std::vector<ShardedTensor>& shards) {
  std::map<std::string, const ShardedTensor*> by_name;
  for (const ShardedTensor& s : shards) by_name[s.name] = &s;
  for (Unit& u : units_) {
    for (Param& p : u.params) {
      auto it = by_name.find(p.name);
      if (it == by_name.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sharded state dict: missing parameter ", p.name,
                         " (rank ", groups_.shard->rank(), ")"));
      }
      const ShardedTensor& s = *it->second;
      if (s.layout.full_shape != p.layout.full_shape ||
          s.layout.world != p.layout.world || s.rank != groups_.shard->rank() ||
          s.shard.sizes().vec() != p.layout.ShardShape()) {
        return absl::InvalidArgumentError(
            absl::StrCat("sharded state dict: parameter ", p.name,
                         " has a different shard layout (saved for shard ",
                         s.rank, " of ", s.layout.world, ", this is shard ",
                         groups_.shard->rank(), " of ", p.layout.world, ")"));
      }
      at::NoGradGuard no_grad;
      p.shard.detach().copy_(s.shard);
    }
  }
  return absl::OkStatus();
}

FsdpMemory FsdpModule::Memory() const {
  FsdpMemory m;
  for (const Unit& u : units_) {
    for (const Param& p : u.params) {
      m.param_shard_bytes += Bytes(p.shard);
      m.grad_shard_bytes += Bytes(p.shard.grad());
      if (u.gathered) m.gathered_bytes += Bytes(p.param);
      m.full_grad_bytes += Bytes(p.param.grad());
    }
  }
  // Offloaded shards (and their grads) wait in host memory; gathered
  // parameters and full gradients are on the compute device.
  const int64_t shard_bytes = m.param_shard_bytes + m.grad_shard_bytes;
  (options_.param_offload ? m.host_bytes : m.device_bytes) += shard_bytes;
  m.device_bytes += m.gathered_bytes + m.full_grad_bytes;
  return m;
}

}  // namespace verl::parallel
