// File: verl/infer/prefix_cache_test.cc
#include "verl/infer/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace verl::infer {
namespace {

TEST(PrefixCacheTest, HashChainDependsOnParentAndTokens) {
  std::vector<int64_t> a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  EXPECT_EQ(HashBlockTokens(0, a.data(), 4), HashBlockTokens(0, a.data(), 4));
  EXPECT_NE(HashBlockTokens(0, a.data(), 4), HashBlockTokens(0, b.data(), 4));
  EXPECT_NE(HashBlockTokens(0, a.data(), 4), HashBlockTokens(7, a.data(), 4));
}

TEST(PrefixCacheTest, HitSharesBlockAndCounts) {
  PrefixCache c(4, /*enabled=*/true);
  std::vector<int64_t> t = {9, 8, 7, 6};
  const uint64_t h = HashBlockTokens(0, t.data(), 4);
  BlockId b = *c.Allocate();
  EXPECT_FALSE(c.Acquire(h, t.data(), 4).has_value());  // miss
  c.Insert(b, h, t.data(), 4);
  auto hit = c.Acquire(h, t.data(), 4);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(*hit, b);
  EXPECT_EQ(c.RefCount(b), 2);
  EXPECT_EQ(c.stats().queried_blocks, 2);
  EXPECT_EQ(c.stats().hit_blocks, 1);
  EXPECT_DOUBLE_EQ(c.stats().HitRate(), 0.5);
  // Same hash, different tokens (a forced collision) is a miss.
  std::vector<int64_t> other = {1, 1, 1, 1};
  EXPECT_FALSE(c.Acquire(h, other.data(), 4).has_value());
}

TEST(PrefixCacheTest, UnreferencedCachedBlocksStayUntilEvictedInLruOrder) {
  PrefixCache c(3, true);
  std::vector<std::vector<int64_t>> toks = {{1, 1}, {2, 2}, {3, 3}};
  std::vector<uint64_t> h;
  std::vector<BlockId> blocks;
  for (auto& t : toks) {
    h.push_back(HashBlockTokens(0, t.data(), 2));
    blocks.push_back(*c.Allocate());
    c.Insert(blocks.back(), h.back(), t.data(), 2);
  }
  // Release in order 1, 0, 2: LRU order is 1, 0, 2.
  c.Release(blocks[1]);
  c.Release(blocks[0]);
  c.Release(blocks[2]);
  EXPECT_EQ(c.NumAvailable(), 3);
  EXPECT_EQ(c.NumEvictable(), 3);
  // Re-acquiring block 0 takes it off the LRU.
  ASSERT_TRUE(c.Acquire(h[0], toks[0].data(), 2).has_value());
  EXPECT_EQ(c.NumEvictable(), 2);
  // Allocation evicts the least recently released: block 1, then 2.
  EXPECT_EQ(*c.Allocate(), blocks[1]);
  EXPECT_FALSE(c.Acquire(h[1], toks[1].data(), 2).has_value());
  EXPECT_EQ(*c.Allocate(), blocks[2]);
  EXPECT_FALSE(c.Allocate().has_value());  // block 0 is referenced
  EXPECT_EQ(c.stats().evictions, 2);
  EXPECT_TRUE(c.IsCached(blocks[0]));
}

TEST(PrefixCacheTest, DisabledNeverCaches) {
  PrefixCache c(2, false);
  std::vector<int64_t> t = {1};
  BlockId b = *c.Allocate();
  c.Insert(b, 5, t.data(), 1);
  EXPECT_FALSE(c.Acquire(5, t.data(), 1).has_value());
  c.Release(b);
  EXPECT_EQ(c.NumEvictable(), 0);
  EXPECT_EQ(c.NumAvailable(), 2);
}

TEST(PrefixCacheTest, ResetForgetsCachedBlocks) {
  PrefixCache c(2, true);
  std::vector<int64_t> t = {4};
  BlockId b = *c.Allocate();
  c.Insert(b, 11, t.data(), 1);
  c.Release(b);
  c.Reset();
  EXPECT_EQ(c.NumCached(), 0);
  EXPECT_EQ(c.NumEvictable(), 0);
  EXPECT_EQ(c.NumAvailable(), 2);
  EXPECT_FALSE(c.Acquire(11, t.data(), 1).has_value());
}

}  // namespace
}  // namespace verl::infer
