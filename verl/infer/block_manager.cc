// File: verl/infer/block_manager.cc
#include "verl/infer/block_manager.h"

#include <glog/logging.h>

#include <algorithm>
#include <vector>

namespace verl::infer {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size,
                           bool prefix_caching)
    : block_size_(block_size), cache_(num_blocks, prefix_caching, block_size) {
  CHECK_GT(block_size, 0);
}

const int64_t* BlockManager::BlockKeys(const Sequence& seq, int64_t i,
                                       std::vector<int64_t>* scratch) const {
  const int64_t begin = i * block_size_;
  const int64_t* tokens = seq.tokens.data() + begin;
  if (seq.cache_keys == nullptr) return tokens;
  const std::vector<int64_t>& keys = *seq.cache_keys;
  const int64_t n_keys = static_cast<int64_t>(keys.size());
  if (begin >= n_keys) return tokens;
  scratch->assign(tokens, tokens + block_size_);
  for (int64_t t = begin; t < std::min(n_keys, begin + block_size_); ++t) {
    (*scratch)[t - begin] = keys[t];
  }
  return scratch->data();
}

void BlockManager::ExtendHashes(Sequence& seq, int64_t num_full_blocks) const {
  std::vector<int64_t> scratch;
  while (static_cast<int64_t>(seq.block_hashes.size()) < num_full_blocks) {
    const int64_t i = static_cast<int64_t>(seq.block_hashes.size());
    const uint64_t parent = i == 0 ? 0 : seq.block_hashes[i - 1];
    seq.block_hashes.push_back(
        HashBlockTokens(parent, BlockKeys(seq, i, &scratch), block_size_));
  }
}

int64_t BlockManager::MatchPrefix(Sequence& seq) {
  CHECK(seq.block_table.empty()) << "MatchPrefix on seq " << seq.seq_id;
  seq.num_computed = 0;
  seq.num_registered_blocks = 0;
  if (!cache_.enabled()) return 0;
  // At least one token must be computed to produce logits.
  const int64_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  ExtendHashes(seq, max_blocks);
  std::vector<int64_t> scratch;
  for (int64_t i = 0; i < max_blocks; ++i) {
    std::optional<BlockId> b = cache_.Acquire(
        seq.block_hashes[i], BlockKeys(seq, i, &scratch), block_size_);
    if (!b.has_value()) break;
    seq.block_table.push_back(*b);
  }
  const int64_t n = static_cast<int64_t>(seq.block_table.size());
  seq.num_registered_blocks = n;
  seq.num_computed = n * block_size_;
  return seq.num_computed;
}

int64_t BlockManager::BlocksNeeded(const Sequence& seq,
                                   int64_t num_tokens) const {
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  int64_t need = want > have ? want - have : 0;
  // The block holding position num_computed gets written; copy it if shared.
  const int64_t first = seq.num_computed / block_size_;
  if (num_tokens > seq.num_computed && first < have &&
      cache_.RefCount(seq.block_table[first]) > 1) {
    ++need;
  }
  return need;
}

bool BlockManager::Reserve(Sequence& seq, int64_t num_tokens) {
  if (BlocksNeeded(seq, num_tokens) > cache_.NumAvailable()) return false;
  const int64_t have = static_cast<int64_t>(seq.block_table.size());
  const int64_t first = seq.num_computed / block_size_;
  if (num_tokens > seq.num_computed && first < have) {
    BlockId& slot = seq.block_table[first];
    if (cache_.RefCount(slot) > 1) {
      std::optional<BlockId> fresh = cache_.Allocate();
      CHECK(fresh.has_value());
      copies_.emplace_back(slot, *fresh);
      cache_.Release(slot);
      slot = *fresh;
    }
  }
  const int64_t want = (num_tokens + block_size_ - 1) / block_size_;
  while (static_cast<int64_t>(seq.block_table.size()) < want) {
    std::optional<BlockId> b = cache_.Allocate();
    CHECK(b.has_value());
    seq.block_table.push_back(*b);
  }
  return true;
}

void BlockManager::CommitFullBlocks(Sequence& seq) {
  if (!cache_.enabled()) return;
  const int64_t full = seq.num_computed / block_size_;
  ExtendHashes(seq, full);
  std::vector<int64_t> scratch;
  for (int64_t i = seq.num_registered_blocks; i < full; ++i) {
    cache_.Insert(seq.block_table[i], seq.block_hashes[i],
                  BlockKeys(seq, i, &scratch), block_size_);
  }
  if (full > seq.num_registered_blocks) seq.num_registered_blocks = full;
}

void BlockManager::Fork(const Sequence& parent, Sequence& child) {
  CHECK(child.block_table.empty());
  child.block_table = parent.block_table;
  child.block_hashes = parent.block_hashes;
  child.num_registered_blocks = parent.num_registered_blocks;
  for (BlockId b : child.block_table) cache_.Ref(b);
}

void BlockManager::Free(Sequence& seq) {
  // Release in reverse so the tail of a chain is evicted before its head.
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    cache_.Release(*it);
  }
  seq.block_table.clear();
  seq.num_registered_blocks = 0;
}

void BlockManager::TakeCopies(std::vector<BlockCopy>* out) {
  out->clear();
  out->swap(copies_);
}

}  // namespace verl::infer
