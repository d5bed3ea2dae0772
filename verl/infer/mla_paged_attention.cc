// File: verl/infer/mla_paged_attention.cc
#include "verl/infer/mla_paged_attention.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <chrono>
#include <vector>

namespace verl::infer {

MlaPagedAttention::MlaPagedAttention(KvCache* cache)
    : PagedAttention(cache), cache_(cache) {
  CHECK(cache->spec().latent) << "MlaPagedAttention needs a latent KV cache";
}

at::Tensor MlaPagedAttention::AttendLatent(
    const models::MlaAttention& attn, const at::Tensor& q,
    const models::MlaAttention::Latent& latent) {
  CHECK(cache_->allocated()) << "attention on a released KV cache";
  const auto t0 = std::chrono::steady_clock::now();
  const KvCacheSpec& spec = cache_->spec();
  const int64_t r = attn.kv_lora_rank, width = spec.head_dim;
  CHECK_EQ(width, r + attn.qk_rope_head_dim) << "cache width is not MLA's";
  CHECK_EQ(q.size(0), slot_mapping().numel())
      << "Prepare() was given another batch";
  // [num_blocks * block_size, r + rope]: one row per token slot.
  at::Tensor store = cache_->key(attn.layer).view({-1, width});
  store.index_copy_(
      0, slot_mapping(),
      at::cat({latent.c_kv, latent.k_rope}, -1).to(store.scalar_type()));
  at::Tensor out = q.new_empty({q.size(0), attn.num_heads, attn.v_head_dim});
  const int64_t bs = spec.block_size;
  for (const AttentionSequence& s : sequences()) {
    if (s.query_len == 0) continue;
    std::vector<int64_t> slots(s.context_len);
    for (int64_t p = 0; p < s.context_len; ++p) {
      slots[p] = static_cast<int64_t>((*s.block_table)[p / bs]) * bs + p % bs;
    }
    at::Tensor rows = store.index_select(0, at::tensor(slots, at::kLong));
    out.narrow(0, s.query_start, s.query_len)
        .copy_(attn.AttendAbsorbed(q.narrow(0, s.query_start, s.query_len),
                                   rows.narrow(-1, 0, r),
                                   rows.narrow(-1, r, width - r)));
  }
  mutable_attend_seconds() +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

}  // namespace verl::infer
