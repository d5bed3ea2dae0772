// File: verl/models/mla/mla_attention.h
//
// Multi-head latent attention (DeepSeek-V2/V3, HF DeepseekV3Attention).
// q = q_b(RMSNorm(q_a(x))) (or q_proj(x) without q compression) split per
// head into [nope | rope]; the kv latent c = RMSNorm(kv_a(x)[:kv_lora_rank])
// expands through kv_b into per-head k_nope and v, while one rope key
// kv_a(x)[kv_lora_rank:] is shared by all heads. RoPE touches only the rope
// parts, in HF's interleaved layout when rope_interleave. Scores are scaled
// by (nope + rope)^-0.5, times yarn_get_mscale(factor, mscale_all_dim)^2
// under YaRN. Parameter names are HF's.
//
// A backend implementing LatentAttentionBackend (the rollout engine's latent
// paged cache) gets the queries and the per-token latent instead of
// expanded K/V; AttendAbsorbed() is the attention over such a cache with
// kv_b folded into the query and the output (DeepSeek's absorbed decode).
#ifndef VERL_MODELS_MLA_MLA_ATTENTION_H_
#define VERL_MODELS_MLA_MLA_ATTENTION_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>

#include "verl/models/attention.h"
#include "verl/models/layers.h"
#include "verl/models/model_config.h"

namespace verl::models {

// RoPE on x [T, heads, d] with cos/sin [T, d]; `interleave` first reorders
// each head's features (0, 2, 4, ..., 1, 3, 5, ...) as HF's
// apply_rotary_pos_emb_interleave does.
at::Tensor ApplyRopeMaybeInterleaved(const at::Tensor& x, const at::Tensor& cos,
                                     const at::Tensor& sin, bool interleave);

// HF builds the latent norms (q_a_layernorm, kv_a_layernorm) with
// DeepseekV3RMSNorm's default eps, not config.rms_norm_eps.
inline constexpr double kMlaLatentNormEps = 1e-6;

// The softmax scale of an MLA layer (see the file comment).
double MlaSoftmaxScale(const ModelConfig& config);

// An MLA layer's dimensions and softmax scale, read from its config (the
// single-process layer and the Megatron one, verl/models/megatron/
// mla_layer.h, share them).
struct MlaDims {
  explicit MlaDims(const ModelConfig& config);
  int64_t q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim,
      v_head_dim;
  bool rope_interleave;
  double softmax_scale;
};

class MlaAttention : public torch::nn::Module, public MlaDims {
 public:
  MlaAttention(const ModelConfig& config, int64_t layer);
  // x [T, H]; cos/sin [T, qk_rope_head_dim]. Returns [T, H]. The backend
  // gets q/k [T, heads, nope + rope] (q pre-scaled so that its
  // head_dim^-0.5 gives the MLA scale) and v [T, heads, v_head_dim].
  at::Tensor Forward(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin, AttentionBackend& backend) const;

  // Queries [T, heads, nope + rope] after RoPE (not scaled).
  at::Tensor Queries(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin) const;
  // What an MLA KV cache stores per token: the normed latent
  // [T, kv_lora_rank] and the rope key [T, qk_rope_head_dim] after RoPE.
  struct Latent {
    at::Tensor c_kv;
    at::Tensor k_rope;
  };
  Latent CompressKv(const at::Tensor& x, const at::Tensor& cos,
                    const at::Tensor& sin) const;

  // Attention of one sequence's queries q [Lq, heads, nope + rope] (from
  // Queries()) over its cached latents c_kv [Lk, kv_lora_rank] and rope keys
  // k_rope [Lk, rope], the queries being the last Lq positions (causal).
  // Uses the absorbed projections: scores = (q_nope W_uk) c^T + q_rope
  // k_rope^T, output (softmax c) W_uv^T, with W_uk / W_uv the k / v rows of
  // kv_b_proj; the expanded K/V path instead when kv_b_proj has an active
  // LoRA adapter. Returns [Lq, heads, v_head_dim] (before o_proj).
  at::Tensor AttendAbsorbed(const at::Tensor& q, const at::Tensor& c_kv,
                            const at::Tensor& k_rope) const;

  int64_t layer, num_heads;
  std::shared_ptr<Linear> q_proj;  // only when q_lora_rank == 0
  std::shared_ptr<Linear> q_a_proj, q_b_proj;
  std::shared_ptr<RMSNorm> q_a_layernorm;
  std::shared_ptr<Linear> kv_a_proj_with_mqa, kv_b_proj, o_proj;
  std::shared_ptr<RMSNorm> kv_a_layernorm;
};

// A backend that caches MLA's latent rather than per-head K/V. For MLA
// layers CausalLM::Forward calls AttendLatent instead of Attend.
class LatentAttentionBackend {
 public:
  virtual ~LatentAttentionBackend() = default;
  // q [T, heads, nope + rope] after RoPE (unscaled) and this step's latents
  // for layer attn.layer. Returns [T, heads, v_head_dim] (before o_proj).
  virtual at::Tensor AttendLatent(const MlaAttention& attn, const at::Tensor& q,
                                  const MlaAttention::Latent& latent) = 0;
};

}  // namespace verl::models

#endif  // VERL_MODELS_MLA_MLA_ATTENTION_H_
