// File: verl/core/heap_counter_test.cc
#include "verl/core/heap_counter.h"

#include <ATen/ops/empty.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

namespace verl::core::testing {
namespace {

TEST(HeapCounterTest, CountsEveryAllocator) {
  if (!HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  HeapCounter counter;
  auto p = std::make_unique<int[]>(10);  // operator new
  void* m = std::malloc(100);
  void* a = nullptr;
  ASSERT_EQ(posix_memalign(&a, 64, 256), 0);
  at::Tensor t = at::empty({1000}, at::kFloat);  // LibTorch's CPU allocator
  EXPECT_GE(counter.allocations(), 4);
  EXPECT_GE(counter.bytes(), 100 + 256 + 4000);
  std::free(m);
  std::free(a);
}

TEST(HeapCounterTest, ZeroWhenNothingAllocates) {
  if (!HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  std::vector<float> v;
  v.reserve(64);
  HeapCounter counter;
  for (int i = 0; i < 64; ++i) v.push_back(static_cast<float>(i));
  EXPECT_EQ(counter.allocations(), 0);
  v.push_back(1.0f);  // grows past the reserve
  EXPECT_EQ(counter.allocations(), 1);
}

TEST(HeapCounterTest, StopsCountingWhenDestroyed) {
  { HeapCounter counter; }
  HeapCounter counter;
  EXPECT_EQ(counter.allocations(), 0);
}

}  // namespace
}  // namespace verl::core::testing
