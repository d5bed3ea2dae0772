// File: verl/models/mla/mla_attention.cc
#include "verl/models/mla/mla_attention.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <cmath>
#include <limits>

namespace verl::models {
at::Tensor ApplyRopeMaybeInterleaved(const at::Tensor& x, const at::Tensor& cos,
                                     const at::Tensor& sin, bool interleave) {
  if (!interleave) return ApplyRope(x, cos, sin);
  const int64_t t = x.size(0), h = x.size(1), d = x.size(2);
  at::Tensor y = x.reshape({t, h, d / 2, 2}).transpose(2, 3).reshape({t, h, d});
  return ApplyRope(y, cos, sin);
}

double MlaSoftmaxScale(const ModelConfig& c) {
  double scale =
      1.0 /
      std::sqrt(static_cast<double>(c.qk_nope_head_dim + c.qk_rope_head_dim));
  const RopeScaling& rs = c.rope_scaling;
  if (rs.rope_type != "default" && rs.mscale_all_dim != 0) {
    const double m = YarnMscale(rs.factor, rs.mscale_all_dim);
    scale *= m * m;
  }
  return scale;
}

MlaDims::MlaDims(const ModelConfig& c)
    : q_lora_rank(c.q_lora_rank),
      kv_lora_rank(c.kv_lora_rank),
      qk_nope_head_dim(c.qk_nope_head_dim),
      qk_rope_head_dim(c.qk_rope_head_dim),
      v_head_dim(c.v_head_dim),
      rope_interleave(c.rope_interleave),
      softmax_scale(MlaSoftmaxScale(c)) {}

MlaAttention::MlaAttention(const ModelConfig& c, int64_t layer_index)
    : MlaDims(c), layer(layer_index), num_heads(c.num_attention_heads) {
  CHECK_GT(kv_lora_rank, 0);
  CHECK_EQ(qk_rope_head_dim % 2, 0) << "qk_rope_head_dim must be even";
  const int64_t h = c.hidden_size, qk = qk_nope_head_dim + qk_rope_head_dim;
  const bool b = c.attention_bias;
  auto linear = [this](const char* name, int64_t in, int64_t out, bool bias) {
    return register_module(name, std::make_shared<Linear>(in, out, bias));
  };
  if (q_lora_rank > 0) {
    q_a_proj = linear("q_a_proj", h, q_lora_rank, b);
    q_a_layernorm = register_module(
        "q_a_layernorm",
        std::make_shared<RMSNorm>(q_lora_rank, kMlaLatentNormEps));
    q_b_proj = linear("q_b_proj", q_lora_rank, num_heads * qk, false);
  } else {
    q_proj = linear("q_proj", h, num_heads * qk, false);
  }
  kv_a_proj_with_mqa =
      linear("kv_a_proj_with_mqa", h, kv_lora_rank + qk_rope_head_dim, b);
  kv_a_layernorm = register_module(
      "kv_a_layernorm",
      std::make_shared<RMSNorm>(kv_lora_rank, kMlaLatentNormEps));
  kv_b_proj = linear("kv_b_proj", kv_lora_rank,
                     num_heads * (qk_nope_head_dim + v_head_dim), false);
  o_proj = linear("o_proj", num_heads * v_head_dim, h, b);
}

at::Tensor MlaAttention::Queries(const at::Tensor& x, const at::Tensor& cos,
                                 const at::Tensor& sin) const {
  const int64_t t = x.size(0);
  at::Tensor q =
      q_proj ? q_proj->Forward(x)
             : q_b_proj->Forward(q_a_layernorm->Forward(q_a_proj->Forward(x)));
  q = q.view({t, num_heads, qk_nope_head_dim + qk_rope_head_dim});
  at::Tensor q_rope = ApplyRopeMaybeInterleaved(
      q.narrow(-1, qk_nope_head_dim, qk_rope_head_dim), cos, sin,
      rope_interleave);
  return at::cat({q.narrow(-1, 0, qk_nope_head_dim), q_rope}, -1);
}

MlaAttention::Latent MlaAttention::CompressKv(const at::Tensor& x,
                                              const at::Tensor& cos,
                                              const at::Tensor& sin) const {
  const int64_t t = x.size(0);
  at::Tensor kv = kv_a_proj_with_mqa->Forward(x);
  Latent out;
  out.c_kv = kv_a_layernorm->Forward(kv.narrow(-1, 0, kv_lora_rank));
  out.k_rope =
      ApplyRopeMaybeInterleaved(kv.narrow(-1, kv_lora_rank, qk_rope_head_dim)
                                    .reshape({t, 1, qk_rope_head_dim}),
                                cos, sin, rope_interleave)
          .view({t, qk_rope_head_dim});
  return out;
}

at::Tensor MlaAttention::AttendAbsorbed(const at::Tensor& q,
                                        const at::Tensor& c_kv,
                                        const at::Tensor& k_rope) const {
  const int64_t lq = q.size(0), lk = c_kv.size(0), h = num_heads;
  const int64_t nope = qk_nope_head_dim, dr = qk_rope_head_dim;
  CHECK_LE(lq, lk);
  const Linear& kv_b = *kv_b_proj;
  if (kv_b.lora.lora_A && kv_b.lora.enabled && !kv_b.lora.merged) {
    at::Tensor kv = kv_b.Forward(c_kv).view({lk, h, nope + v_head_dim});
    at::Tensor k = at::cat(
        {kv.narrow(-1, 0, nope), k_rope.unsqueeze(1).expand({lk, h, dr})}, -1);
    return CausalAttention(
        q * (softmax_scale * std::sqrt(static_cast<double>(nope + dr))), k,
        kv.narrow(-1, nope, v_head_dim), 0);
  }
  const c10::ScalarType ct = ComputeDtype(q.scalar_type());
  at::Tensor w = kv_b.weight.to(ct).view({h, nope + v_head_dim, kv_lora_rank});
  at::Tensor c = c_kv.to(ct), kr = k_rope.to(ct);
  at::Tensor qh = q.to(ct).transpose(0, 1);  // [h, Lq, nope + dr]
  // [h, Lq, nope] x [h, nope, r] -> the query in latent space [h, Lq, r].
  at::Tensor q_lat = at::matmul(qh.narrow(-1, 0, nope), w.narrow(1, 0, nope));
  at::Tensor scores =
      (at::matmul(q_lat, c.t()) + at::matmul(qh.narrow(-1, nope, dr), kr.t())) *
      softmax_scale;  // [h, Lq, Lk]
  if (lq > 1) {
    at::Tensor qi = at::arange(lk - lq, lk, q.options().dtype(at::kLong));
    at::Tensor kj = at::arange(lk, q.options().dtype(at::kLong));
    scores = scores.masked_fill(kj.unsqueeze(0) > qi.unsqueeze(1),
                                -std::numeric_limits<double>::infinity());
  }
  at::Tensor o_lat = at::matmul(at::softmax(scores, -1), c);  // [h, Lq, r]
  at::Tensor o = at::matmul(
      o_lat, w.narrow(1, nope, v_head_dim).transpose(1, 2));  // [h, Lq, v]
  return o.transpose(0, 1).to(q.scalar_type());
}

at::Tensor MlaAttention::Forward(const at::Tensor& x, const at::Tensor& cos,
                                 const at::Tensor& sin,
                                 AttentionBackend& backend) const {
  const int64_t t = x.size(0), qk = qk_nope_head_dim + qk_rope_head_dim;
  Latent latent = CompressKv(x, cos, sin);
  if (auto* cache = dynamic_cast<LatentAttentionBackend*>(&backend)) {
    at::Tensor o = cache->AttendLatent(*this, Queries(x, cos, sin), latent);
    return o_proj->Forward(o.reshape({t, num_heads * v_head_dim}));
  }
  at::Tensor kv = kv_b_proj->Forward(latent.c_kv)
                      .view({t, num_heads, qk_nope_head_dim + v_head_dim});
  at::Tensor k = at::cat(
      {kv.narrow(-1, 0, qk_nope_head_dim),
       latent.k_rope.unsqueeze(1).expand({t, num_heads, qk_rope_head_dim})},
      -1);
  at::Tensor v = kv.narrow(-1, qk_nope_head_dim, v_head_dim);
  // The backend scales by qk^-0.5; fold the MLA scale into q.
  at::Tensor q = Queries(x, cos, sin) *
                 (softmax_scale * std::sqrt(static_cast<double>(qk)));
  at::Tensor o = backend.Attend(layer, q, k, v);
  return o_proj->Forward(o.reshape({t, num_heads * v_head_dim}));
}

}  // namespace verl::models
