// File: verl/infer/block_manager_test.cc
#include "verl/infer/block_manager.h"

#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <vector>

namespace verl::infer {
namespace {

Sequence MakeSeq(int64_t id, int64_t n, int64_t first = 100) {
  Sequence s;
  s.seq_id = id;
  s.tokens.resize(n);
  std::iota(s.tokens.begin(), s.tokens.end(), first);
  s.prompt_len = n;
  return s;
}

// Simulates the engine computing all reserved tokens.
void Compute(BlockManager& m, Sequence& s) {
  ASSERT_TRUE(m.Reserve(s, s.num_tokens()));
  s.num_computed = s.num_tokens();
  m.CommitFullBlocks(s);
}

TEST(BlockManagerTest, ReserveGrowsTable) {
  BlockManager m(8, 4, true);
  Sequence s = MakeSeq(0, 10);
  EXPECT_EQ(m.BlocksNeeded(s, 10), 3);
  ASSERT_TRUE(m.Reserve(s, 10));
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(m.NumAvailable(), 5);
  Sequence big = MakeSeq(1, 24);
  EXPECT_FALSE(m.Reserve(big, 24));  // needs 6, 5 available: no change
  EXPECT_TRUE(big.block_table.empty());
  EXPECT_EQ(m.NumAvailable(), 5);
}

TEST(BlockManagerTest, ForkSharesThenCopiesOnWritePartialBlock) {
  BlockManager m(8, 4, false);
  Sequence parent = MakeSeq(0, 6);  // blocks: [full][2 of 4]
  Compute(m, parent);
  Sequence child = parent;
  child.block_table.clear();
  m.Fork(parent, child);
  EXPECT_EQ(m.cache().RefCount(parent.block_table[1]), 2);
  // Each appends a token: the shared partial block is written.
  parent.tokens.push_back(1);
  child.tokens.push_back(2);
  EXPECT_EQ(m.BlocksNeeded(child, 7), 1);
  ASSERT_TRUE(m.Reserve(child, 7));
  std::vector<BlockCopy> copies = {{7, 7}};  // replaced, not appended to
  m.TakeCopies(&copies);
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].first, parent.block_table[1]);
  EXPECT_EQ(copies[0].second, child.block_table[1]);
  EXPECT_NE(child.block_table[1], parent.block_table[1]);
  EXPECT_EQ(child.block_table[0], parent.block_table[0]);  // full: shared
  // The parent is now the only owner: writes in place.
  ASSERT_TRUE(m.Reserve(parent, 7));
  m.TakeCopies(&copies);
  EXPECT_TRUE(copies.empty());
  m.Free(child);
  m.Free(parent);
  EXPECT_EQ(m.NumAvailable(), 8);
}

TEST(BlockManagerTest, PrefixMatchReusesFullBlocksAndLeavesOneToken) {
  BlockManager m(16, 4, true);
  Sequence a = MakeSeq(0, 12);  // 3 full blocks
  Compute(m, a);
  Sequence b = MakeSeq(1, 12);  // identical: must recompute >= 1 token
  EXPECT_EQ(m.MatchPrefix(b), 8);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(b.block_table[1], a.block_table[1]);
  Sequence c = MakeSeq(2, 14);  // same first 12 tokens, longer
  EXPECT_EQ(m.MatchPrefix(c), 12);
  Sequence d = MakeSeq(3, 12, /*first=*/100);
  d.tokens[5] = -1;  // diverges in block 1
  EXPECT_EQ(m.MatchPrefix(d), 4);
  EXPECT_EQ(m.cache().stats().hit_blocks, 2 + 3 + 1);
  // After everybody leaves, blocks are evictable but still cached.
  for (Sequence* s : {&a, &b, &c, &d}) m.Free(*s);
  EXPECT_EQ(m.NumAvailable(), 16);
  Sequence e = MakeSeq(4, 13);
  EXPECT_EQ(m.MatchPrefix(e), 12);
  m.Free(e);
}

// Sequences with equal tokens but different cache keys (two images behind
// the same <|image_pad|> run) share only the blocks whose keys agree.
TEST(BlockManagerTest, CacheKeysNameBlocksInsteadOfTokens) {
  BlockManager m(16, 4, true);
  auto keys = [](int64_t image) {
    auto k = std::make_shared<std::vector<int64_t>>();
    for (int64_t t = 0; t < 10; ++t)
      k->push_back(t >= 5 ? -image - t : 100 + t);
    return k;
  };
  Sequence a = MakeSeq(0, 10);  // tokens 100..109; "pads" at 5..9
  a.cache_keys = keys(1);
  EXPECT_EQ(m.MatchPrefix(a), 0);
  Compute(m, a);
  m.Free(a);
  Sequence same = MakeSeq(1, 10);
  same.cache_keys = keys(1);
  EXPECT_EQ(m.MatchPrefix(same), 8);  // both full blocks
  Sequence other = MakeSeq(2, 10);
  other.cache_keys = keys(2);
  EXPECT_EQ(m.MatchPrefix(other), 4);  // only the block before the "image"
  Sequence plain = MakeSeq(3, 10);     // the bare tokens never match a key
  EXPECT_EQ(m.MatchPrefix(plain), 4);
}

}  // namespace
}  // namespace verl::infer
