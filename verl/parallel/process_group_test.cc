// File: verl/parallel/process_group_test.cc
//
// World-size-1 semantics and argument validation of Communicator,
// DeviceMesh and the Batch helpers (no store, no network). The 2- and
// 4-rank behaviour is covered by distributed_test.
#include "verl/parallel/process_group.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <numeric>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/parallel/batch_comm.h"
#include "verl/parallel/device_mesh.h"

namespace verl::parallel {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& status) {
  return std::string(status.message());
}

TEST(ProcessGroupTest, WorldOfOneNeedsNoStore) {
  DistEnv env;  // rank 0 of 1; nothing listens on the master port.
  env.master_port = 1;
  auto world = InitProcessGroup(env);
  ASSERT_TRUE(world.ok()) << world.status();
  EXPECT_EQ((*world)->rank(), 0);
  EXPECT_EQ((*world)->size(), 1);
  EXPECT_EQ((*world)->name(), "world");
  EXPECT_EQ((*world)->global_ranks(), std::vector<int>{0});
}

// A free TCP port on the loopback interface.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Rank 0 of 3 with nobody else coming: it logs whom it waits for every
// second or so, then fails with one line naming the address and the ranks.
TEST(ProcessGroupTest, RendezvousSaysWhoIsMissingThenTimesOut) {
  DistEnv env;
  env.world_size = 3;
  env.local_world_size = 3;
  env.master_port = FreePort();
  ProcessGroupOptions options;
  options.init_timeout = std::chrono::milliseconds(2500);
  ::testing::internal::CaptureStderr();
  auto world = InitProcessGroup(env, options);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_FALSE(world.ok());
  EXPECT_EQ(world.status().code(), absl::StatusCode::kDeadlineExceeded);
  const std::string at = absl::StrCat("127.0.0.1:", env.master_port);
  EXPECT_THAT(Message(world.status()),
              HasSubstr(absl::StrCat("rendezvous at ", at,
                                     " timed out after 2.5s: 1 of 3 ranks "
                                     "joined, ranks 1..2 never came")));
  EXPECT_EQ(Message(world.status()).find('\n'), std::string::npos);
  EXPECT_THAT(err, HasSubstr(absl::StrCat("waiting for ranks 1..2 at ", at,
                                          ", 1 of 3 joined")));
}

TEST(ProcessGroupTest, SingleProcessCollectivesAreIdentities) {
  auto comm = SingleProcessCommunicator();
  at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3});
  at::Tensor copy = t.clone();
  for (ReduceOp op :
       {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kMin}) {
    ASSERT_TRUE(comm->AllReduce(t, op).ok()) << ReduceOpName(op);
    EXPECT_TRUE(at::equal(t, copy));
  }
  auto gathered = comm->AllGather(t);
  ASSERT_TRUE(gathered.ok());
  ASSERT_EQ(gathered->size(), 1u);
  EXPECT_TRUE(at::equal((*gathered)[0], t));
  auto scattered = comm->ReduceScatter(t);
  ASSERT_TRUE(scattered.ok());
  EXPECT_TRUE(at::equal(*scattered, t));
  std::vector<int64_t> recv;
  auto a2a = comm->AllToAll(t, {2}, &recv);
  ASSERT_TRUE(a2a.ok()) << a2a.status();
  EXPECT_TRUE(at::equal(*a2a, t));
  EXPECT_EQ(recv, std::vector<int64_t>{2});
  EXPECT_TRUE(comm->Broadcast(t, 0).ok());
  EXPECT_TRUE(comm->Barrier().ok());
}

TEST(ProcessGroupTest, ArgumentErrorsNameRankAndOp) {
  auto comm = SingleProcessCommunicator();
  at::Tensor ints = at::ones({4}, at::kLong);
  absl::Status avg = comm->AllReduce(ints, ReduceOp::kAvg);
  EXPECT_EQ(avg.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(avg),
              HasSubstr("rank 0 (group 'world' rank 0/1): all_reduce: avg "
                        "needs a floating dtype"));
  at::Tensor scalar = at::ones({}, at::kFloat);
  EXPECT_THAT(Message(comm->AllGather(scalar).status()),
              HasSubstr("all_gather: tensor has no dim 0"));
  EXPECT_THAT(Message(comm->AllToAll(ints, {1, 2}).status()),
              HasSubstr("send_splits [1, 2] must be 1 non-negative row counts "
                        "summing to 4"));
  EXPECT_THAT(Message(comm->Broadcast(ints, 1)),
              HasSubstr("broadcast: root 1 is outside [0, 1)"));
  EXPECT_THAT(Message(comm->Send(ints, 0)),
              HasSubstr("send: peer 0 is not another member"));
  EXPECT_THAT(Message(comm->Recv(ints, 3)),
              HasSubstr("recv: peer 3 is not another member"));
  EXPECT_THAT(Message(comm->NewGroup({0, 0}, "g").status()),
              HasSubstr("must be distinct members of [0, 1)"));
  EXPECT_THAT(Message(comm->NewGroup({0}, "a/b").status()),
              HasSubstr("bad group name 'a/b'"));
}

TEST(ProcessGroupTest, NewGroupOfOne) {
  auto comm = SingleProcessCommunicator();
  auto group = comm->NewGroup({0}, "solo");
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_EQ((*group)->name(), "solo");
  EXPECT_EQ((*group)->size(), 1);
  at::Tensor t = at::ones({2});
  EXPECT_TRUE((*group)->AllReduce(t).ok());
}

TEST(DeviceMeshTest, ValidatesDims) {
  auto comm = SingleProcessCommunicator();
  EXPECT_THAT(Message(DeviceMesh::Create(comm, {{"dp", 2}}).status()),
              HasSubstr("sizes multiply to 2 but the communicator has 1"));
  EXPECT_THAT(
      Message(DeviceMesh::Create(comm, {{"dp", 1}, {"dp", 1}}).status()),
      HasSubstr("bad: 'dp'"));
  EXPECT_THAT(Message(DeviceMesh::Create(comm, {}).status()),
              HasSubstr("needs at least one dim"));
  EXPECT_THAT(Message(DeviceMesh::Create(comm, {{"tp", 0}}).status()),
              HasSubstr("dim 'tp' has size 0"));
}

TEST(DeviceMeshTest, CoordinatesAreRowMajor) {
  auto comm = SingleProcessCommunicator();
  auto mesh = DeviceMesh::Create(comm, {{"dp", 1}, {"tp", 1}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(*mesh->Coordinate("tp"), 0);
  EXPECT_EQ(mesh->Coordinate("pp").status().code(),
            absl::StatusCode::kNotFound);
  auto tp = mesh->Get("tp");
  ASSERT_TRUE(tp.ok());
  EXPECT_EQ((*tp)->size(), 1);
  auto flat = mesh->Flatten({"dp", "tp"}, "dp_tp");
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(mesh->Flatten({"dp"}, "dp_tp").status().code(),
            absl::StatusCode::kAlreadyExists);
}

TEST(DeviceMeshTest, GroupRanksMatchBruteForce) {
  // 2 x 3 x 2 grid: compare against a naive enumeration of coordinates.
  const MeshDims dims = {{"dp", 2}, {"tp", 3}, {"sp", 2}};
  std::vector<std::vector<int>> coords;
  for (int d = 0; d < 2; ++d)
    for (int t = 0; t < 3; ++t)
      for (int s = 0; s < 2; ++s) coords.push_back({d, t, s});
  for (int rank = 0; rank < 12; ++rank) {
    EXPECT_EQ(MeshCoordinates(dims, rank), coords[rank]);
    EXPECT_EQ(MeshRank(dims, coords[rank]), rank);
    // Group over "tp": same dp and sp, tp = 0, 1, 2.
    std::vector<int> tp_group;
    for (int t = 0; t < 3; ++t) {
      for (int other = 0; other < 12; ++other) {
        if (coords[other] ==
            std::vector<int>{coords[rank][0], t, coords[rank][2]}) {
          tp_group.push_back(other);
        }
      }
    }
    EXPECT_EQ(*MeshGroupRanks(dims, {"tp"}, rank), tp_group);
    // Group over ("sp", "dp"): sp most significant, same tp.
    std::vector<int> sp_dp;
    for (int s = 0; s < 2; ++s)
      for (int d = 0; d < 2; ++d)
        sp_dp.push_back(MeshRank(dims, {d, coords[rank][1], s}));
    EXPECT_EQ(*MeshGroupRanks(dims, {"sp", "dp"}, rank), sp_dp);
    std::vector<int> all(12);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(*MeshGroupRanks(dims, {"dp", "tp", "sp"}, rank), all);
  }
  EXPECT_EQ(MeshGroupRanks(dims, {"pp"}, 0).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MeshGroupRanks(dims, {"tp", "tp"}, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(BatchCommTest, SingleProcessScatterAndGather) {
  auto comm = SingleProcessCommunicator();
  auto batch = core::Batch::FromColumns({{"x", at::arange(4, at::kFloat)}},
                                        {{"uid", {"a", "b", "c", "d"}}});
  ASSERT_TRUE(batch.ok()) << batch.status();
  auto scattered = ScatterBatch(*comm, *batch);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  EXPECT_TRUE(scattered->Equal(*batch));
  auto gathered = GatherBatch(*comm, *batch);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_TRUE(gathered->Equal(*batch));
  auto chunk = LocalChunk(*comm, *batch);
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->Equal(*batch));
  EXPECT_THAT(Message(ScatterBatch(*comm, *batch, 2).status()),
              HasSubstr("scatter_batch: root 2 is outside [0, 1)"));
}

}  // namespace
}  // namespace verl::parallel
