// File: verl/infer/prefix_cache.h
//
// Automatic prefix caching over a BlockAllocator. A full KV block is named by
// a hash chain of its tokens, hash(parent_hash, block tokens), so equal
// hashes mean equal prefixes up to and including that block; the tokens are
// also stored and compared, so a 64-bit hash collision can never alias two
// different prefixes. Cached blocks whose reference count drops to zero stay
// resident in an LRU list and are evicted (least recently released first)
// only when the free list is empty. With caching disabled this is a thin
// pass-through to the allocator. Nothing allocates after construction
// (the hash index is reserved for every block, the LRU list is threaded
// through the per-block entries, each entry's token copy is reserved to
// `tokens_per_block`), so the engine's decode steps that fill blocks do
// not allocate either.
#ifndef VERL_INFER_PREFIX_CACHE_H_
#define VERL_INFER_PREFIX_CACHE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "verl/infer/block_allocator.h"

namespace verl::infer {

// Hash of one full block given its parent's hash (0 for the first block).
uint64_t HashBlockTokens(uint64_t parent_hash, const int64_t* tokens,
                         int64_t n);

struct PrefixCacheStats {
  int64_t queried_blocks = 0;  // full blocks looked up
  int64_t hit_blocks = 0;      // ... found in the cache
  int64_t evictions = 0;
  double HitRate() const {
    return queried_blocks == 0 ? 0.0
                               : static_cast<double>(hit_blocks) /
                                     static_cast<double>(queried_blocks);
  }
};

class PrefixCache {
 public:
  PrefixCache(int64_t num_blocks, bool enabled, int64_t tokens_per_block = 0);

  bool enabled() const { return enabled_; }
  // Blocks obtainable by Allocate(): free ones plus evictable cached ones.
  int64_t NumAvailable() const { return allocator_.num_free() + lru_size_; }
  int64_t num_blocks() const { return allocator_.num_blocks(); }
  int64_t NumCached() const { return static_cast<int64_t>(by_hash_.size()); }
  int64_t NumEvictable() const { return lru_size_; }

  // A fresh, uncached block with reference count 1 (evicting the least
  // recently used unreferenced cached block if the free list is empty).
  std::optional<BlockId> Allocate();
  // Finds the cached block for (hash, tokens) and takes a reference to it.
  // Counts a query (and a hit). nullopt on miss or when disabled.
  std::optional<BlockId> Acquire(uint64_t hash, const int64_t* tokens,
                                 int64_t n);
  // Registers a full, computed block under `hash`. No-op when disabled, when
  // the block is already cached, or when another block holds the hash.
  void Insert(BlockId block, uint64_t hash, const int64_t* tokens, int64_t n);
  // Takes another reference to a block in use (fork / sharing).
  void Ref(BlockId block) { allocator_.Ref(block); }
  // Drops a reference; at zero, cached blocks become evictable (most recently
  // used end of the LRU), others return to the free list.
  void Release(BlockId block);
  int32_t RefCount(BlockId block) const { return allocator_.RefCount(block); }
  bool IsCached(BlockId block) const {
    return static_cast<size_t>(block) < entry_.size() && entry_[block].cached;
  }
  // Forgets every cached block (vLLM reset_prefix_cache); blocks in use keep
  // working, unreferenced ones return to the free list.
  void Reset();

  const PrefixCacheStats& stats() const { return stats_; }

 private:
  struct Entry {
    bool cached = false;
    uint64_t hash = 0;
    std::vector<int64_t> tokens;
    bool in_lru = false;
    BlockId lru_prev = -1, lru_next = -1;  // neighbours in the LRU list
  };
  void Uncache(BlockId block);
  void LruPushBack(BlockId block);
  void LruRemove(BlockId block);

  bool enabled_;
  BlockAllocator allocator_;
  std::vector<Entry> entry_;
  absl::flat_hash_map<uint64_t, BlockId> by_hash_;
  // Evictable blocks, threaded through entry_: head = least recently
  // released.
  BlockId lru_head_ = -1, lru_tail_ = -1;
  int64_t lru_size_ = 0;
  PrefixCacheStats stats_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_PREFIX_CACHE_H_
