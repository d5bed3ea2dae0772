// File: verl/parallel/distributed_init_test.cc
#include <ATen/Parallel.h>
#include <stdlib.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/parallel/distributed.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

TEST(InitDistributedTest, SingleProcessDefaults) {
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ::setenv("OMP_NUM_THREADS", "2", 1);
  auto dist = InitDistributed();
  ASSERT_TRUE(dist.ok()) << dist.status();
  EXPECT_EQ(dist->env.world_size, 1);
  EXPECT_EQ(dist->world->size(), 1);
  EXPECT_EQ(dist->intra_op_threads, 2);
  EXPECT_EQ(at::get_num_threads(), 2);
}

TEST(InitDistributedTest, BadEnvironmentIsAnError) {
  ::setenv("RANK", "3", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  auto dist = InitDistributed();
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ASSERT_THAT(
      dist, StatusIs(absl::StatusCode::kInvalidArgument,
                     "distributed environment (torchrun): RANK=3 is outside"));
  EXPECT_NE(dist.status().message().find("RANK=3"), std::string::npos);
}

}  // namespace
}  // namespace verl::parallel
