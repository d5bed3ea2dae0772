// File: verl/infer/kv_cache.h
//
// The paged KV cache storage: for every decoder layer one key and one value
// tensor of shape [num_blocks, block_size, n_kv_heads, head_dim] (for
// multi-head latent attention only the "key" tensor, holding each token's
// latent and rope key: n_kv_heads 1, head_dim kv_lora_rank + rope). Block ids
// come from BlockManager; this class only owns the memory, sizes it from a
// byte budget (explicit, or a fraction of available memory like vLLM's
// gpu_memory_utilization -- on CPU, MemAvailable from /proc/meminfo), frees
// and re-allocates it (engine sleep / wake-up) and copies blocks
// (copy-on-write).
#ifndef VERL_INFER_KV_CACHE_H_
#define VERL_INFER_KV_CACHE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/infer/block_manager.h"

namespace verl::infer {

struct KvCacheSpec {
  int64_t num_layers = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t block_size = 16;
  c10::ScalarType dtype = c10::ScalarType::Float;
  bool latent = false;  // MLA: keys only (the latent), no values

  // Bytes of one block across all layers, keys and values.
  int64_t BytesPerBlock() const;
};

// MemAvailable from a /proc/meminfo-formatted file, in bytes.
absl::StatusOr<int64_t> MemAvailableBytes(
    const std::string& meminfo_path = "/proc/meminfo");

// Number of whole blocks that fit in `budget_bytes`.
int64_t NumBlocksForBudget(const KvCacheSpec& spec, int64_t budget_bytes);

class KvCache {
 public:
  KvCache(KvCacheSpec spec, int64_t num_blocks);

  const KvCacheSpec& spec() const { return spec_; }
  int64_t num_blocks() const { return num_blocks_; }
  bool allocated() const { return !keys_.empty(); }
  int64_t AllocatedBytes() const;

  // Allocates storage (uninitialised: every slot is written before it is
  // read); no-op if allocated.
  void Allocate();
  // Frees the storage (the tensors' memory goes back to the allocator).
  void Release();

  // [num_blocks, block_size, n_kv_heads, head_dim]
  const at::Tensor& key(int64_t layer) const { return keys_.at(layer); }
  const at::Tensor& value(int64_t layer) const { return values_.at(layer); }

  // Copies whole blocks src -> dst in every layer.
  void CopyBlocks(const std::vector<BlockCopy>& copies);

 private:
  KvCacheSpec spec_;
  int64_t num_blocks_;
  std::vector<at::Tensor> keys_, values_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_KV_CACHE_H_
