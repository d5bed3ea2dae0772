// File: verl/infer/fused_forward.h
//
// The rollout engine's forward of a models::CausalLM: the same math as
// CausalLM::Forward + Logits, laid out for decode throughput on CPU:
//  - q/k/v and gate/up projections run as ONE GEMM each, over concatenated
//    copies of the weights owned here, packed [in, out] in the panels of the
//    panel GEMM (kernel_table.h: no per-call packing as BLIS does, and each
//    output value independent of the batch); the model, its parameters and
//    HF names are untouched;
//  - the residual adds are folded into the o_proj / down_proj GEMMs (C += AB);
//  - RMSNorm, q/k-norm + RoPE (table lookup) and SwiGLU are single-pass fp32
//    kernels writing into buffers reused from step to step;
//  - everything works on raw rows (RowsView), not tensor views (each
//    narrow/view allocates a TensorImpl), and attends through
//    PagedAttention::AttendRows: a warm decode step allocates nothing.
// The copies follow the parameters by themselves: every Forward() compares
// each source parameter's version counter and storage with the ones it
// copied, and re-copies what changed (UpdateWeights, LoRA merges, optimizer
// steps on a shared model all bump the version).
//
// Applies to fp32 CPU models without active (unmerged) LoRA adapters and
// without multi-head latent attention; otherwise Forward() is the model's
// own. MoE layers run the model's MoE
// block on the fused path's normed activations.
//
// Tensor-parallel rollout (tensor_parallel.h): with a tp group set, the
// model is this rank's shard; o_proj and down_proj then write a partial
// product that is all-reduced before the residual add (one all-reduce per
// attention and per MLP block; on the model's own forward, bf16, through
// the layers' output hooks), and Logits computes this rank's vocabulary
// rows and all-gathers them (fp32). Without a group (tp = 1) nothing
// changes.
#ifndef VERL_INFER_FUSED_FORWARD_H_
#define VERL_INFER_FUSED_FORWARD_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "verl/models/attention.h"
#include "verl/models/decoder.h"
#include "verl/parallel/process_group.h"

namespace verl::infer {

// Rows of a row-major fp32 matrix in memory owned elsewhere.
struct RowsView {
  float* data = nullptr;
  int64_t rows = 0, cols = 0;
  int64_t ld = 0;  // floats from one row to the next
  float* row(int64_t r) const { return data + r * ld; }
};

// Time and work of the fused path (GEMMs incl. the LM head, and the
// elementwise kernels: embedding, norms, RoPE, SwiGLU).
struct FusedForwardStats {
  double gemm_s = 0, other_s = 0;
  double gemm_flops = 0;
};

class FusedForward {
 public:
  // `max_positions`: RoPE table length (the engine's max_model_len).
  FusedForward(models::CausalLM* model, int64_t max_positions);

  // Whether the fused path runs for the model as it is now.
  bool Applies() const;

  // Sets the tensor-parallel group (size > 1; the model must be its shard
  // with the row-parallel output hooks installed: InstallRowParallelHooks).
  void set_tensor_parallel(std::shared_ptr<parallel::Communicator> group) {
    tp_ = std::move(group);
  }

  // Packed ids/positions [T] -> final-normed hidden [T, H] (fp32 on the
  // fused path; the model's own Forward when the fused path does not apply).
  at::Tensor Forward(const at::Tensor& input_ids,
                     const at::Tensor& position_ids,
                     models::AttentionBackend& attention);
  // The fused path (Applies() must hold) on raw ids/positions [t]: the
  // final-normed hidden rows [t, H] in a buffer of this object, valid until
  // the next call. With a PagedAttention backend over an fp32 cache, a
  // dense model and tp = 1, and no more rows than an earlier call, it
  // allocates nothing (the engine's decode loop).
  RowsView ForwardRows(const int64_t* ids, const int64_t* pos, int64_t t,
                       models::AttentionBackend& attention);
  // hidden [S, H] -> logits [S, V].
  at::Tensor Logits(const at::Tensor& hidden);
  // The LM head by vocabulary range, for a sampler that never needs all
  // logits at once (SampleTokensChunked). HeadVocab(): the head's rows when
  // Logits takes the fused plain-head path, else 0 (not fp32, a biased or
  // active-LoRA head, tensor parallelism); it also re-packs a changed head.
  // HeadChunk (after HeadVocab() > 0, with no weight change since): x's
  // logits of tokens [v0, v1) into out ([x.rows, v1 - v0] row-major; v0 a
  // multiple of kGemmPanel), each value bit-equal to Logits' (the same
  // kernel per element: the weight-streaming kernel at <= 8 rows, the panel
  // GEMM over the packed head above). No allocation once x.rows was seen
  // before.
  int64_t HeadVocab();
  void HeadChunk(RowsView x, int64_t v0, int64_t v1, float* out);

  // Makes the weight copies now (what the first Forward would do), when
  // the fused path applies: the engine calls it at Create, so that this
  // model-load work (vLLM's process_weights_after_loading) is not charged
  // to the first request's prefill. Later weight changes are re-copied by
  // the next Forward as before.
  void Prepack();

  // Bytes held by the fused weight copies (0 until first used).
  int64_t WeightBytes() const;
  const FusedForwardStats& stats() const { return stats_; }

 private:
  // One engine-owned weight: the concatenation along `out` of `sources`
  // ([out_i, in] each, or [out_i] biases), stored as the panel-packed
  // [k = in, n = sum out_i] matrix (biases: [sum out_i]).
  struct Packed {
    std::vector<at::Tensor> sources;
    std::vector<int64_t> versions;
    std::vector<const void*> data;
    at::Tensor value;
    int64_t k = 0, n = 0;
    bool bias = false;
  };
  struct Layer {
    Packed qkv, qkv_bias, o, gate_up, down;
    bool has_bias = false, moe = false;
  };

  // The plain (bias-free, fp32, contiguous, no active LoRA) head weight
  // [V, H] the fused path multiplies by, or null.
  const at::Tensor* PlainHeadWeight() const;
  static Packed MakePacked(std::vector<at::Tensor> sources, bool bias);
  // Re-copies `p` if any source changed since the last copy.
  static void Sync(Packed& p);
  void SyncAll();
  // Packs (or re-packs) the plain head weight into lm_head_; false when
  // there is none (PlainHeadWeight).
  bool SyncHead();
  // out = x w (+ bias), or out += x w when `accumulate`, w = p's packed
  // copy (the panel GEMM); at <= 8 rows from p's sources (the model's own
  // [out, in] weights, read row by row); timed.
  void Gemm(RowsView out, RowsView x, const Packed& p, const float* bias,
            bool accumulate);
  // h += x w (the residual folded in); with tp > 1 through an all-reduced
  // partial product.
  void RowParallelGemm(RowsView h, RowsView x, const Packed& w);
  void Attention(int64_t l, RowsView x, const int64_t* pos,
                 models::AttentionBackend& attention, RowsView h);

  models::CausalLM* model_;
  int64_t max_positions_;
  bool built_ = false;
  std::vector<Layer> layers_;
  Packed lm_head_;  // the plain head [V, H] packed (rows > 8)
  std::vector<const models::Linear*> linears_;  // to detect active LoRA
  at::Tensor cos_, sin_;                        // [max_positions, head_dim]
  // Step buffers (flat), grown on demand and reused.
  at::Tensor residual_, normed_, qkv_, attn_out_, gate_up_, act_, final_;
  at::Tensor xpack_;                            // the panel GEMM's repacked x
  std::shared_ptr<parallel::Communicator> tp_;  // null: tp = 1
  at::Tensor partial_;  // tp > 1: a row-parallel GEMM's partial product
  FusedForwardStats stats_;
};

}  // namespace verl::infer

#endif  // VERL_INFER_FUSED_FORWARD_H_
