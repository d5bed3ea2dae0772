// File: verl/parallel/megatron/megatron_test.cc
//
// Runs :megatron_worker as 2 and 4 processes over loopback. The worker
// checks the parallel-state groups by all-reducing over each of them, then
// compares every output and gradient of the tensor-parallel mappings, layers
// and vocab-parallel losses with its single-process reference (<= 1e-5
// relative); it exits non-zero on a mismatch.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/parallel/test_worker.h"

namespace verl::parallel::megatron {
namespace {

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker("verl/parallel/megatron/megatron_worker",
                                 nproc, args);
}

// World 4 as tp 2 x pp 2 with expert groups etp 1 x ep 2 (the layers over
// tp 2 inside a larger world), and as tp 4.
TEST(MegatronParallelTest, GroupsAndLayersMatchSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--tp=2", "--pp=2", "--ep=2", "--etp=1"}), 0);
  EXPECT_EQ(RunWorker(4, {"--tp=4"}), 0);
}

}  // namespace
}  // namespace verl::parallel::megatron
