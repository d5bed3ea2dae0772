// File: verl/models/attention.h
//
// The attention seam of the decoder. The model computes q/k/v (after RoPE and
// q/k-norm) for all tokens of one forward and hands them to an
// AttentionBackend: the training path uses VarlenCausalAttention over packed
// sequences; the rollout engine plugs in its paged-KV-cache backend.
#ifndef VERL_MODELS_ATTENTION_H_
#define VERL_MODELS_ATTENTION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace verl::models {

// Per-forward token layout: tokens of all sequences concatenated ("packed",
// no padding).
class AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;
  // q: [T, n_heads, head_dim]; k, v: [T, n_kv_heads, head_dim] for this
  // forward's tokens, after RoPE and q/k-norm. Returns [T, n_heads, head_dim].
  // `layer` indexes the decoder layer. Scores are scaled by head_dim^-0.5
  // (callers wanting another scale pre-scale q). Backends in verl/models
  // also accept v with its own head dim (MLA's v_head_dim); the output then
  // has v's head dim.
  virtual at::Tensor Attend(int64_t layer, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v) = 0;
};

// Causal self-attention within each packed sequence (flash-attn varlen
// semantics): sequence s spans tokens [cu_seqlens[s], cu_seqlens[s+1]).
// Grouped-query attention (n_heads a multiple of n_kv_heads), scale
// head_dim^-0.5, softmax in fp32. A layer with window w > 0 lets token i see
// keys j with i - w < j <= i (HF's sliding-window mask).
class VarlenCausalAttention : public AttentionBackend {
 public:
  // `layer_windows[l]` is layer l's sliding window (0 or missing => full).
  // With `fused` (the default), fp32 CPU inputs with v's head dim equal to
  // q's go through FusedVarlenAttention (fused_ops.h: blocked, the masked
  // half skipped, unless VERL_FUSED_OPS=0); otherwise, and for other dtypes
  // and devices, the ATen graph below.
  explicit VarlenCausalAttention(std::vector<int64_t> cu_seqlens,
                                 std::vector<int64_t> layer_windows = {},
                                 bool fused = true);

  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override;

  const std::vector<int64_t>& cu_seqlens() const { return cu_seqlens_; }

 private:
  // Sequences are processed in padded groups of similar length: one gather
  // into [n, Lmax, ...], one batched masked attention, one gather back (no
  // per-sequence slicing, whose backward would cost O(num_seqs x T)).
  struct Group {
    at::Tensor gather;   // [n * Lmax] packed token index per padded slot
    at::Tensor scatter;  // [tokens of the group] padded slot per packed token
    at::Tensor tokens;   // [tokens of the group] packed token indices
    at::Tensor key_pad;  // [n, 1, 1, 1, Lmax] true where the key is padding
    int64_t n = 0, max_len = 0;
  };
  std::vector<Group> groups_;
  std::vector<int64_t> cu_seqlens_;
  std::vector<int64_t> layer_windows_;
  bool fused_ = true;
};

// Attention of one sequence: q [L, n_heads, d], k/v [L, n_kv_heads, d], causal
// with optional window. Exposed for backends that gather a sequence's keys
// themselves (q may be the last Lq of Lk positions: query i sits at key
// position Lk - Lq + i).
at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, int64_t window);

}  // namespace verl::models

#endif  // VERL_MODELS_ATTENTION_H_
