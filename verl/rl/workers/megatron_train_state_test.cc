// File: verl/rl/workers/megatron_train_state_test.cc
//
// MegatronTrainState against single-process AdamW (ReplicatedTrainState):
// runs :megatron_train_state_worker over loopback, which checks 3 steps of
// grad norms (clipping active) and parameters to 1e-5 relative, the
// distributed optimizer's per-rank state size, and exact resume from a
// saved shard; see the worker for details.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/parallel/test_worker.h"

namespace verl::rl {
namespace {

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker(
      "verl/rl/workers/testing/megatron_train_state_worker", nproc, args);
}

TEST(MegatronTrainStateTest, DistributedOptimizerDp2Tp2MatchesOneProcess) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--distributed=true"}), 0);
}

TEST(MegatronTrainStateTest, ReplicatedOptimizerTp2MatchesOneProcess) {
  EXPECT_EQ(RunWorker(2, {"--tp=2", "--distributed=false"}), 0);
}

}  // namespace
}  // namespace verl::rl
