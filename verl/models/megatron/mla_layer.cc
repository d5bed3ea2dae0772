// File: verl/models/megatron/mla_layer.cc
#include "verl/models/megatron/mla_layer.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/mla/mla_attention.h"
#include "verl/models/recompute.h"
#include "verl/parallel/megatron/mappings.h"

namespace verl::models {

namespace mg = parallel::megatron;

absl::Status ValidateMegatronMla(const ModelConfig& c, int64_t tp) {
  if (c.attention_bias) {
    return absl::UnimplementedError(
        "megatron: attention_bias=true with multi-head latent attention is "
        "not built (DeepSeek-V3 has none)");
  }
  if (c.qk_rope_head_dim <= 0 || c.qk_rope_head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qk_rope_head_dim=", c.qk_rope_head_dim, ": must be even and > 0"));
  }
  if (c.qk_nope_head_dim < 0 || c.v_head_dim <= 0 || c.q_lora_rank < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "qk_nope_head_dim=", c.qk_nope_head_dim, ", v_head_dim=", c.v_head_dim,
        ", q_lora_rank=", c.q_lora_rank,
        ": multi-head latent attention needs v_head_dim > 0 and the others "
        ">= 0"));
  }
  if (c.num_attention_heads % tp != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "megatron.tensor_model_parallel_size=", tp,
        ": does not divide num_attention_heads ", c.num_attention_heads));
  }
  return absl::OkStatus();
}

TpMlaAttention::TpMlaAttention(const ModelConfig& c, int64_t layer_index,
                               const MegatronModelOptions& o, mg::CommPtr tp)
    : MlaDims(c),
      layer(layer_index),
      heads_per_rank(c.num_attention_heads / tp->size()),
      sequence_parallel(o.sequence_parallel),
      tp_(tp) {
  const int64_t h = c.hidden_size, np = c.num_attention_heads;
  const int64_t qk = qk_nope_head_dim + qk_rope_head_dim;
  const bool sp = sequence_parallel;
  auto column = [&](const char* name, int64_t in, int64_t out) {
    return register_module(
        name, std::make_shared<mg::ColumnParallelLinear>(
                  in, out, /*bias=*/false, /*gather_output=*/false, sp, tp));
  };
  if (q_lora_rank > 0) {
    linear_q_down_proj = register_module(
        "linear_q_down_proj", std::make_shared<Linear>(h, q_lora_rank, false));
    q_layernorm = register_module(
        "q_layernorm",
        std::make_shared<RMSNorm>(q_lora_rank, kMlaLatentNormEps));
    linear_q_up_proj = column("linear_q_up_proj", q_lora_rank, np * qk);
  } else {
    linear_q_proj = column("linear_q_proj", h, np * qk);
  }
  linear_kv_down_proj = register_module(
      "linear_kv_down_proj",
      std::make_shared<Linear>(h, kv_lora_rank + qk_rope_head_dim, false));
  kv_layernorm = register_module(
      "kv_layernorm",
      std::make_shared<RMSNorm>(kv_lora_rank, kMlaLatentNormEps));
  linear_kv_up_proj = column("linear_kv_up_proj", kv_lora_rank,
                             np * (qk_nope_head_dim + v_head_dim));
  linear_proj =
      register_module("linear_proj", std::make_shared<mg::RowParallelLinear>(
                                         np * v_head_dim, h, /*bias=*/false,
                                         /*input_is_parallel=*/true, sp, tp));
  recompute_core_attn = o.recompute_granularity == "selective" &&
                        std::count(o.recompute_modules.begin(),
                                   o.recompute_modules.end(), "core_attn") > 0;
}

std::vector<at::Tensor> TpMlaAttention::ReplicatedParameters() const {
  std::vector<at::Tensor> out;
  if (linear_q_down_proj) {
    out.push_back(linear_q_down_proj->weight);
    out.push_back(q_layernorm->weight);
  }
  out.push_back(linear_kv_down_proj->weight);
  out.push_back(kv_layernorm->weight);
  return out;
}

at::Tensor TpMlaAttention::Forward(
    const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin,
    std::shared_ptr<AttentionBackend> backend) const {
  const int64_t nope = qk_nope_head_dim, dr = qk_rope_head_dim;
  const int64_t hp = heads_per_rank;
  // Queries of this rank's heads over the whole local stream [T, hp, qk].
  at::Tensor q = linear_q_proj ? linear_q_proj->Forward(x)
                               : linear_q_up_proj->Forward(q_layernorm->Forward(
                                     linear_q_down_proj->Forward(x)));
  const int64_t t = q.size(0);
  q = q.view({t, hp, nope + dr});
  // The latent of this rank's tokens, expanded for its heads.
  at::Tensor kv = linear_kv_down_proj->Forward(x);
  at::Tensor kv_up =
      linear_kv_up_proj
          ->Forward(kv_layernorm->Forward(kv.narrow(-1, 0, kv_lora_rank)))
          .view({t, hp, nope + v_head_dim});
  // The one rope key per token, consumed by this rank's heads only.
  at::Tensor k_rope = kv.narrow(-1, kv_lora_rank, dr);
  k_rope = sequence_parallel
               ? mg::GatherFromSequenceParallelRegion(
                     k_rope, tp_, /*tensor_parallel_output_grad=*/true)
               : mg::CopyToTensorParallelRegion(k_rope, tp_);
  k_rope = ApplyRopeMaybeInterleaved(k_rope.reshape({t, 1, dr}), cos, sin,
                                     rope_interleave);
  const at::Tensor q_rope = ApplyRopeMaybeInterleaved(
      q.narrow(-1, nope, dr), cos, sin, rope_interleave);
  // The backend scales by (nope + rope)^-0.5: fold the MLA scale into q.
  const double fold = softmax_scale * std::sqrt(static_cast<double>(nope + dr));
  TensorList qkv = {
      at::cat({q.narrow(-1, 0, nope), q_rope}, -1) * fold,
      at::cat({kv_up.narrow(-1, 0, nope), k_rope.expand({t, hp, dr})}, -1),
      kv_up.narrow(-1, nope, v_head_dim).contiguous()};
  RecomputeFn core = [backend, l = layer](const TensorList& in) {
    return TensorList{backend->Attend(l, in[0], in[1], in[2])};
  };
  at::Tensor o =
      recompute_core_attn ? Checkpoint(core, qkv, {})[0] : core(qkv)[0];
  return linear_proj->Forward(o.reshape({t, hp * v_head_dim}));
}

}  // namespace verl::models
