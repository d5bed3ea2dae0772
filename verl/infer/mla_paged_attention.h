// File: verl/infer/mla_paged_attention.h
//
// The rollout engine's backend for multi-head latent attention (DeepSeek-V3):
// the paged cache holds, per token and layer, only the normed kv latent and
// the rope key (kv_lora_rank + qk_rope_head_dim values, shared by all heads)
// instead of per-head K and V. Each step writes the new tokens' latents into
// their slots (the layout comes from PagedAttention::Prepare) and attends
// every sequence's queries over its cached latents with the absorbed
// projections (MlaAttention::AttendAbsorbed).
#ifndef VERL_INFER_MLA_PAGED_ATTENTION_H_
#define VERL_INFER_MLA_PAGED_ATTENTION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "verl/infer/kv_cache.h"
#include "verl/infer/paged_attention.h"
#include "verl/models/mla/mla_attention.h"

namespace verl::infer {

class MlaPagedAttention : public PagedAttention,
                          public models::LatentAttentionBackend {
 public:
  // `cache`: a latent KvCacheSpec (num_kv_heads 1, head_dim kv_lora_rank +
  // qk_rope_head_dim).
  explicit MlaPagedAttention(KvCache* cache);

  at::Tensor AttendLatent(const models::MlaAttention& attn, const at::Tensor& q,
                          const models::MlaAttention::Latent& latent) override;

 private:
  KvCache* cache_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_MLA_PAGED_ATTENTION_H_
