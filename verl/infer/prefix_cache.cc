// File: verl/infer/prefix_cache.cc
#include "verl/infer/prefix_cache.h"

#include <glog/logging.h>

#include <algorithm>

namespace verl::infer {
namespace {

// splitmix64 finaliser: a cheap, well-mixed 64-bit permutation.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

uint64_t HashBlockTokens(uint64_t parent_hash, const int64_t* tokens,
                         int64_t n) {
  uint64_t h = Mix(parent_hash ^ 0x5851f42d4c957f2dULL);
  for (int64_t i = 0; i < n; ++i) {
    h = Mix(h ^ static_cast<uint64_t>(tokens[i]));
  }
  return Mix(h + static_cast<uint64_t>(n));
}

PrefixCache::PrefixCache(int64_t num_blocks, bool enabled,
                         int64_t tokens_per_block)
    : enabled_(enabled), allocator_(num_blocks), entry_(num_blocks) {
  if (!enabled_) return;
  // At most one entry per block; twice that keeps the table from ever
  // growing (absl rehashes in place while under ~25/32 full).
  by_hash_.reserve(2 * num_blocks);
  if (tokens_per_block > 0) {
    for (Entry& e : entry_) e.tokens.reserve(tokens_per_block);
  }
}

void PrefixCache::LruPushBack(BlockId block) {
  Entry& e = entry_[block];
  e.in_lru = true;
  e.lru_prev = lru_tail_;
  e.lru_next = -1;
  (lru_tail_ >= 0 ? entry_[lru_tail_].lru_next : lru_head_) = block;
  lru_tail_ = block;
  ++lru_size_;
}

void PrefixCache::LruRemove(BlockId block) {
  Entry& e = entry_[block];
  (e.lru_prev >= 0 ? entry_[e.lru_prev].lru_next : lru_head_) = e.lru_next;
  (e.lru_next >= 0 ? entry_[e.lru_next].lru_prev : lru_tail_) = e.lru_prev;
  e.lru_prev = e.lru_next = -1;
  e.in_lru = false;
  --lru_size_;
}

std::optional<BlockId> PrefixCache::Allocate() {
  std::optional<BlockId> b = allocator_.Allocate();
  if (b.has_value()) return b;
  if (lru_head_ < 0) return std::nullopt;
  BlockId victim = lru_head_;
  Uncache(victim);  // removes it from the LRU and returns it to the free list
  ++stats_.evictions;
  return allocator_.Allocate();
}

std::optional<BlockId> PrefixCache::Acquire(uint64_t hash,
                                            const int64_t* tokens, int64_t n) {
  if (!enabled_) return std::nullopt;
  ++stats_.queried_blocks;
  auto it = by_hash_.find(hash);
  if (it == by_hash_.end()) return std::nullopt;
  BlockId b = it->second;
  Entry& e = entry_[b];
  if (static_cast<int64_t>(e.tokens.size()) != n ||
      !std::equal(e.tokens.begin(), e.tokens.end(), tokens)) {
    return std::nullopt;  // 64-bit collision: treat as a miss
  }
  if (e.in_lru) {
    LruRemove(b);
    CHECK_EQ(allocator_.RefCount(b), 0);
    // Evictable blocks have count 0 but are not on the free list.
  }
  allocator_.Ref(b);
  ++stats_.hit_blocks;
  return b;
}

void PrefixCache::Insert(BlockId block, uint64_t hash, const int64_t* tokens,
                         int64_t n) {
  if (!enabled_) return;
  Entry& e = entry_[block];
  if (e.cached) return;
  if (by_hash_.count(hash) != 0) return;  // a duplicate computed elsewhere
  e.cached = true;
  e.hash = hash;
  e.tokens.assign(tokens, tokens + n);
  by_hash_.emplace(hash, block);
}

void PrefixCache::Release(BlockId block) {
  if (allocator_.Unref(block) > 0) return;
  Entry& e = entry_[block];
  if (e.cached) {
    LruPushBack(block);
  } else {
    allocator_.Free(block);
  }
}

void PrefixCache::Uncache(BlockId block) {
  Entry& e = entry_[block];
  if (!e.cached) return;
  by_hash_.erase(e.hash);
  e.cached = false;
  e.tokens.clear();
  if (e.in_lru) {
    LruRemove(block);
    allocator_.Free(block);
  }
}

void PrefixCache::Reset() {
  std::vector<BlockId> cached;
  cached.reserve(by_hash_.size());
  for (const auto& [hash, block] : by_hash_) cached.push_back(block);
  for (BlockId b : cached) Uncache(b);
}

}  // namespace verl::infer
