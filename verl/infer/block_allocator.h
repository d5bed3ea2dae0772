// File: verl/infer/block_allocator.h
//
// Physical KV-cache block bookkeeping: a free list and per-block reference
// counts. Blocks are integers in [0, num_blocks); the tensors they index live
// in KvCache. Sharing (forked samples, prefix caching) is expressed by
// reference counts; who frees a block whose count drops to zero is decided by
// PrefixCache (cached blocks stay resident for reuse).
#ifndef VERL_INFER_BLOCK_ALLOCATOR_H_
#define VERL_INFER_BLOCK_ALLOCATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace verl::infer {

using BlockId = int32_t;

class BlockAllocator {
 public:
  explicit BlockAllocator(int64_t num_blocks);

  int64_t num_blocks() const { return static_cast<int64_t>(ref_.size()); }
  // Blocks on the free list (reference count 0 and not held by a cache).
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }

  // Pops a free block and gives it reference count 1; nullopt if none.
  std::optional<BlockId> Allocate();
  // Increments the reference count of a block that is in use or cached.
  void Ref(BlockId block);
  // Decrements the reference count; returns the new count.
  int32_t Unref(BlockId block);
  // Returns a block with reference count 0 to the free list.
  void Free(BlockId block);
  int32_t RefCount(BlockId block) const;

 private:
  std::vector<int32_t> ref_;
  std::vector<BlockId> free_;  // LIFO
  std::vector<bool> on_free_list_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_BLOCK_ALLOCATOR_H_
