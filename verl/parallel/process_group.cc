// File: verl/parallel/process_group.cc
#include "verl/parallel/process_group.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#if defined(VERL_WITH_CUDA) && defined(USE_C10D_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define VERL_HAVE_NCCL 1
#endif

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/timeline.h"

namespace verl::parallel {

struct Communicator::Impl {
  c10::intrusive_ptr<c10d::Store> store;      // Null for a group of one.
  c10::intrusive_ptr<c10d::ProcessGroup> pg;  // Null for a group of one.
  std::shared_ptr<gloo::transport::Device> device;
  int rank = 0;
  int size = 1;
  std::vector<int> global_ranks = {0};
  std::string name = "world";
  std::string rendezvous;  // "HOST:PORT" of the TCPStore
  ProcessGroupOptions options;

  int global_rank() const { return global_ranks[rank]; }

  // "rank 3 (group 'dp_0' rank 1/2)": who is reporting, for error lines.
  std::string Who() const {
    return absl::StrCat("rank ", global_rank(), " (group '", name, "' rank ",
                        rank, "/", size, ")");
  }

  absl::Status Invalid(const char* op, const std::string& what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(Who(), ": ", op, ": ", what));
  }

  // Maps a backend exception to a status naming this rank and the op.
  absl::Status Classify(const char* op, const std::string& raw) const {
    std::string first_line = raw.substr(0, raw.find('\n'));
    const std::string lower = absl::AsciiStrToLower(first_line);
    if (absl::StrContains(lower, "timed out") ||
        absl::StrContains(lower, "timeout")) {
      return absl::DeadlineExceededError(
          absl::StrCat(Who(), ": ", op, " timed out after ",
                       options.timeout.count(), " ms: ", first_line));
    }
    if (absl::StrContains(lower, "connection closed") ||
        absl::StrContains(lower, "connection reset") ||
        absl::StrContains(lower, "broken pipe") ||
        absl::StrContains(lower, "connection refused")) {
      return absl::UnavailableError(absl::StrCat(
          Who(), ": ", op, " failed, a peer is gone: ", first_line));
    }
    return absl::InternalError(
        absl::StrCat(Who(), ": ", op, " failed: ", first_line));
  }

  // Starts one c10d work item and waits for it. The wait is bounded a little
  // past the backend's own timeout so a stuck backend still returns.
  template <typename Start>
  absl::Status Run(const char* op, Start&& start) const {
    try {
      c10::intrusive_ptr<c10d::Work> work = start();
      const auto bound =
          options.timeout +
          std::max(options.timeout / 4, std::chrono::milliseconds(1000));
      if (!work->wait(bound)) {
        return Classify(op, "timed out (work did not complete)");
      }
      return absl::OkStatus();
    } catch (const c10::Error& e) {
      return Classify(op, e.what_without_backtrace());
    } catch (const std::exception& e) {
      return Classify(op, e.what());
    }
  }

  // Raw Gloo all_gather of equally shaped contiguous tensors.
  absl::StatusOr<std::vector<at::Tensor>> AllGatherEqual(
      const char* op, const at::Tensor& input) const {
    if (input.scalar_type() == at::kBFloat16) {
      // Gloo in LibTorch 1.13 has no bfloat16; a gather only moves bits, so
      // send the same 2-byte words as half and view them back (exact).
      VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> parts,
                            AllGatherEqual(op, input.view(at::kHalf)));
      for (at::Tensor& part : parts) part = part.view(at::kBFloat16);
      return parts;
    }
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int i = 0; i < size; ++i) outputs[0].push_back(at::empty_like(input));
    std::vector<at::Tensor> inputs = {input};
    c10d::AllgatherOptions opts;
    opts.timeout = options.timeout;
    VERL_RETURN_IF_ERROR(
        Run(op, [&] { return pg->allgather(outputs, inputs, opts); }));
    return outputs[0];
  }

  // Raw all_to_all_single; empty splits mean even splits of dim 0.
  absl::Status AllToAllBase(const char* op, at::Tensor& output,
                            const at::Tensor& input,
                            std::vector<int64_t> recv_splits,
                            std::vector<int64_t> send_splits) const {
    at::Tensor in = input;
    c10d::AllToAllOptions opts;
    opts.timeout = options.timeout;
    return Run(op, [&] {
      return pg->alltoall_base(output, in, recv_splits, send_splits, opts);
    });
  }
};

namespace {

at::Tensor Contiguous(const at::Tensor& t) {
  return t.is_contiguous() ? t : t.contiguous();
}

// Profiling of one collective: a timeline span (category "collective") with
// the bytes this rank contributes, the group and its size; allocations made
// inside count as communication buffers in memory snapshots.
class CollectiveSpan {
 public:
  CollectiveSpan(const Communicator::Impl& impl, const char* op, int64_t bytes)
      : category_(profiler::MemoryCategory::kCommunication),
        trace_(op, "collective",
               profiler::Timeline::Global().enabled()
                   ? nlohmann::json{{"bytes", bytes},
                                    {"group", impl.name},
                                    {"group_size", impl.size}}
                   : nlohmann::json()) {}

 private:
  profiler::MemoryCategoryScope category_;
  profiler::TraceScope trace_;
};

int64_t Bytes(const at::Tensor& t) {
  return static_cast<int64_t>(t.numel()) * t.element_size();
}

std::string ShapeString(at::IntArrayRef sizes) {
  return absl::StrCat("[", absl::StrJoin(sizes, ", "), "]");
}

// Shape of `t` with dim 0 replaced by `rows`.
std::vector<int64_t> WithRows(const at::Tensor& t, int64_t rows) {
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  shape[0] = rows;
  return shape;
}

bool IsLoopback(const std::string& addr) {
  return absl::StartsWith(addr, "127.") || addr == "localhost" || addr == "::1";
}

// Gloo's network device: loopback for single-host jobs, GLOO_SOCKET_IFNAME
// if set (as in PyTorch), else the address this host's name resolves to.
std::shared_ptr<gloo::transport::Device> MakeGlooDevice(
    const std::string& master_addr) {
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME")) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(ifname);
  }
  if (IsLoopback(master_addr)) {
    return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  }
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// "1..3, 5, 7..9" for global ranks {1, 2, 3, 5, 7, 8, 9}.
std::string RankRanges(const std::vector<int>& ranks) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(ranks[i])
                           : absl::StrCat(ranks[i], "..", ranks[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ", ");
}

// "rank 1" / "ranks 1..3": the members (global ranks) whose join key is not
// in the store yet.
std::string Missing(const Communicator::Impl& impl, int* joined) {
  std::vector<int> missing;
  for (int r = 0; r < impl.size; ++r) {
    if (!impl.store->check({absl::StrCat("__rdzv/rank_", r)})) {
      missing.push_back(impl.global_ranks[r]);
    }
  }
  *joined = impl.size - static_cast<int>(missing.size());
  return absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                      RankRanges(missing));
}

// Blocks until all `impl.size` members reached this point in the group's
// store, so the backend's connection phase starts with everyone present.
// While waiting, the group's rank 0 logs who is missing every few seconds.
absl::Status StoreRendezvous(const Communicator::Impl& impl) {
  using Clock = std::chrono::steady_clock;
  const std::string joined_key = "__rdzv/joined";
  const auto timeout = impl.options.init_timeout;
  const auto deadline = Clock::now() + timeout;
  const std::chrono::milliseconds interval =
      std::clamp<std::chrono::milliseconds>(
          timeout / 3, std::chrono::seconds(1), std::chrono::seconds(5));
  const std::string where =
      impl.name == "world" ? "" : absl::StrCat(" (group '", impl.name, "')");
  try {
    const int64_t joined = impl.store->add(joined_key, 1);
    if (joined > impl.size) {
      return absl::FailedPreconditionError(
          absl::StrCat(impl.Who(), ": group name '", impl.name,
                       "' was already used in this job; names must be unique"));
    }
    impl.store->set(absl::StrCat("__rdzv/rank_", impl.rank), {1});
    if (joined == impl.size) impl.store->set("__rdzv/ready", {1});
    while (true) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      if (left.count() <= 0) break;
      try {
        impl.store->wait({"__rdzv/ready"}, std::min(interval, left));
        return absl::OkStatus();
      } catch (const std::exception&) {
        // Timed out (or the store went away: the next call throws too).
      }
      if (impl.rank == 0 && Clock::now() < deadline) {
        int now_joined = 0;
        const std::string missing = Missing(impl, &now_joined);
        LOG(WARNING) << "waiting for " << missing << " at " << impl.rendezvous
                     << where << ", " << now_joined << " of " << impl.size
                     << " joined";
      }
    }
    int now_joined = 0;
    const std::string missing = Missing(impl, &now_joined);
    return absl::DeadlineExceededError(absl::StrCat(
        impl.Who(), ": rendezvous at ", impl.rendezvous, " timed out after ",
        absl::FormatDuration(absl::FromChrono(timeout)), ": ", now_joined,
        " of ", impl.size, " ranks joined, ", missing,
        " never came (is every node started with the same --nnodes, "
        "--master_addr and --master_port?)"));
  } catch (const std::exception& e) {
    const c10::Error* c10_error = dynamic_cast<const c10::Error*>(&e);
    std::string what =
        c10_error ? c10_error->what_without_backtrace() : e.what();
    return absl::UnavailableError(absl::StrCat(
        impl.Who(), ": lost the TCPStore at ", impl.rendezvous,
        " during the rendezvous: ", what.substr(0, what.find('\n'))));
  }
}

// Rendezvous, then builds the backend group over `impl->store`.
absl::StatusOr<std::shared_ptr<Communicator>> ConnectGroup(
    std::unique_ptr<Communicator::Impl> impl) {
  VERL_RETURN_IF_ERROR(StoreRendezvous(*impl));
  try {
    if (impl->options.backend == Backend::kNccl) {
#ifdef VERL_HAVE_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = impl->options.timeout;
      impl->pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(
          impl->store, impl->rank, impl->size, opts);
#else
      return absl::UnimplementedError(absl::StrCat(
          impl->Who(),
          ": the NCCL backend needs a CUDA LibTorch build (--config=cuda)"));
#endif
    } else {
      auto opts =
          c10d::ProcessGroupGloo::Options::create(impl->options.timeout);
      opts->devices.push_back(impl->device);
      opts->threads = 2;
      impl->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
          impl->store, impl->rank, impl->size, opts);
    }
  } catch (const c10::Error& e) {
    return impl->Classify("connect", e.what_without_backtrace());
  } catch (const std::exception& e) {
    return impl->Classify("connect", e.what());
  }
  return std::make_shared<Communicator>(std::move(impl));
}

}  // namespace

const char* ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
  }
  return "?";
}

Communicator::Communicator(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
Communicator::~Communicator() = default;

int Communicator::rank() const { return impl_->rank; }
int Communicator::size() const { return impl_->size; }
int Communicator::global_rank() const { return impl_->global_rank(); }
const std::vector<int>& Communicator::global_ranks() const {
  return impl_->global_ranks;
}
const std::string& Communicator::name() const { return impl_->name; }
std::chrono::milliseconds Communicator::timeout() const {
  return impl_->options.timeout;
}

namespace {

absl::Status CheckAvgDtype(const Communicator::Impl& impl, const char* op,
                           ReduceOp reduce, const at::Tensor& t) {
  if (reduce == ReduceOp::kAvg && !at::isFloatingType(t.scalar_type())) {
    return impl.Invalid(op, absl::StrCat("avg needs a floating dtype, got ",
                                         c10::toString(t.scalar_type())));
  }
  return absl::OkStatus();
}

c10d::ReduceOp ToC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    default:  // kAvg is a sum followed by a division.
      return c10d::ReduceOp::SUM;
  }
}

}  // namespace

absl::Status Communicator::AllReduce(at::Tensor& tensor, ReduceOp op) {
  VERL_RETURN_IF_ERROR(CheckAvgDtype(*impl_, "all_reduce", op, tensor));
  if (impl_->size == 1) return absl::OkStatus();
  CollectiveSpan span(*impl_, "all_reduce", Bytes(tensor));
  at::Tensor buffer = Contiguous(tensor);
  std::vector<at::Tensor> tensors = {buffer};
  c10d::AllreduceOptions opts;
  opts.reduceOp = ToC10d(op);
  opts.timeout = impl_->options.timeout;
  VERL_RETURN_IF_ERROR(impl_->Run(
      "all_reduce", [&] { return impl_->pg->allreduce(tensors, opts); }));
  if (op == ReduceOp::kAvg) buffer.div_(impl_->size);
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<at::Tensor>> Communicator::AllGather(
    const at::Tensor& tensor) {
  constexpr const char* kOp = "all_gather";
  constexpr int kMaxTrailingDims = 8;
  if (tensor.dim() == 0) return impl_->Invalid(kOp, "tensor has no dim 0");
  if (tensor.dim() > kMaxTrailingDims + 1) {
    return impl_->Invalid(kOp, absl::StrCat("more than ", kMaxTrailingDims + 1,
                                            " dims: ", tensor.dim()));
  }
  at::Tensor input = Contiguous(tensor);
  if (impl_->size == 1) return std::vector<at::Tensor>{input.clone()};
  CollectiveSpan span(*impl_, kOp, Bytes(input));

  // Agree on shapes first: [rows, ndim, dtype, trailing dims (padded)].
  at::Tensor meta = at::zeros({3 + kMaxTrailingDims}, at::kLong);
  auto m = meta.accessor<int64_t, 1>();
  m[0] = input.size(0);
  m[1] = input.dim();
  m[2] = static_cast<int64_t>(input.scalar_type());
  for (int d = 1; d < input.dim(); ++d) m[2 + d] = input.size(d);
  VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> metas,
                        impl_->AllGatherEqual(kOp, meta));
  std::vector<int64_t> rows(impl_->size);
  for (int r = 0; r < impl_->size; ++r) {
    if (!at::equal(metas[r].narrow(0, 1, 2 + kMaxTrailingDims),
                   meta.narrow(0, 1, 2 + kMaxTrailingDims))) {
      return impl_->Invalid(
          kOp,
          absl::StrCat("member ", r, " (global rank ", impl_->global_ranks[r],
                       ") sends a different dtype or trailing shape than this "
                       "rank's ",
                       c10::toString(input.scalar_type()), " ",
                       ShapeString(input.sizes())));
    }
    rows[r] = metas[r][0].item<int64_t>();
  }
  const int64_t max_rows = *std::max_element(rows.begin(), rows.end());
  at::Tensor padded = input;
  if (input.size(0) != max_rows) {
    padded = at::zeros(WithRows(input, max_rows), input.options());
    padded.narrow(0, 0, input.size(0)).copy_(input);
  }
  VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> gathered,
                        impl_->AllGatherEqual(kOp, padded));
  for (int r = 0; r < impl_->size; ++r) {
    if (rows[r] != max_rows) gathered[r] = gathered[r].narrow(0, 0, rows[r]);
  }
  return gathered;
}

absl::StatusOr<at::Tensor> Communicator::AllGatherCat(
    const at::Tensor& tensor) {
  VERL_ASSIGN_OR_RETURN(std::vector<at::Tensor> parts, AllGather(tensor));
  return at::cat(parts, 0);
}

absl::StatusOr<at::Tensor> Communicator::ReduceScatter(const at::Tensor& input,
                                                       ReduceOp op) {
  constexpr const char* kOp = "reduce_scatter";
  VERL_RETURN_IF_ERROR(CheckAvgDtype(*impl_, kOp, op, input));
  if (input.dim() == 0 || input.size(0) % impl_->size != 0) {
    return impl_->Invalid(
        kOp, absl::StrCat("dim 0 of ", ShapeString(input.sizes()),
                          " is not divisible by the group size ", impl_->size));
  }
  at::Tensor in = Contiguous(input);
  if (impl_->size == 1) return in.clone();
  CollectiveSpan span(*impl_, kOp, Bytes(in));
  // Row block j goes to member j; afterwards row block i holds member i's
  // contribution to this rank's slice.
  at::Tensor received = at::empty_like(in);
  VERL_RETURN_IF_ERROR(impl_->AllToAllBase(kOp, received, in, {}, {}));
  std::vector<int64_t> stacked = {impl_->size, in.size(0) / impl_->size};
  for (int d = 1; d < in.dim(); ++d) stacked.push_back(in.size(d));
  at::Tensor blocks = received.view(stacked);
  switch (op) {
    case ReduceOp::kMax:
      return blocks.amax(0);
    case ReduceOp::kMin:
      return blocks.amin(0);
    case ReduceOp::kAvg:
      return blocks.sum(0, false, in.scalar_type()).div_(impl_->size);
    case ReduceOp::kSum:
      break;
  }
  return blocks.sum(0, false, in.scalar_type());
}

absl::Status Communicator::Broadcast(at::Tensor& tensor, int root) {
  if (root < 0 || root >= impl_->size) {
    return impl_->Invalid(
        "broadcast",
        absl::StrCat("root ", root, " is outside [0, ", impl_->size, ")"));
  }
  if (impl_->size == 1) return absl::OkStatus();
  CollectiveSpan span(*impl_, "broadcast", Bytes(tensor));
  at::Tensor buffer = Contiguous(tensor);
  // bf16 travels as same-width half words (Gloo has no bf16; bits only).
  std::vector<at::Tensor> tensors = {
      buffer.scalar_type() == at::kBFloat16 ? buffer.view(at::kHalf) : buffer};
  c10d::BroadcastOptions opts;
  opts.rootRank = root;
  opts.timeout = impl_->options.timeout;
  VERL_RETURN_IF_ERROR(impl_->Run(
      "broadcast", [&] { return impl_->pg->broadcast(tensors, opts); }));
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> Communicator::AllToAll(
    const at::Tensor& input, const std::vector<int64_t>& send_splits,
    std::vector<int64_t>* recv_splits) {
  constexpr const char* kOp = "all_to_all";
  const int n = impl_->size;
  if (input.dim() == 0) return impl_->Invalid(kOp, "tensor has no dim 0");
  at::Tensor in = Contiguous(input);
  const int64_t rows = in.size(0);
  if (send_splits.empty()) {
    if (rows % n != 0) {
      return impl_->Invalid(kOp, absl::StrCat("dim 0 (", rows,
                                              ") is not divisible by the "
                                              "group size ",
                                              n, "; pass send_splits"));
    }
  } else {
    const bool negative = std::any_of(send_splits.begin(), send_splits.end(),
                                      [](int64_t s) { return s < 0; });
    const int64_t total =
        std::accumulate(send_splits.begin(), send_splits.end(), int64_t{0});
    if (static_cast<int>(send_splits.size()) != n || negative ||
        total != rows) {
      return impl_->Invalid(
          kOp, absl::StrCat("send_splits [", absl::StrJoin(send_splits, ", "),
                            "] must be ", n,
                            " non-negative row counts summing to ", rows));
    }
  }
  if (n == 1) {
    if (recv_splits != nullptr) *recv_splits = {rows};
    return in.clone();
  }
  CollectiveSpan span(*impl_, kOp, Bytes(in));
  if (send_splits.empty()) {
    at::Tensor out = at::empty_like(in);
    VERL_RETURN_IF_ERROR(impl_->AllToAllBase(kOp, out, in, {}, {}));
    if (recv_splits != nullptr) recv_splits->assign(n, rows / n);
    return out;
  }
  // Exchange the counts, then the rows.
  at::Tensor send_counts = at::tensor(send_splits, at::kLong);
  at::Tensor recv_counts = at::empty_like(send_counts);
  VERL_RETURN_IF_ERROR(
      impl_->AllToAllBase(kOp, recv_counts, send_counts, {}, {}));
  std::vector<int64_t> recv(recv_counts.data_ptr<int64_t>(),
                            recv_counts.data_ptr<int64_t>() + n);
  const int64_t total = std::accumulate(recv.begin(), recv.end(), int64_t{0});
  at::Tensor out = at::empty(WithRows(in, total), in.options());
  VERL_RETURN_IF_ERROR(impl_->AllToAllBase(kOp, out, in, recv, send_splits));
  if (recv_splits != nullptr) *recv_splits = std::move(recv);
  return out;
}

namespace {

absl::Status CheckPeer(const Communicator::Impl& impl, const char* op,
                       int peer) {
  if (peer < 0 || peer >= impl.size || peer == impl.rank) {
    return impl.Invalid(
        op, absl::StrCat("peer ", peer, " is not another member of [0, ",
                         impl.size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Communicator::Send(const at::Tensor& tensor, int dst, int tag) {
  VERL_RETURN_IF_ERROR(CheckPeer(*impl_, "send", dst));
  CollectiveSpan span(*impl_, "send", Bytes(tensor));
  std::vector<at::Tensor> tensors = {Contiguous(tensor)};
  return impl_->Run("send", [&] { return impl_->pg->send(tensors, dst, tag); });
}

absl::Status Communicator::Recv(at::Tensor& tensor, int src, int tag) {
  VERL_RETURN_IF_ERROR(CheckPeer(*impl_, "recv", src));
  CollectiveSpan span(*impl_, "recv", Bytes(tensor));
  at::Tensor buffer = Contiguous(tensor);
  std::vector<at::Tensor> tensors = {buffer};
  VERL_RETURN_IF_ERROR(
      impl_->Run("recv", [&] { return impl_->pg->recv(tensors, src, tag); }));
  if (!buffer.is_same(tensor)) tensor.copy_(buffer);
  return absl::OkStatus();
}

absl::Status Communicator::Barrier() {
  if (impl_->size == 1) return absl::OkStatus();
  CollectiveSpan span(*impl_, "barrier", 0);
  c10d::BarrierOptions opts;
  opts.timeout = impl_->options.timeout;
  return impl_->Run("barrier", [&] { return impl_->pg->barrier(opts); });
}

absl::StatusOr<std::shared_ptr<Communicator>> Communicator::NewGroup(
    const std::vector<int>& ranks, const std::string& name) {
  constexpr const char* kOp = "new_group";
  std::set<int> unique(ranks.begin(), ranks.end());
  if (ranks.empty() || unique.size() != ranks.size() || *unique.begin() < 0 ||
      *unique.rbegin() >= impl_->size) {
    return impl_->Invalid(
        kOp,
        absl::StrCat("ranks [", absl::StrJoin(ranks, ", "),
                     "] must be distinct members of [0, ", impl_->size, ")"));
  }
  auto me = std::find(ranks.begin(), ranks.end(), impl_->rank);
  if (me == ranks.end()) {
    return impl_->Invalid(
        kOp, absl::StrCat("this rank is not in group '", name, "'"));
  }
  if (name.empty() || absl::StrContains(name, "/")) {
    return impl_->Invalid(kOp, absl::StrCat("bad group name '", name, "'"));
  }
  auto impl = std::make_unique<Impl>();
  impl->rank = static_cast<int>(me - ranks.begin());
  impl->size = static_cast<int>(ranks.size());
  impl->global_ranks.clear();
  for (int r : ranks) impl->global_ranks.push_back(impl_->global_ranks[r]);
  impl->name = name;
  impl->rendezvous = impl_->rendezvous;
  impl->options = impl_->options;
  impl->device = impl_->device;
  if (impl->size == 1) return std::make_shared<Communicator>(std::move(impl));
  impl->store = c10::make_intrusive<c10d::PrefixStore>(name, impl_->store);
  return ConnectGroup(std::move(impl));
}

absl::StatusOr<std::shared_ptr<Communicator>> InitProcessGroup(
    const DistEnv& env, const ProcessGroupOptions& options) {
  VERL_RETURN_IF_ERROR(ValidateDistEnv(env));
  auto impl = std::make_unique<Communicator::Impl>();
  impl->rank = env.rank;
  impl->size = env.world_size;
  impl->global_ranks.resize(env.world_size);
  std::iota(impl->global_ranks.begin(), impl->global_ranks.end(), 0);
  impl->options = options;
  impl->rendezvous = absl::StrCat(env.master_addr, ":", env.master_port);
  if (env.world_size == 1)
    return std::make_shared<Communicator>(std::move(impl));

  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<uint16_t>(env.master_port);
  store_options.isServer = env.rank == 0;
  store_options.numWorkers = env.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = options.init_timeout;
  try {
    auto tcp =
        c10::make_intrusive<c10d::TCPStore>(env.master_addr, store_options);
    impl->store = c10::make_intrusive<c10d::PrefixStore>("world", tcp);
    impl->device = MakeGlooDevice(env.master_addr);
  } catch (const std::exception& e) {
    const c10::Error* c10_error = dynamic_cast<const c10::Error*>(&e);
    std::string what =
        c10_error ? c10_error->what_without_backtrace() : e.what();
    return absl::UnavailableError(absl::StrCat(
        "rank ", env.rank, ": cannot ", env.rank == 0 ? "host" : "reach",
        " the TCPStore at ", env.master_addr, ":", env.master_port, ": ",
        what.substr(0, what.find('\n'))));
  }
  return ConnectGroup(std::move(impl));
}

std::shared_ptr<Communicator> SingleProcessCommunicator() {
  return std::make_shared<Communicator>(std::make_unique<Communicator::Impl>());
}

}  // namespace verl::parallel
