#include "verl/parallel/fsdp.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/GradMode.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/parallel/fsdp_rows.h"
#include "verl/profiler/memory_tracker.h"

namespace verl::parallel {

using fsdp_rows::Bytes;
using fsdp_rows::FromShardRows;
using fsdp_rows::PaddedRows;

// One background collective: `run` executes on the queue's thread; `rows`
// receives an all-gather's result.
struct FsdpModule::Task {
  std::function<absl::Status(Task&)> run;
  at::Tensor rows;
  absl::Status status;
  bool done = false;
};

// A FIFO of collectives executed by one thread over the async groups. All
// ranks enqueue in the same program order, so the collectives match.
class FsdpModule::CommQueue {
 public:
  CommQueue() : thread_([this] { Loop(); }) {}
  ~CommQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  std::shared_ptr<Task> Submit(std::function<absl::Status(Task&)> run) {
    auto task = std::make_shared<Task>();
    task->run = std::move(run);
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(task);
    }
    cv_.notify_all();
    return task;
  }

  // Blocks until `task` ran; returns its status.
  absl::Status Wait(const std::shared_ptr<Task>& task) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return task->done; });
    return task->status;
  }

  FsdpCommStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  void Loop() {
    for (;;) {
      std::shared_ptr<Task> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping
        task = queue_.front();
        queue_.pop_front();
      }
      const auto t0 = std::chrono::steady_clock::now();
      absl::Status status;
      {
        at::NoGradGuard no_grad;
        status = task->run(*task);
      }
      const double dt =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      {
        std::lock_guard<std::mutex> lock(mu_);
        task->status = std::move(status);
        task->done = true;
        task->run = nullptr;
        ++stats_.collectives;
        stats_.comm_seconds += dt;
      }
      done_cv_.notify_all();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool stop_ = false;
  FsdpCommStats stats_;
  std::thread thread_;  // last: starts after the other members exist
};

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
  int64_t full_bytes = 0;   // gathered size in the compute dtype
  // kResharded: parameters are empty tensors. kFreed: full shapes, storage
  // released (FreeStorage). kGathered: full parameters.
  enum class State { kResharded, kFreed, kGathered } state = State::kResharded;
  bool gathered() const { return state == State::kGathered; }
  bool needs_reduce = false;    // marked by PreForward under grad mode
  std::shared_ptr<Task> fetch;  // prefetch in flight (or finished)
};

FsdpModule::FsdpModule(std::vector<FsdpUnitSpec> units, FsdpGroups groups,
                       FsdpOptions options)
    : groups_(std::move(groups)), options_(options) {
  CHECK(groups_.shard != nullptr) << "FSDP needs a shard group";
  if (groups_.async_shard) {
    CHECK_EQ(groups_.async_shard->size(), groups_.shard->size());
    queue_ = std::make_unique<CommQueue>();
  }
  const int64_t elem = at::elementSize(options_.compute_dtype);
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
      if (options_.param_offload) p.shard = HostCopy(p.shard);
      p.trainable = tensor.requires_grad();
      p.shard.set_requires_grad(p.trainable);
      u.shard_numel += p.layout.shard_numel();
      u.full_bytes += p.layout.full_numel() * elem;
      if (p.trainable) u.grad_numel += p.layout.shard_numel();
      u.params.push_back(std::move(p));
    }
    units_.push_back(std::move(u));
  }
  if (options_.param_offload) shard_location_ = MemoryLocation::kHost;
  ReshardAll();
}

FsdpModule::~FsdpModule() {
  // Finish background work before the units it refers to go away.
  if (queue_) WaitPending().IgnoreError();
  for (Unit& u : units_) {
    if (u.fetch) queue_->Wait(u.fetch).IgnoreError();
  }
  queue_.reset();
}

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
bool FsdpModule::gathered(int i) const { return unit(i).gathered(); }

namespace {

// All-gathers the flat concatenation of `u`'s shards in `dtype` and returns
// [world, shard_numel] rows (one per rank).
absl::StatusOr<at::Tensor> GatherFlat(Communicator& group,
                                      const std::vector<at::Tensor>& shards,
                                      int64_t shard_numel, at::ScalarType dtype,
                                      std::atomic<int64_t>* bytes) {
  std::vector<at::Tensor> flat;
  for (const at::Tensor& s : shards) flat.push_back(s.detach().reshape(-1));
  at::Tensor local = at::cat(flat).to(dtype);
  *bytes += Bytes(local) * group.size();
  // The gathered buffer holds full parameters.
  profiler::MemoryCategoryScope category(profiler::MemoryCategory::kParameters);
  auto all = group.AllGatherCat(local);
  if (!all.ok()) return all.status();
  return all->view({group.size(), shard_numel});
}

}  // namespace

namespace {

using SteadyClock = std::chrono::steady_clock;
double SecondsSince(SteadyClock::time_point t0) {
  return std::chrono::duration<double>(SteadyClock::now() - t0).count();
}

// Releases (nbytes 0) or re-allocates a tensor's storage in place: every
// tensor sharing the storage, views autograd saved included, follows.
void SetStorageBytes(const at::Tensor& t, size_t nbytes) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (nbytes == 0) {
    storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  } else {
    profiler::MemoryCategoryScope category(
        profiler::MemoryCategory::kParameters);
    storage->set_data_ptr_noswap(c10::GetCPUAllocator()->allocate(nbytes));
  }
  storage->set_nbytes(nbytes);
}

}  // namespace

const char* MemoryLocationName(MemoryLocation where) {
  return where == MemoryLocation::kHost ? "host" : "device";
}

at::Tensor HostCopy(const at::Tensor& t) {
  at::TensorOptions options = t.options().device(at::kCPU);
  if (t.is_cuda()) options = options.pinned_memory(true);
  at::Tensor host = at::empty(t.sizes(), options);
  host.copy_(t);
  return host;
}

at::Tensor DeviceCopy(const at::Tensor& t, c10::Device device) {
  at::Tensor out = at::empty(t.sizes(), t.options().device(device));
  out.copy_(t);
  return out;
}

absl::Status FsdpModule::MoveShards(MemoryLocation to) {
  if (to == shard_location_) return absl::OkStatus();
  // Background work reads shards (prefetches) and writes shard gradients.
  VERL_RETURN_IF_ERROR(WaitPending());
  for (Unit& u : units_) {
    if (u.fetch) VERL_RETURN_IF_ERROR(Sticky(queue_->Wait(u.fetch)));
  }
  auto move = [&](const at::Tensor& t) {
    offload_bytes_moved_ += t.numel() * t.element_size();
    return to == MemoryLocation::kHost ? HostCopy(t)
                                       : DeviceCopy(t, options_.device);
  };
  at::NoGradGuard no_grad;
  for (Unit& u : units_) {
    for (Param& p : u.params) {
      at::Tensor grad = p.shard.grad();
      p.shard.set_data(move(p.shard.detach()));
      if (grad.defined()) p.shard.mutable_grad() = move(grad);
    }
  }
  shard_location_ = to;
  return absl::OkStatus();
}

void FsdpModule::AddLive(int64_t bytes) {
  live_gathered_bytes_ += bytes;
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, live_gathered_bytes_);
}

absl::Status FsdpModule::Sticky(absl::Status s) {
  if (!s.ok() && first_error_.ok()) first_error_ = s;
  return first_error_.ok() ? s : first_error_;
}

void FsdpModule::Materialize(Unit& u, const at::Tensor& rows) {
  const int world = groups_.shard->size();
  int64_t offset = 0;
  for (Param& p : u.params) {
    const ShardLayout& l = p.layout;
    at::Tensor dst;
    if (u.state == Unit::State::kFreed) {
      // Same tensor, fresh storage: what autograd saved sees the values.
      SetStorageBytes(p.param, l.full_numel() * p.param.element_size());
      dst = p.param.variable_data();  // no version bump on the parameter
    } else {
      profiler::MemoryCategoryScope category(
          profiler::MemoryCategory::kParameters);
      dst = at::empty(l.full_shape, rows.options());
    }
    at::Tensor dst_rows = dst.view({l.dim0, l.row_numel});
    for (int r = 0; r < world; ++r) {
      const int64_t valid = l.ValidRows(r);
      if (valid == 0) continue;
      dst_rows.narrow(0, r * l.shard_rows, valid)
          .copy_(rows[r]
                     .narrow(0, offset, l.shard_numel())
                     .view({l.shard_rows, l.row_numel})
                     .narrow(0, 0, valid));
    }
    if (u.state != Unit::State::kFreed) p.param.set_data(dst);
    offset += l.shard_numel();
  }
  u.state = Unit::State::kGathered;
}

void FsdpModule::Prefetch(int i) {
  Unit& u = unit(i);
  if (!queue_ || u.gathered() || u.fetch) return;
  std::vector<at::Tensor> shards;
  for (const Param& p : u.params) shards.push_back(p.shard);
  const int64_t numel = u.shard_numel;
  const at::ScalarType dtype = options_.compute_dtype;
  Communicator* group = groups_.async_shard.get();
  std::atomic<int64_t>* bytes = &bytes_communicated_;
  u.fetch = queue_->Submit([=](Task& t) -> absl::Status {
    auto rows = GatherFlat(*group, shards, numel, dtype, bytes);
    if (!rows.ok()) return rows.status();
    t.rows = *rows;
    return absl::OkStatus();
  });
  AddLive(u.full_bytes);  // the gather buffer
}

absl::Status FsdpModule::Gather(int i) {
  Unit& u = unit(i);
  if (u.gathered()) return absl::OkStatus();
  VERL_RETURN_IF_ERROR(Sticky(absl::OkStatus()));
  at::Tensor rows;
  const auto t0 = SteadyClock::now();
  if (queue_) {
    Prefetch(i);  // no-op when already in flight
    std::shared_ptr<Task> fetch = std::move(u.fetch);
    u.fetch.reset();
    absl::Status s = queue_->Wait(fetch);
    wait_seconds_ += SecondsSince(t0);
    AddLive(-u.full_bytes);  // the buffer becomes the parameters below
    VERL_RETURN_IF_ERROR(Sticky(s));
    rows = std::move(fetch->rows);
  } else {
    std::vector<at::Tensor> shards;
    for (const Param& p : u.params) shards.push_back(p.shard);
    auto gathered = GatherFlat(*groups_.shard, shards, u.shard_numel,
                               options_.compute_dtype, &bytes_communicated_);
    const double dt = SecondsSince(t0);
    inline_stats_.comm_seconds += dt;
    inline_stats_.wait_seconds += dt;
    ++inline_stats_.collectives;
    VERL_RETURN_IF_ERROR(Sticky(gathered.status()));
    rows = *std::move(gathered);
  }
  Materialize(u, rows);
  AddLive(u.full_bytes);
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
  if (u.fetch) {  // a prefetch nobody used
    queue_->Wait(u.fetch).IgnoreError();
    u.fetch.reset();
    AddLive(-u.full_bytes);
  }
  if (u.gathered()) AddLive(-u.full_bytes);
  for (Param& p : u.params) {
    p.param.set_data(at::empty({0}, p.param.options()));
    if (p.param.grad().defined()) p.param.mutable_grad() = at::Tensor();
  }
  u.state = Unit::State::kResharded;
}

void FsdpModule::ReshardAll() {
  for (int i = 0; i < num_units(); ++i) Reshard(i);
}

void FsdpModule::FreeStorage(int i) {
  Unit& u = unit(i);
  CHECK(u.gathered()) << "FreeStorage of FSDP unit " << u.name
                      << " that is not gathered";
  for (Param& p : u.params) SetStorageBytes(p.param, 0);
  u.state = Unit::State::kFreed;
  AddLive(-u.full_bytes);
}

absl::Status FsdpModule::PreForward(int i, int next) {
  Unit& u = unit(i);
  if (c10::GradMode::is_enabled() && u.grad_numel > 0) u.needs_reduce = true;
  VERL_RETURN_IF_ERROR(Gather(i));
  if (options_.forward_prefetch && next >= 0) Prefetch(next);
  return absl::OkStatus();
}

void FsdpModule::PostForward(int i) {
  if (!c10::GradMode::is_enabled()) {
    Reshard(i);
  } else if (options_.reshard_after_forward) {
    FreeStorage(i);
  }
}

absl::Status FsdpModule::PreBackward(int i, int prev) {
  VERL_RETURN_IF_ERROR(Gather(i));
  if (options_.backward_prefetch && prev >= 0) Prefetch(prev);
  return absl::OkStatus();
}

absl::Status FsdpModule::PostBackward(int i) {
  VERL_RETURN_IF_ERROR(StartReduceGradients(i));
  Reshard(i);
  return absl::OkStatus();
}

absl::Status FsdpModule::ReduceMarkedGradients() {
  for (int i = 0; i < num_units(); ++i) {
    if (units_[i].needs_reduce) VERL_RETURN_IF_ERROR(StartReduceGradients(i));
  }
  return WaitPending();
}

bool FsdpModule::marked_for_reduce(int i) const { return unit(i).needs_reduce; }

at::Tensor FsdpModule::TakeFlatGrads(Unit& u) {
  u.needs_reduce = false;
  if (u.grad_numel == 0) return at::Tensor();  // frozen unit
  const int world = groups_.shard->size();
  // [world, shard_numel]: row r is what rank r's shards receive.
  std::vector<at::Tensor> parts;
  profiler::MemoryCategoryScope category(
      profiler::MemoryCategory::kCommunication);
  for (Param& p : u.params) {
    if (!p.trainable) continue;
    at::Tensor g = p.param.grad();
    at::Tensor full = g.defined() && g.numel() == p.layout.full_numel()
                          ? g.detach().to(at::kFloat)
                          : at::zeros(p.layout.full_shape, at::kFloat);
    parts.push_back(PaddedRows(full, p.layout).view({world, -1}));
    if (g.defined()) p.param.mutable_grad() = at::Tensor();
  }
  return at::cat(parts, 1).reshape(-1);
}

absl::Status FsdpModule::ReduceInto(Unit& u, const at::Tensor& flat,
                                    Communicator& shard,
                                    Communicator* replicate) {
  bytes_communicated_ += Bytes(flat);
  auto mine = shard.ReduceScatter(flat, ReduceOp::kAvg);
  if (!mine.ok()) return mine.status();
  at::Tensor grad = *mine;
  if (replicate && replicate->size() > 1) {
    bytes_communicated_ += Bytes(grad);
    absl::Status s = replicate->AllReduce(grad, ReduceOp::kAvg);
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
    offset += p.layout.shard_numel();
  }
  return absl::OkStatus();
}

absl::Status FsdpModule::ReduceGradients(int i) {
  VERL_RETURN_IF_ERROR(StartReduceGradients(i));
  return WaitPending();
}

absl::Status FsdpModule::StartReduceGradients(int i) {
  VERL_RETURN_IF_ERROR(Sticky(absl::OkStatus()));
  Unit& u = unit(i);
  at::Tensor flat = TakeFlatGrads(u);
  if (!flat.defined()) return absl::OkStatus();
  if (!queue_) {
    const auto t0 = SteadyClock::now();
    absl::Status s =
        ReduceInto(u, flat, *groups_.shard, groups_.replicate.get());
    const double dt = SecondsSince(t0);
    inline_stats_.comm_seconds += dt;
    inline_stats_.wait_seconds += dt;
    ++inline_stats_.collectives;
    return Sticky(s);
  }
  Unit* target = &u;
  Communicator* shard = groups_.async_shard.get();
  Communicator* replicate = groups_.async_replicate.get();
  pending_reduces_.push_back(queue_->Submit(
      [=](Task&) { return ReduceInto(*target, flat, *shard, replicate); }));
  return absl::OkStatus();
}

absl::Status FsdpModule::WaitPending() {
  if (!queue_) return first_error_;
  const auto t0 = SteadyClock::now();
  for (const auto& task : pending_reduces_) {
    Sticky(queue_->Wait(task)).IgnoreError();
  }
  pending_reduces_.clear();
  wait_seconds_ += SecondsSince(t0);
  return first_error_;
}

absl::Status FsdpModule::ReduceAllGradients() {
  for (int i = 0; i < num_units(); ++i) {
    VERL_RETURN_IF_ERROR(StartReduceGradients(i));
  }
  return WaitPending();
}

absl::StatusOr<double> FsdpModule::GradNorm() {
  VERL_RETURN_IF_ERROR(WaitPending());
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
  WaitPending().IgnoreError();  // sticky: the next Status call reports it
  for (Unit& u : units_) {
    for (Param& p : u.params) {
      if (p.shard.grad().defined()) p.shard.mutable_grad().mul_(factor);
    }
  }
}

void FsdpModule::ZeroGrad() {
  WaitPending().IgnoreError();  // sticky: the next Status call reports it
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
      if (u.gathered()) m.gathered_bytes += Bytes(p.param);
      m.full_grad_bytes += Bytes(p.param.grad());
    }
  }
  // Shards (and their grads) are where MoveShards put them; gathered
  // parameters and full gradients are on the compute device.
  const int64_t shard_bytes = m.param_shard_bytes + m.grad_shard_bytes;
  (shard_location_ == MemoryLocation::kHost ? m.host_bytes : m.device_bytes) +=
      shard_bytes;
  m.device_bytes += m.gathered_bytes + m.full_grad_bytes;
  m.peak_gathered_bytes = peak_gathered_bytes_;
  return m;
}

void FsdpModule::ResetPeak() { peak_gathered_bytes_ = live_gathered_bytes_; }

FsdpCommStats FsdpModule::comm_stats() const {
  FsdpCommStats s = inline_stats_;
  if (queue_) {
    const FsdpCommStats q = queue_->stats();
    s.collectives += q.collectives;
    s.comm_seconds += q.comm_seconds;
    s.wait_seconds += wait_seconds_;
  }
  return s;
}

int64_t FsdpModule::bytes_communicated() const { return bytes_communicated_; }

}  // namespace verl::parallel
