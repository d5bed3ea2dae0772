// File: verl/infer/block_allocator.cc
#include "verl/infer/block_allocator.h"

#include <glog/logging.h>

namespace verl::infer {

BlockAllocator::BlockAllocator(int64_t num_blocks)
    : ref_(num_blocks, 0), on_free_list_(num_blocks, true) {
  CHECK_GE(num_blocks, 0);
  free_.reserve(num_blocks);
  // Hand out low ids first (pop_back) for locality.
  for (int64_t b = num_blocks - 1; b >= 0; --b) {
    free_.push_back(static_cast<BlockId>(b));
  }
}

std::optional<BlockId> BlockAllocator::Allocate() {
  if (free_.empty()) return std::nullopt;
  BlockId b = free_.back();
  free_.pop_back();
  on_free_list_[b] = false;
  ref_[b] = 1;
  return b;
}

void BlockAllocator::Ref(BlockId block) {
  CHECK(block >= 0 && block < num_blocks()) << "block " << block;
  CHECK(!on_free_list_[block]) << "Ref of free block " << block;
  ++ref_[block];
}

int32_t BlockAllocator::Unref(BlockId block) {
  CHECK(block >= 0 && block < num_blocks()) << "block " << block;
  CHECK_GT(ref_[block], 0) << "Unref of unreferenced block " << block;
  return --ref_[block];
}

void BlockAllocator::Free(BlockId block) {
  CHECK(block >= 0 && block < num_blocks()) << "block " << block;
  CHECK_EQ(ref_[block], 0) << "Free of referenced block " << block;
  CHECK(!on_free_list_[block]) << "double free of block " << block;
  on_free_list_[block] = true;
  free_.push_back(block);
}

int32_t BlockAllocator::RefCount(BlockId block) const {
  CHECK(block >= 0 && block < num_blocks()) << "block " << block;
  return ref_[block];
}

}  // namespace verl::infer
