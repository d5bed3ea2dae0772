// File: verl/infer/kernel_table.h
//
// The engine's hand-written fp32 kernels as a table of function pointers.
// The same source (kernels_impl.inc) is compiled once per ISA (baseline
// SSE2, AVX2+FMA, AVX-512) into its own translation unit; kernels.h picks
// the table for the CPU at start-up. All pointers take raw fp32 buffers:
// no tensors, no allocation.
#ifndef VERL_INFER_KERNEL_TABLE_H_
#define VERL_INFER_KERNEL_TABLE_H_

#include <cstdint>

#include "verl/infer/cpu_isa.h"

namespace verl::infer {

// Attention of single query rows over a paged KV cache [num_blocks,
// block_size, num_kv_heads, head_dim]: query j attends to the positions
// [0, lens[j]) of its block table (within the window). A decode sequence
// is one query; a prefill chunk is one query per token, token t of a chunk
// of n new tokens ending at context length L having lens = L - n + t + 1
// (causal) and the chunk's table (table_of). Job `j * num_kv_heads + h`
// computes the query heads of kv head `h` (GQA: num_heads / num_kv_heads
// of them) of query `j`.
struct DecodeAttentionArgs {
  int64_t block_size = 0, num_kv_heads = 0, head_dim = 0, num_heads = 0;
  int64_t window = 0;               // sliding window (0: full context)
  int64_t q_stride = 0;             // floats between consecutive query rows
  float scale = 1.f;                // softmax scale (1/sqrt(head_dim))
  const float* q = nullptr;         // query rows [., num_heads, head_dim]
  float* out = nullptr;             // [., num_heads, head_dim], contiguous rows
  const float* k = nullptr;         // the layer's key cache
  const float* v = nullptr;         // the layer's value cache
  const int64_t* rows = nullptr;    // per sequence: its query/output row
  const int64_t* lens = nullptr;    // per sequence: context length
  const int32_t* tables = nullptr;  // [num_tables, table_width] block ids
  int64_t table_width = 0;
  // Per query: its row of `tables` (null: query j uses row j).
  const int64_t* table_of = nullptr;
};

// out (+)= x w^T (+ bias) for a few rows of x (decode at batch <= 8), fp32,
// row-major with leading dimensions; `w` is [n, k] (nn.Linear / embedding
// layout), each row one contiguous stream.
struct SmallGemmArgs {
  int64_t m = 0, k = 0;  // rows of x (1..8), inner dimension
  const float* x = nullptr;
  int64_t ldx = 0;
  const float* w = nullptr;
  int64_t ldw = 0;
  const float* bias = nullptr;  // [n] or null
  float* out = nullptr;
  int64_t ldo = 0;
  bool accumulate = false;  // out += x w instead of out = x w
};
inline constexpr int64_t kMaxSmallGemmRows = 8;

// out (+)= x w (+ bias) with w [k, n] pre-packed (PackGemmPanels, kernels.h)
// into panels of kGemmPanel columns: element (kk, p * kGemmPanel + c) at
// w[(p * k + kk) * kGemmPanel + c], zero past column n. Every weight is read
// as one contiguous stream in the order the kernel needs it, so nothing is
// packed per call (BLIS packs the weights on every call: at decode's 16-128
// rows that packing costs about twice the arithmetic). Each output element
// is one fma chain over kk = 0..k-1 in order: its value does not depend on
// m, the row blocking, the panel range or the thread count.
inline constexpr int64_t kGemmPanel = 64;
//
// x is first repacked (panel_pack_x) into row blocks of the ISA's tile
// height, each stored [k][rows] so that a tile's broadcasts come from one
// stream: m * k floats at `xpack`.
struct PanelGemmArgs {
  int64_t m = 0, k = 0, n = 0;
  const float* x = nullptr;  // [m, k], row stride ldx
  int64_t ldx = 0;
  float* xpack = nullptr;       // m * k floats (panel_pack_x)
  const float* w = nullptr;     // packed panels
  const float* bias = nullptr;  // [n] or null
  float* out = nullptr;         // [m, n], row stride ldo
  int64_t ldo = 0;
  bool accumulate = false;  // out += x w instead of out = x w
};

// Trivial aggregate (no member initialisers), so the per-ISA translation
// units emit no constructor the linker could share.
struct KernelTable {
  CpuIsa isa;
  // Runs jobs [begin, end) of DecodeAttentionArgs.
  void (*decode_attention)(const DecodeAttentionArgs& a, int64_t begin,
                           int64_t end);
  // out = w * (x * rsqrt(mean(x^2) + eps)) over n (HF RMSNorm); out may
  // alias x.
  void (*rms_norm_row)(const float* x, const float* w, float eps, int64_t n,
                       float* out);
  // Rotate-half RoPE of one head of d (even) in place.
  void (*rope_head)(float* x, const float* cos, const float* sin, int64_t d);
  // Softmax statistics of x[0, n) in chunks of `chunk` elements: per chunk
  // c its maximum max[c] and sum[c] = sum_i exp((x_i - max[c]) * inv_t).
  void (*chunk_softmax_stats)(const float* x, int64_t n, int64_t chunk,
                              float inv_t, float* max, float* sum);
  // w[i] = exp((x[i] - m) * inv_t) for i < n; returns their sum.
  double (*scaled_exp)(const float* x, int64_t n, float m, float inv_t,
                       float* w);
  // Columns [n0, n1) of the small-batch GEMM (parallel callers split n).
  void (*small_gemm_nt)(const SmallGemmArgs& a, int64_t n0, int64_t n1);
  // Row blocks of the panel GEMM's x for m rows.
  int64_t (*panel_row_blocks)(int64_t m);
  // Packs row blocks [b0, b1) of a.x into a.xpack (parallel callers split
  // the blocks); then panel_gemm reads a.xpack.
  void (*panel_pack_x)(const PanelGemmArgs& a, int64_t b0, int64_t b1);
  // Panels [p0, p1) of the panel GEMM, all m rows (parallel callers split
  // the panels).
  void (*panel_gemm)(const PanelGemmArgs& a, int64_t p0, int64_t p1);
};

// The table of each per-ISA translation unit (kernels_<isa>.cc); call only
// through KernelsFor() (kernels.h), which checks that the CPU supports it.
namespace kernels_baseline {
const KernelTable& Table();
}
namespace kernels_avx2 {
const KernelTable& Table();
}
namespace kernels_avx512 {
const KernelTable& Table();
}

}  // namespace verl::infer

#endif  // VERL_INFER_KERNEL_TABLE_H_
