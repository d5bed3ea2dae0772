// File: verl/infer/block_allocator_test.cc
#include "verl/infer/block_allocator.h"

#include <gtest/gtest.h>

#include <set>

namespace verl::infer {
namespace {

TEST(BlockAllocatorTest, AllocatesEveryBlockOnceThenRunsOut) {
  BlockAllocator a(5);
  std::set<BlockId> seen;
  for (int i = 0; i < 5; ++i) {
    auto b = a.Allocate();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(a.RefCount(*b), 1);
    EXPECT_TRUE(seen.insert(*b).second);
  }
  EXPECT_EQ(a.num_free(), 0);
  EXPECT_FALSE(a.Allocate().has_value());
}

TEST(BlockAllocatorTest, RefCountsAndFree) {
  BlockAllocator a(2);
  BlockId b = *a.Allocate();
  a.Ref(b);
  EXPECT_EQ(a.RefCount(b), 2);
  EXPECT_EQ(a.Unref(b), 1);
  EXPECT_EQ(a.Unref(b), 0);
  EXPECT_EQ(a.num_free(), 1);
  a.Free(b);
  EXPECT_EQ(a.num_free(), 2);
  EXPECT_DEATH(a.Free(b), "double free");
}

TEST(BlockAllocatorDeathTest, FreeOfReferencedBlockDies) {
  BlockAllocator a(1);
  BlockId b = *a.Allocate();
  EXPECT_DEATH(a.Free(b), "referenced");
}

}  // namespace
}  // namespace verl::infer
