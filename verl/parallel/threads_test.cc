// File: verl/parallel/threads_test.cc
#include "verl/parallel/threads.h"

#include <ATen/Parallel.h>
#include <stdlib.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

TEST(ThreadsTest, ResolutionOrder) {
  // Explicit configuration wins over everything.
  EXPECT_EQ(*ResolveIntraOpThreads(3, "8", 16, 2), 3);
  // Then OMP_NUM_THREADS.
  EXPECT_EQ(*ResolveIntraOpThreads(0, "8", 16, 2), 8);
  // Then hardware threads shared by the local workers, at least one.
  EXPECT_EQ(*ResolveIntraOpThreads(0, std::nullopt, 16, 4), 4);
  EXPECT_EQ(*ResolveIntraOpThreads(0, std::nullopt, 2, 4), 1);
  EXPECT_EQ(*ResolveIntraOpThreads(-1, std::nullopt, 6, 1), 6);
}

TEST(ThreadsTest, MalformedOmpNumThreads) {
  for (const char* bad : {"", "zero", "0", "-2", "4x"}) {
    auto threads = ResolveIntraOpThreads(0, std::string(bad), 4, 1);
    ASSERT_THAT(threads, StatusIs(absl::StatusCode::kInvalidArgument,
                                  "environment variable"))
        << bad;
    EXPECT_NE(threads.status().message().find("OMP_NUM_THREADS"),
              std::string::npos);
  }
}

TEST(ThreadsTest, SetsLibTorchThreadCount) {
  ::unsetenv("OMP_NUM_THREADS");
  auto threads = SetIntraOpThreads(2, 1);
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_EQ(*threads, 2);
  EXPECT_EQ(at::get_num_threads(), 2);
  ::setenv("OMP_NUM_THREADS", "3", 1);
  threads = SetIntraOpThreads(0, 1);
  ASSERT_TRUE(threads.ok()) << threads.status();
  EXPECT_EQ(at::get_num_threads(), 3);
  ::setenv("OMP_NUM_THREADS", "bad", 1);
  EXPECT_THAT(SetIntraOpThreads(0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "environment variable OMP_NUM_THREADS='bad' is not a"));
  EXPECT_EQ(at::get_num_threads(), 3);  // Unchanged on error.
}

}  // namespace
}  // namespace verl::parallel
