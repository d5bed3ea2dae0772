// File: verl/infer/block_manager.h
//
// Per-sequence block tables on top of PrefixCache: growing a sequence's
// table to cover the tokens of the next step, copy-on-write of a shared
// partial block, forking (n samples sharing one prompt prefill), reusing
// cached prefix blocks for a new or recomputed sequence, registering blocks
// once they are full and computed, and freeing.
#ifndef VERL_INFER_BLOCK_MANAGER_H_
#define VERL_INFER_BLOCK_MANAGER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "verl/infer/prefix_cache.h"
#include "verl/infer/sequence.h"

namespace verl::infer {

// A pending KV copy (src block -> dst block) the engine performs before the
// next forward; produced by copy-on-write.
using BlockCopy = std::pair<BlockId, BlockId>;

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool prefix_caching);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return cache_.num_blocks(); }
  int64_t NumAvailable() const { return cache_.NumAvailable(); }
  const PrefixCache& cache() const { return cache_; }
  PrefixCache& mutable_cache() { return cache_; }

  // For a sequence with no blocks: takes the longest run of cached full
  // blocks matching its tokens (always leaving at least one token to
  // compute) and sets num_computed accordingly. Returns the cached tokens.
  int64_t MatchPrefix(Sequence& seq);

  // Blocks needed (worst case, including a copy-on-write) so that the first
  // `num_tokens` tokens of `seq` have slots.
  int64_t BlocksNeeded(const Sequence& seq, int64_t num_tokens) const;

  // Makes slots for tokens [num_computed, num_tokens) of `seq`: appends new
  // blocks and copies-on-write a shared block that will be written. Returns
  // false (with no change) if not enough blocks are available.
  bool Reserve(Sequence& seq, int64_t num_tokens);

  // Registers the sequence's full, computed blocks in the prefix cache.
  void CommitFullBlocks(Sequence& seq);

  // `child` gets the parent's block table, sharing every block.
  void Fork(const Sequence& parent, Sequence& child);

  // Releases all blocks of `seq` and clears its table.
  void Free(Sequence& seq);

  // Copy-on-write copies accumulated since the last call, into *out
  // (replacing its contents; both vectors keep their capacity).
  void TakeCopies(std::vector<BlockCopy>* out);

 private:
  void ExtendHashes(Sequence& seq, int64_t num_full_blocks) const;
  // Block `i`'s tokens as the cache names them (Sequence::cache_keys where
  // set); `scratch` holds them when they differ from the tokens.
  const int64_t* BlockKeys(const Sequence& seq, int64_t i,
                           std::vector<int64_t>* scratch) const;

  int64_t block_size_;
  PrefixCache cache_;
  std::vector<BlockCopy> copies_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_BLOCK_MANAGER_H_
