// File: verl/infer/kv_cache.cc
#include "verl/infer/kv_cache.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <glog/logging.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "verl/profiler/memory_tracker.h"

namespace verl::infer {

int64_t KvCacheSpec::BytesPerBlock() const {
  return (latent ? 1 : 2) * num_layers * block_size * num_kv_heads * head_dim *
         static_cast<int64_t>(c10::elementSize(dtype));
}

absl::StatusOr<int64_t> MemAvailableBytes(const std::string& meminfo_path) {
  std::ifstream in(meminfo_path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", meminfo_path));
  }
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t kb = -1;
    std::string unit;
    fields >> kb >> unit;
    if (kb < 0 || unit != "kB") {
      return absl::InvalidArgumentError(absl::StrCat(
          meminfo_path, ": malformed MemAvailable line '", line, "'"));
    }
    return kb * 1024;
  }
  return absl::NotFoundError(
      absl::StrCat(meminfo_path, ": no MemAvailable line"));
}

int64_t NumBlocksForBudget(const KvCacheSpec& spec, int64_t budget_bytes) {
  const int64_t per_block = spec.BytesPerBlock();
  CHECK_GT(per_block, 0);
  return budget_bytes > 0 ? budget_bytes / per_block : 0;
}

KvCache::KvCache(KvCacheSpec spec, int64_t num_blocks)
    : spec_(spec), num_blocks_(num_blocks) {
  CHECK_GT(num_blocks, 0);
  CHECK_GT(spec.num_layers, 0);
}

int64_t KvCache::AllocatedBytes() const {
  return allocated() ? spec_.BytesPerBlock() * num_blocks_ : 0;
}

void KvCache::Allocate() {
  if (allocated()) return;
  profiler::MemoryCategoryScope category(profiler::MemoryCategory::kKvCache);
  const auto opts = at::TensorOptions().dtype(spec_.dtype);
  const std::vector<int64_t> shape = {num_blocks_, spec_.block_size,
                                      spec_.num_kv_heads, spec_.head_dim};
  for (int64_t l = 0; l < spec_.num_layers; ++l) {
    keys_.push_back(at::empty(shape, opts));
    if (!spec_.latent) values_.push_back(at::empty(shape, opts));
  }
}

void KvCache::Release() {
  keys_.clear();
  values_.clear();
}

void KvCache::CopyBlocks(const std::vector<BlockCopy>& copies) {
  if (copies.empty()) return;
  CHECK(allocated()) << "CopyBlocks on a released KV cache";
  std::vector<int64_t> src, dst;
  for (const auto& [s, d] : copies) {
    src.push_back(s);
    dst.push_back(d);
  }
  const at::Tensor src_t = at::tensor(src, at::kLong);
  const at::Tensor dst_t = at::tensor(dst, at::kLong);
  for (int64_t l = 0; l < spec_.num_layers; ++l) {
    keys_[l].index_copy_(0, dst_t, keys_[l].index_select(0, src_t));
    if (spec_.latent) continue;
    values_[l].index_copy_(0, dst_t, values_[l].index_select(0, src_t));
  }
}

}  // namespace verl::infer
