// File: verl/core/parallel_for_test.cc
#include "verl/core/parallel_for.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace verl::core {
namespace {

// Every index is visited exactly once, in contiguous chunks of >= grain.
TEST(ParallelForTest, CoversTheRangeOnce) {
  for (int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    for (int64_t n : {0, 1, 5, 64, 1001}) {
      for (int64_t grain : {1, 7, 2000}) {
        std::vector<std::atomic<int>> hits(n);
        ParallelFor(0, n, grain, [&](int64_t b, int64_t e) {
          EXPECT_LT(b, e);
          if (e < n) EXPECT_GE(e - b, grain);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) {
          ASSERT_EQ(hits[i].load(), 1) << "n " << n << " grain " << grain;
        }
      }
    }
  }
}

// With two intra-op threads a range of two chunks runs on two threads at
// the same time (at::parallel_for compiled without -fopenmp runs it as one
// chunk on the caller): each chunk waits until the other has started.
TEST(ParallelForTest, RunsChunksOnSeveralThreads) {
  at::set_num_threads(2);
  ASSERT_EQ(at::get_num_threads(), 2);
  std::atomic<int> started{0};
  std::mutex mu;
  std::set<std::thread::id> ids;
  int chunks = 0;
  ParallelFor(0, 2, 1, [&](int64_t b, int64_t e) {
    {
      std::lock_guard<std::mutex> lock(mu);
      ids.insert(std::this_thread::get_id());
      ++chunks;
    }
    started++;
    for (int spin = 0; started.load() < 2 && spin < 2000; ++spin) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  EXPECT_EQ(chunks, 2);
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(started.load(), 2);
}

}  // namespace
}  // namespace verl::core
