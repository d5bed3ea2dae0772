// File: verl/models/fused_ops.h
//
// Fused fp32 CPU training ops with their own backward (custom autograd
// functions over the per-ISA row kernels of fused_kernel_table.h): each
// replaces an ATen graph of 5-15 elementwise ops and their saved
// intermediates by one pass forward and one backward, on the path the actor
// trains through (decoder layers, and the LM head + log-prob of
// verl/rl/workers/model_forward.cc). Same math as the unfused graphs
// (fused_ops_test in decoder_test checks values and gradients against them).
//
// Each op runs fused only for fp32 CPU tensors (FusedOpsApply()); for other
// dtypes/devices, or with VERL_FUSED_OPS=0, callers use the ATen graph.
#ifndef VERL_MODELS_FUSED_OPS_H_
#define VERL_MODELS_FUSED_OPS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "verl/models/fused_kernel_table.h"

namespace verl::models {

// The row kernels for core::ActiveCpuIsa(); FusedKernelsFor(isa) is null
// when this CPU cannot run `isa`'s.
const FusedKernelTable& FusedKernels();
const FusedKernelTable* FusedKernelsFor(core::CpuIsa isa);

// Whether the fused ops apply to these tensors: all defined ones fp32 on CPU,
// and the fused ops are enabled (VERL_FUSED_OPS unset or not "0"; read once).
bool FusedOpsApply(std::initializer_list<at::Tensor> tensors);

// HF RMSNorm weight * (x * rsqrt(mean(x^2, -1) + eps)); x [..., n], w [n].
at::Tensor FusedRmsNorm(const at::Tensor& x, const at::Tensor& weight,
                        double eps);

// silu(gate) * up, both [..., n].
at::Tensor FusedSwiGlu(const at::Tensor& gate, const at::Tensor& up);

// Rotate-half RoPE of x [T, heads, d] (any strides with a unit last
// dimension, e.g. a view of a fused projection) with cos/sin [T, d];
// returns a contiguous [T, heads, d]. Not differentiable w.r.t. cos/sin.
at::Tensor FusedRope(const at::Tensor& x, const at::Tensor& cos,
                     const at::Tensor& sin);

// The LM head and the label log-prob in one op: logits = hidden weight^T
// [N, V] (one GEMM), then log_softmax(logits / temperature)[label] and, when
// with_entropy, the entropy of softmax(logits / temperature), row kernels
// in one pass each; backward computes the logits' gradient in place of the
// saved logits (one pass) and the two GEMMs. hidden [N, H], weight [V, H],
// labels [N] int64. Returns {log_probs [N], entropy [N] or undefined}.
// Backward may run once (retain_graph is refused by the saved-tensor
// version check).
struct FusedLogProbs {
  at::Tensor log_probs, entropy;
};
FusedLogProbs FusedLinearLogProbs(const at::Tensor& hidden,
                                  const at::Tensor& weight,
                                  const at::Tensor& labels, double temperature,
                                  bool with_entropy);

// Causal attention within each packed sequence, VarlenCausalAttention's
// math (attention.h): q [T, n_heads, d], k/v [T, n_kv, d] (n_heads a
// multiple of n_kv), sequence s at tokens [cu_seqlens[s], cu_seqlens[s+1]),
// token i sees keys j <= i of its sequence and, with window > 0, only
// i - j < window; scale d^-0.5. Flash-attention style: blocks of queries and
// keys, the blocks above the diagonal (and outside the window) skipped,
// online softmax; the forward saves the per-row logsumexp and the backward
// recomputes the probabilities from q and k (dk/dv summed over each kv
// head's query heads). Returns [T, n_heads, d]. Differentiable once (a
// double backward, create_graph, is refused). `kernels` (tests) picks an
// ISA's kernels; null: FusedKernels().
at::Tensor FusedVarlenAttention(const at::Tensor& q, const at::Tensor& k,
                                const at::Tensor& v,
                                const std::vector<int64_t>& cu_seqlens,
                                int64_t window,
                                const FusedKernelTable* kernels = nullptr);

}  // namespace verl::models

#endif  // VERL_MODELS_FUSED_OPS_H_
