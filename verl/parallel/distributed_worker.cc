// File: verl/parallel/distributed_worker.cc
//
// Test worker for distributed_test: started with --nproc_per_node=N it
// launches itself N times (verl::parallel::MaybeLaunch) and every rank runs
// one scenario against closed-form expectations:
//   all          every collective, DeviceMesh sub-groups, Batch scatter/gather
//   smoke        one all_reduce and a barrier
//   die          rank 1 exits with code 3 after the first collective
//   timeout      rank 1 skips an all_reduce (and sleeps): the others time out
// Each rank prints "rank R: <scenario> OK" or "rank R FAILED: <status>" and
// exits non-zero on failure.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "verl/core/batch.h"
#include "verl/core/status.h"
#include "verl/parallel/batch_comm.h"
#include "verl/parallel/device_mesh.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/launcher_flags.h"
#include "verl/parallel/process_group.h"

ABSL_FLAG(std::string, scenario, "all", "all | smoke | die | timeout");
ABSL_FLAG(int, timeout_ms, 60000, "Collective timeout.");

namespace verl::parallel {
namespace {

using core::Batch;

// Streams anything printable (tensors, statuses, shapes) into a string.
template <typename... Args>
std::string Fmt(const Args&... args) {
  std::ostringstream out;
  ((out << args << " "), ...);
  return out.str();
}

// Fails the scenario; main() prints the message with this rank.
#define WORKER_EXPECT(cond, ...)                              \
  do {                                                        \
    if (!(cond)) {                                            \
      return absl::InternalError("check failed: " #cond " " + \
                                 Fmt(__VA_ARGS__));           \
    }                                                         \
  } while (0)

bool Same(const at::Tensor& a, const at::Tensor& b) {
  return a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         at::equal(a, b);
}

absl::Status CheckAllReduce(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  const double tri = w * (w + 1) / 2.0;  // sum of (rank + 1)
  at::Tensor t = at::full({3}, r + 1.0, at::kFloat);
  VERL_RETURN_IF_ERROR(comm.AllReduce(t, ReduceOp::kSum));
  WORKER_EXPECT(Same(t, at::full({3}, tri, at::kFloat)), t);
  // A non-contiguous view is reduced in place.
  at::Tensor base = at::arange(6, at::kDouble).reshape({2, 3});
  at::Tensor view = (base * (r + 1)).t();
  VERL_RETURN_IF_ERROR(comm.AllReduce(view, ReduceOp::kSum));
  WORKER_EXPECT(Same(view, (base * tri).t()), view);
  at::Tensor avg = at::full({2}, static_cast<double>(r), at::kDouble);
  VERL_RETURN_IF_ERROR(comm.AllReduce(avg, ReduceOp::kAvg));
  WORKER_EXPECT(Same(avg, at::full({2}, (w - 1) / 2.0, at::kDouble)), avg);
  at::Tensor mx = at::tensor({r, -r}, at::kLong);
  VERL_RETURN_IF_ERROR(comm.AllReduce(mx, ReduceOp::kMax));
  WORKER_EXPECT(Same(mx, at::tensor({w - 1, 0}, at::kLong)), mx);
  at::Tensor mn = at::tensor({r, -r}, at::kInt);
  VERL_RETURN_IF_ERROR(comm.AllReduce(mn, ReduceOp::kMin));
  WORKER_EXPECT(Same(mn, at::tensor({0, -(w - 1)}, at::kInt)), mn);
  at::Tensor ints = at::full({4}, r, at::kLong);
  absl::Status bad_avg = comm.AllReduce(ints, ReduceOp::kAvg);
  WORKER_EXPECT(bad_avg.code() == absl::StatusCode::kInvalidArgument, bad_avg);
  return absl::OkStatus();
}

absl::Status CheckAllGather(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  VERL_ASSIGN_OR_RETURN(auto equal,
                        comm.AllGather(at::full({2, 3}, r, at::kFloat)));
  WORKER_EXPECT(static_cast<int>(equal.size()) == w, equal.size());
  for (int j = 0; j < w; ++j) {
    WORKER_EXPECT(Same(equal[j], at::full({2, 3}, j, at::kFloat)), j);
  }
  // bfloat16 (not a Gloo type) arrives bit-exact.
  VERL_ASSIGN_OR_RETURN(auto bf16,
                        comm.AllGather(at::full({3}, r + 0.5, at::kBFloat16)));
  for (int j = 0; j < w; ++j) {
    WORKER_EXPECT(Same(bf16[j], at::full({3}, j + 0.5, at::kBFloat16)), j);
  }
  // Unequal dim 0: rank j contributes j + 1 rows of value j.
  VERL_ASSIGN_OR_RETURN(auto ragged,
                        comm.AllGather(at::full({r + 1, 2}, r, at::kInt)));
  for (int j = 0; j < w; ++j) {
    WORKER_EXPECT(Same(ragged[j], at::full({j + 1, 2}, j, at::kInt)), j);
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor cat,
                        comm.AllGatherCat(at::full({r + 1}, r, at::kLong)));
  WORKER_EXPECT(cat.size(0) == w * (w + 1) / 2, cat.sizes());
  WORKER_EXPECT(
      cat.sum().item<int64_t>() ==
          [&] {
            int64_t s = 0;
            for (int j = 0; j < w; ++j) s += j * (j + 1);
            return s;
          }(),
      cat);
  if (w == 1) return absl::OkStatus();
  // Mismatched trailing shapes are reported on every rank, no hang.
  auto mismatch = comm.AllGather(at::zeros({1, r == 0 ? 3 : 2}, at::kFloat));
  WORKER_EXPECT(mismatch.status().code() == absl::StatusCode::kInvalidArgument,
                mismatch.status());
  return absl::OkStatus();
}

absl::Status CheckReduceScatter(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  const double tri = w * (w + 1) / 2.0;
  at::Tensor base = at::arange(w * 2 * 3, at::kFloat).reshape({w * 2, 3});
  at::Tensor mine = base.narrow(0, 2 * r, 2);
  VERL_ASSIGN_OR_RETURN(at::Tensor sum,
                        comm.ReduceScatter(base * (r + 1), ReduceOp::kSum));
  WORKER_EXPECT(Same(sum, mine * tri), sum);
  VERL_ASSIGN_OR_RETURN(at::Tensor mx,
                        comm.ReduceScatter(base * (r + 1), ReduceOp::kMax));
  WORKER_EXPECT(Same(mx, mine * w), mx);
  VERL_ASSIGN_OR_RETURN(at::Tensor mn,
                        comm.ReduceScatter(base * (r + 1), ReduceOp::kMin));
  WORKER_EXPECT(Same(mn, mine), mn);
  VERL_ASSIGN_OR_RETURN(at::Tensor avg,
                        comm.ReduceScatter(base * (r + 1), ReduceOp::kAvg));
  WORKER_EXPECT(at::allclose(avg, mine * (tri / w)), avg);
  at::Tensor ints = at::full({w, 2}, r + 1, at::kLong);
  VERL_ASSIGN_OR_RETURN(at::Tensor isum, comm.ReduceScatter(ints));
  WORKER_EXPECT(
      Same(isum, at::full({1, 2}, static_cast<int64_t>(tri), at::kLong)), isum);
  if (w == 1) return absl::OkStatus();
  auto odd = comm.ReduceScatter(at::zeros({w * 2 + 1}, at::kFloat));
  WORKER_EXPECT(odd.status().code() == absl::StatusCode::kInvalidArgument,
                odd.status());
  return absl::OkStatus();
}

absl::Status CheckBroadcastAllToAll(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  const int root = w - 1;
  at::Tensor b =
      r == root ? at::arange(5, at::kLong) * 7 : at::zeros({5}, at::kLong);
  VERL_RETURN_IF_ERROR(comm.Broadcast(b, root));
  WORKER_EXPECT(Same(b, at::arange(5, at::kLong) * 7), b);
  WORKER_EXPECT(!comm.Broadcast(b, w).ok(), "root out of range accepted");
  at::Tensor h = at::full({4}, r == root ? 1.25 : 0.0, at::kBFloat16);
  VERL_RETURN_IF_ERROR(comm.Broadcast(h, root));
  WORKER_EXPECT(Same(h, at::full({4}, 1.25, at::kBFloat16)), h);

  // Equal splits: row i of rank r holds r * 1000 + i; rank r receives rows
  // [2r, 2r + 2) of every rank j.
  at::Tensor in = at::arange(2 * w, at::kLong) + r * 1000;
  std::vector<int64_t> recv_splits;
  VERL_ASSIGN_OR_RETURN(at::Tensor out, comm.AllToAll(in, {}, &recv_splits));
  for (int j = 0; j < w; ++j) {
    WORKER_EXPECT(Same(out.narrow(0, 2 * j, 2),
                       at::arange(2, at::kLong) + (j * 1000 + 2 * r)),
                  j, out);
    WORKER_EXPECT(recv_splits[j] == 2, recv_splits[j]);
  }
  // Unequal splits (some empty): rank r sends (r + j) % 3 rows valued
  // r * 1000 + j * 100 + k to rank j.
  std::vector<int64_t> send_splits;
  std::vector<at::Tensor> pieces;
  for (int j = 0; j < w; ++j) {
    const int64_t rows = (r + j) % 3;
    send_splits.push_back(rows);
    pieces.push_back(
        at::stack({at::arange(rows, at::kLong) + (r * 1000 + j * 100),
                   at::full({rows}, r, at::kLong)},
                  1));
  }
  VERL_ASSIGN_OR_RETURN(
      at::Tensor got,
      comm.AllToAll(at::cat(pieces, 0), send_splits, &recv_splits));
  int64_t offset = 0;
  for (int j = 0; j < w; ++j) {
    const int64_t rows = (j + r) % 3;
    WORKER_EXPECT(recv_splits[j] == rows, j, " ", recv_splits[j]);
    at::Tensor expect =
        at::stack({at::arange(rows, at::kLong) + (j * 1000 + r * 100),
                   at::full({rows}, j, at::kLong)},
                  1);
    WORKER_EXPECT(Same(got.narrow(0, offset, rows), expect), j, got);
    offset += rows;
  }
  WORKER_EXPECT(offset == got.size(0), got.sizes());
  return absl::OkStatus();
}

absl::Status CheckSendRecvBarrier(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  const int next = (r + 1) % w, prev = (r + w - 1) % w;
  at::Tensor out = at::full({4}, r * 10.0, at::kFloat);
  at::Tensor in = at::empty({4}, at::kFloat);
  // Even ranks send first, odd ranks receive first: no cycle of waits.
  if (r % 2 == 0) {
    VERL_RETURN_IF_ERROR(comm.Send(out, next, /*tag=*/5));
    VERL_RETURN_IF_ERROR(comm.Recv(in, prev, /*tag=*/5));
  } else {
    VERL_RETURN_IF_ERROR(comm.Recv(in, prev, /*tag=*/5));
    VERL_RETURN_IF_ERROR(comm.Send(out, next, /*tag=*/5));
  }
  WORKER_EXPECT(Same(in, at::full({4}, prev * 10.0, at::kFloat)), in);
  VERL_RETURN_IF_ERROR(comm.Barrier());
  return absl::OkStatus();
}

absl::Status CheckMesh(std::shared_ptr<Communicator> world) {
  const int w = world->size(), r = world->rank();
  const int dp = w == 4 ? 2 : 1, sp = w / dp;
  VERL_ASSIGN_OR_RETURN(DeviceMesh mesh,
                        DeviceMesh::Create(world, {{"dp", dp}, {"sp", sp}}));
  VERL_ASSIGN_OR_RETURN(int my_dp, mesh.Coordinate("dp"));
  VERL_ASSIGN_OR_RETURN(int my_sp, mesh.Coordinate("sp"));
  WORKER_EXPECT(my_dp == r / sp && my_sp == r % sp, my_dp, my_sp);
  VERL_ASSIGN_OR_RETURN(auto sp_group, mesh.Get("sp"));
  VERL_ASSIGN_OR_RETURN(auto dp_group, mesh.Get("dp"));
  WORKER_EXPECT(sp_group->size() == sp && sp_group->rank() == my_sp, "sp");
  WORKER_EXPECT(dp_group->size() == dp && dp_group->rank() == my_dp, "dp");
  at::Tensor t = at::full({1}, r, at::kLong);
  VERL_RETURN_IF_ERROR(sp_group->AllReduce(t));
  WORKER_EXPECT(t.item<int64_t>() == my_dp * sp * sp + sp * (sp - 1) / 2, t);
  t.fill_(r);
  VERL_RETURN_IF_ERROR(dp_group->AllReduce(t));
  WORKER_EXPECT(t.item<int64_t>() == sp * dp * (dp - 1) / 2 + dp * my_sp, t);
  VERL_ASSIGN_OR_RETURN(auto gathered,
                        sp_group->AllGatherCat(at::full({1}, r, at::kLong)));
  WORKER_EXPECT(Same(gathered, at::arange(sp, at::kLong) + my_dp * sp),
                gathered);
  // Flattened dims: major-to-minor order decides the group ranks.
  VERL_ASSIGN_OR_RETURN(auto flat, mesh.Flatten({"dp", "sp"}, "dp_sp"));
  WORKER_EXPECT(flat->size() == w && flat->rank() == r, flat->rank());
  VERL_ASSIGN_OR_RETURN(auto swapped, mesh.Flatten({"sp", "dp"}, "sp_dp"));
  WORKER_EXPECT(swapped->rank() == my_sp * dp + my_dp, swapped->rank());
  t.fill_(1);
  VERL_RETURN_IF_ERROR(swapped->AllReduce(t));
  WORKER_EXPECT(t.item<int64_t>() == w, t);
  return absl::OkStatus();
}

// The batch every rank can build: `rows` rows starting at row `first`.
Batch MakeBatch(int64_t first, int64_t rows) {
  std::vector<Batch::Json> uids;
  for (int64_t i = first; i < first + rows; ++i) {
    uids.push_back("u" + std::to_string(i));
  }
  at::Tensor ids = at::arange(first, first + rows, at::kLong);
  auto batch = Batch::FromColumns(
      {{"x", (ids.to(at::kFloat) * 0.5).unsqueeze(1).repeat({1, 2})},
       {"ids", ids * 10}},
      {{"uid", uids}}, {{"step", 5}});
  VERL_CHECK_OK(batch.status());
  return *batch;
}

absl::Status CheckBatch(Communicator& comm) {
  const int w = comm.size(), r = comm.rank();
  const int64_t per_rank = 3;
  Batch full = MakeBatch(0, per_rank * w);
  VERL_ASSIGN_OR_RETURN(Batch mine,
                        ScatterBatch(comm, r == 0 ? full : Batch(), 0));
  WORKER_EXPECT(mine.Equal(MakeBatch(per_rank * r, per_rank)),
                mine.DebugString());
  VERL_ASSIGN_OR_RETURN(Batch local, LocalChunk(comm, full));
  WORKER_EXPECT(local.Equal(mine), local.DebugString());
  // Round trip: gather the scattered parts back.
  VERL_ASSIGN_OR_RETURN(Batch back, GatherBatch(comm, mine));
  WORKER_EXPECT(back.Equal(full), back.DebugString());
  // Unequal parts: rank j holds j + 1 rows; the gather is in rank order.
  int64_t first = 0;
  for (int j = 0; j < r; ++j) first += j + 1;
  VERL_ASSIGN_OR_RETURN(Batch all, GatherBatch(comm, MakeBatch(first, r + 1)));
  WORKER_EXPECT(all.Equal(MakeBatch(0, w * (w + 1) / 2)), all.DebugString());
  if (w == 1) return absl::OkStatus();
  // The root cannot chunk 3w + 1 rows: every rank gets an error, no hang.
  auto bad =
      ScatterBatch(comm, r == 0 ? MakeBatch(0, per_rank * w + 1) : Batch(), 0);
  WORKER_EXPECT(!bad.ok(), "odd scatter accepted");
  return absl::OkStatus();
}

absl::Status RunAll(std::shared_ptr<Communicator> world) {
  VERL_RETURN_IF_ERROR(CheckAllReduce(*world));
  VERL_RETURN_IF_ERROR(CheckAllGather(*world));
  VERL_RETURN_IF_ERROR(CheckReduceScatter(*world));
  VERL_RETURN_IF_ERROR(CheckBroadcastAllToAll(*world));
  if (world->size() > 1) VERL_RETURN_IF_ERROR(CheckSendRecvBarrier(*world));
  VERL_RETURN_IF_ERROR(CheckMesh(world));
  VERL_RETURN_IF_ERROR(CheckBatch(*world));
  return absl::OkStatus();
}

absl::Status RunScenario(const std::string& scenario,
                         std::shared_ptr<Communicator> world) {
  if (scenario == "all") return RunAll(world);
  at::Tensor t = at::ones({8}, at::kFloat);
  if (scenario == "smoke") {
    VERL_RETURN_IF_ERROR(world->AllReduce(t));
    WORKER_EXPECT(Same(t, at::full({8}, world->size(), at::kFloat)), t);
    return world->Barrier();
  }
  if (scenario == "die") {
    VERL_RETURN_IF_ERROR(world->AllReduce(t));
    if (world->rank() == 1) {
      std::fprintf(stderr, "rank 1: exiting with code 3 on purpose\n");
      std::exit(3);
    }
    // The survivors block here until the launcher stops them.
    for (int i = 0; i < 100; ++i) VERL_RETURN_IF_ERROR(world->AllReduce(t));
    return absl::InternalError("collectives kept working without rank 1");
  }
  if (scenario == "timeout") {
    VERL_RETURN_IF_ERROR(world->Barrier());
    if (world->rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
      return absl::OkStatus();
    }
    return world->AllReduce(t);
  }
  return absl::InvalidArgumentError("unknown --scenario=" + scenario);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto launch = MaybeLaunch(argc, argv, LaunchOptionsFromFlags());
  if (!launch.ok()) {
    std::fprintf(stderr, "launcher error: %s\n",
                 launch.status().ToString().c_str());
    return 1;
  }
  if (!launch->is_worker) return launch->exit_code;
  DistributedOptions options;
  options.intra_op_threads = 1;
  options.process_group.timeout =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  options.process_group.init_timeout = std::chrono::seconds(60);
  auto dist = InitDistributed(options);
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const int rank = dist.ok() ? dist->env.rank : -1;
  absl::Status status =
      dist.ok() ? RunScenario(scenario, dist->world) : dist.status();
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d FAILED: %s\n", rank,
                 status.ToString().c_str());
    return 1;
  }
  std::printf("rank %d: %s OK (world %d)\n", rank, scenario.c_str(),
              dist->world->size());
  return 0;
}
}  // namespace
}  // namespace verl::parallel

int main(int argc, char** argv) { return verl::parallel::Main(argc, argv); }
