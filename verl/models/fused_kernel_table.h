// File: verl/models/fused_kernel_table.h
//
// The training ops' hand-written fp32 row kernels (fused_ops.h) as a table of
// function pointers. fused_kernels_impl.inc is compiled once per ISA
// (baseline SSE2, AVX2+FMA, AVX-512) over the shared vector layer
// (verl/core/simd_impl.inc); fused_ops.cc picks the table for
// core::ActiveCpuIsa(). Every kernel works on rows [r0, r1) of row-major
// fp32 buffers, so callers split rows across threads; no tensors, no
// allocation.
#ifndef VERL_MODELS_FUSED_KERNEL_TABLE_H_
#define VERL_MODELS_FUSED_KERNEL_TABLE_H_

#include <cstdint>

#include "verl/core/cpu_isa.h"

namespace verl::models {

// Fused causal attention (fused_ops.h FusedVarlenAttention): queries and
// keys in blocks of kAttnBlock rows. A packed sequence occupies tokens
// [start, start + len) of the [T, heads, d] row-major tensors; token i of it
// sees keys j with j <= i and, when window > 0, i - j < window; query head h
// reads kv head h / (n_heads / n_kv). Scores are scale * q.k.
constexpr int64_t kAttnBlock = 64;

// The attention kernels' inputs (trivial aggregate, filled by fused_ops.cc).
struct AttnArgs {
  // [T, n_heads, d] queries (and, backward, the output's gradient); [T,
  // n_kv, d] keys/values are only read through kt/vt/kp/vp.
  const float* q;
  const float* dout;
  // Keys and values transposed: [n_kv, d, ldt] with ldt >= T + kAttnBlock
  // (column t = token t; zero tail).
  const float* kt;
  const float* vt;
  int64_t ldt;
  // Row operands with the head dim zero-padded to dp (a multiple of 16):
  // [T, n_heads, dp] qp/doutp, [T, n_kv, dp] kp/vp (the unpadded tensors
  // when d == dp). Backward only, except vp.
  const float* qp;
  const float* doutp;
  const float* kp;
  const float* vp;
  // Backward: [T, n_heads] the forward's logsumexp of the scaled scores per
  // query row, and delta = sum_d dout * out.
  const float* lse;
  const float* delta;
  int64_t n_heads, n_kv, d, dp, window;
  float scale;
};

// Floats of workspace one attention kernel call needs (one workspace per
// concurrently running call).
inline int64_t AttnWorkspaceFloats(int64_t dp) {
  return 2 * kAttnBlock * kAttnBlock + 2 * kAttnBlock * dp + 2 * kAttnBlock;
}

// Trivial aggregate (no member initialisers), so the per-ISA translation
// units emit no constructor the linker could share.
struct FusedKernelTable {
  core::CpuIsa isa;
  // RMSNorm over rows of n: rstd[r] = 1 / sqrt(mean(x_r^2) + eps),
  // y_r = w * (x_r * rstd[r]).
  void (*rms_norm_fwd)(const float* x, const float* w, float eps, int64_t n,
                       int64_t r0, int64_t r1, float* y, float* rstd);
  // Its backward: dx_r = rstd (dy_r w - xhat_r mean(dy_r w xhat_r)) with
  // xhat = x rstd; dw_acc += sum_r dy_r xhat_r.
  void (*rms_norm_bwd)(const float* x, const float* w, const float* rstd,
                       const float* dy, int64_t n, int64_t r0, int64_t r1,
                       float* dx, float* dw_acc);
  // SwiGLU y = silu(g) * u over rows of n (leading dimensions in floats).
  void (*swiglu_fwd)(const float* g, int64_t ldg, const float* u, int64_t ldu,
                     int64_t n, int64_t r0, int64_t r1, float* y, int64_t ldy);
  // Its backward: dg = dy u s (1 + g (1 - s)), du = dy g s, s = sigmoid(g).
  void (*swiglu_bwd)(const float* g, int64_t ldg, const float* u, int64_t ldu,
                     const float* dy, int64_t ldy, int64_t n, int64_t r0,
                     int64_t r1, float* dg, int64_t lddg, float* du,
                     int64_t lddu);
  // Rotate-half RoPE of tokens [r0, r1): x token t, head h at
  // x + t * ldx + h * d; cos/sin [T, d]; out [T, heads, d] contiguous.
  // Forward: out = x cos + rotate_half(x) sin; backward (the transpose):
  // out = x cos + rotate_half^T(x sin).
  void (*rope)(const float* x, int64_t ldx, int64_t heads, int64_t d,
               const float* cos, const float* sin, bool backward, int64_t r0,
               int64_t r1, float* out);
  // Log-softmax statistics of rows of v logits z = x * inv_t:
  // lse[r], logp[r] = z[label[r]] - lse[r], and when ent is non-null the
  // entropy ent[r] = lse[r] - sum softmax(z) z.
  void (*log_prob_fwd)(const float* x, int64_t v, const int64_t* labels,
                       float inv_t, int64_t r0, int64_t r1, float* logp,
                       float* lse, float* ent);
  // Gradient w.r.t. x of sum_r g_logp[r] logp[r] + g_ent[r] ent[r] (either
  // g may be null): dx = inv_t (onehot(label) g_logp - p (g_logp + g_ent
  // (log p + H))). dx may alias x.
  void (*log_prob_bwd)(const float* x, int64_t v, const int64_t* labels,
                       float inv_t, const float* lse, const float* ent,
                       const float* g_logp, const float* g_ent, int64_t r0,
                       int64_t r1, float* dx);
  // Attention forward of query rows [q0, q1) of head h of one sequence:
  // out [T, n_heads, d] rows and lse [T, n_heads] (log sum exp of the
  // scaled scores) of those queries. Keys in blocks of kAttnBlock with
  // online softmax; key blocks no query of the range sees are skipped.
  void (*attn_fwd)(const AttnArgs& a, int64_t start, int64_t len, int64_t h,
                   int64_t q0, int64_t q1, float* ws, float* out, float* lse);
  // Attention backward of key rows [k0, k1) (at most kAttnBlock) of kv head
  // g of one sequence, probabilities recomputed from q, k and lse: writes
  // those rows of dk, dv ([T, n_kv, d]; summed over the group's query
  // heads) and adds their part of dq to dq_acc ([T, n_heads, dp]).
  void (*attn_bwd)(const AttnArgs& a, int64_t start, int64_t len, int64_t g,
                   int64_t k0, int64_t k1, float* ws, float* dk, float* dv,
                   float* dq_acc);
};

// The table of each per-ISA translation unit; call through
// FusedKernels() (fused_ops.h), which checks that the CPU supports it.
namespace fused_kernels_baseline {
const FusedKernelTable& Table();
}
namespace fused_kernels_avx2 {
const FusedKernelTable& Table();
}
namespace fused_kernels_avx512 {
const FusedKernelTable& Table();
}

}  // namespace verl::models

#endif  // VERL_MODELS_FUSED_KERNEL_TABLE_H_
