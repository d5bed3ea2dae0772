// File: verl/rl/fsdp_train_state_test.cc
//
// Equivalence of FSDP training with the single-process replicated run:
// launches :fsdp_train_state_worker on 1, 2 and 4 ranks over loopback (the
// worker compares losses, grad norms, the gathered full state dict and the
// per-rank memory against its in-process reference and exits non-zero on a
// mismatch), with offload, gradient checkpointing and hybrid sharding.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "verl/parallel/launcher.h"

namespace verl::rl {
namespace {

int RunWorker(int nproc, const std::vector<std::string>& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string program =
      absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "verl",
                   "/verl/rl/fsdp_train_state_worker");
  parallel::LaunchOptions options;
  options.nproc_per_node = nproc;
  options.master_port = 0;
  auto code = parallel::RunWorkers(program, args, options);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

TEST(FsdpTrainStateTest, OneRankMatchesReplicated) {
  EXPECT_EQ(RunWorker(1, {}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksMatchReplicated) {
  EXPECT_EQ(RunWorker(2, {}), 0);
}

TEST(FsdpTrainStateTest, TwoRanksOffloadAndCheckpointing) {
  EXPECT_EQ(RunWorker(2, {"--offload", "--checkpointing"}), 0);
}

TEST(FsdpTrainStateTest, FourRanksFullyShardedAndHybrid) {
  EXPECT_EQ(RunWorker(4, {}), 0);
  EXPECT_EQ(RunWorker(4, {"--fsdp_size=2"}), 0);
}

}  // namespace
}  // namespace verl::rl
