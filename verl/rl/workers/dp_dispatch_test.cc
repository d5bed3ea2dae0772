#include "verl/rl/workers/dp_dispatch.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "verl/core/test_util.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/process_group.h"

namespace verl::rl {
namespace {

using core::Batch;
using core::testing::StatusIs;

Batch Rows(int64_t n) {
  auto b = Batch::FromColumns({{"x", at::arange(n, at::kLong)}});
  EXPECT_TRUE(b.ok());
  return *b;
}

std::vector<int64_t> Ids(const Batch& b) {
  at::Tensor x = b.tensor("x").contiguous();
  return std::vector<int64_t>(x.data_ptr<int64_t>(),
                              x.data_ptr<int64_t>() + x.numel());
}

// Runs `fn(rank, comm)` on two in-process ranks joined over loopback.
void OnTwoRanks(const std::function<void(int, parallel::Communicator&)>& fn) {
  absl::StatusOr<int> port = parallel::PickFreePort();
  ASSERT_TRUE(port.ok());
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] {
      parallel::DistEnv env;
      env.rank = rank;
      env.world_size = 2;
      env.local_rank = rank;
      env.local_world_size = 2;
      env.master_port = *port;
      auto comm = parallel::InitProcessGroup(env);
      ASSERT_TRUE(comm.ok()) << comm.status();
      fn(rank, **comm);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(DpDispatchTest, OneRankCallsOnTheWholeBatch) {
  auto comm = parallel::SingleProcessCommunicator();
  int calls = 0;
  auto out = ShardedCall(*comm, Rows(5), [&](const Batch& b) {
    ++calls;
    return absl::StatusOr<Batch>(b);
  });
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(Ids(*out), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(DpDispatchTest, UpdateShardRejectsSizesThatDoNotSplit) {
  auto comm = parallel::SingleProcessCommunicator();
  EXPECT_THAT(UpdateShard(*comm, Rows(6), 4),
              StatusIs(absl::StatusCode::kInvalidArgument, "mini-batch of 4"));
  EXPECT_THAT(UpdateShard(*comm, Rows(6), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, "mini-batch of 0"));
}

// Two ranks: a 5-row batch is padded to 6, each rank computes on 3 rows, and
// the gathered result is the whole batch in row order again.
TEST(DpDispatchTest, ShardedCallGathersInRowOrderOverTwoRanks) {
  std::vector<std::vector<int64_t>> seen(2), gathered(2);
  OnTwoRanks([&](int rank, parallel::Communicator& comm) {
    auto out = ShardedCall(
        comm, Rows(5), [&](const Batch& local) -> absl::StatusOr<Batch> {
          seen[rank] = Ids(local);
          return Batch::FromColumns({{"x", local.tensor("x") * 2}});
        });
    ASSERT_TRUE(out.ok()) << out.status();
    gathered[rank] = Ids(*out);
  });
  EXPECT_EQ(seen[0], (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(seen[1].size(), 3u);
  EXPECT_EQ(seen[1][0], 3);
  EXPECT_EQ(gathered[0], (std::vector<int64_t>{0, 2, 4, 6, 8}));
  EXPECT_EQ(gathered[1], gathered[0]);
}

// Mini-batches first, then ranks: with mini-batches of 4 rows, rank 0 holds
// rows {0,1} of each mini-batch and rank 1 rows {2,3}.
TEST(DpDispatchTest, UpdateShardCutsMiniBatchesBeforeRanks) {
  std::vector<std::vector<int64_t>> got(2);
  OnTwoRanks([&](int rank, parallel::Communicator& comm) {
    auto local = UpdateShard(comm, Rows(8), 4);
    ASSERT_TRUE(local.ok()) << local.status();
    got[rank] = Ids(*local);
  });
  EXPECT_EQ(got[0], (std::vector<int64_t>{0, 1, 4, 5}));
  EXPECT_EQ(got[1], (std::vector<int64_t>{2, 3, 6, 7}));
}

}  // namespace
}  // namespace verl::rl
