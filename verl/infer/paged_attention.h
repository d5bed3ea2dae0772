// File: verl/infer/paged_attention.h
//
// The rollout engine's AttentionBackend. Before each forward the engine
// describes the packed batch (per sequence: where its query tokens sit in
// the packed layout, its context length after this step, its block table);
// in every layer Attend() then
//   1. writes this step's K/V into the sequences' cache slots, and
//   2. attends each sequence's queries over its cached context (causal
//      within the chunk, grouped-query, optional sliding window).
// fp32: every query row of the step, decode tokens and prefill chunks
// alike, goes through one kernel (kernels.h, run-time ISA dispatch) that
// reads each K/V block straight from the cache once per kv head group (no
// gather copy, no temporaries), keeps the online-softmax state in
// registers, parallel over (query row, kv head); a prefill token is a
// query over its causal prefix of the chunk's block table (the chunk's own
// K/V are written first). Other dtypes gather each sequence's context and
// use the model's dense CausalAttention.
#ifndef VERL_INFER_PAGED_ATTENTION_H_
#define VERL_INFER_PAGED_ATTENTION_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "verl/infer/kv_cache.h"
#include "verl/models/attention.h"

namespace verl::infer {

struct AttentionSequence {
  int64_t query_start = 0;  // first row of this sequence in the packed batch
  int64_t query_len = 0;    // new tokens this step
  int64_t context_len = 0;  // tokens in the cache after this step
  const std::vector<BlockId>* block_table = nullptr;
};

class PagedAttention : public models::AttentionBackend {
 public:
  // `layer_windows[l]`: sliding window of layer l (0 or missing => full).
  PagedAttention(KvCache* cache, std::vector<int64_t> layer_windows = {});

  // Sizes the per-step tables for up to `max_seqs` sequences of up to
  // `max_blocks_per_seq` blocks, so that decode steps never grow them (the
  // block-table matrix widens as contexts grow; without this it
  // re-allocates at block boundaries).
  void Reserve(int64_t max_seqs, int64_t max_blocks_per_seq);

  // Sets the layout of the next forward (`num_tokens` packed rows).
  void Prepare(const std::vector<AttentionSequence>& seqs, int64_t num_tokens);

  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override;

  // Attend() on raw fp32 rows, without tensors or heap allocation (the
  // fused forward's decode loop): this step's q [T, num_heads * d], k and v
  // [T, num_kv_heads * d], each with row stride `ld` floats (e.g. views
  // into one fused qkv buffer); the result into out [T, num_heads * d],
  // contiguous rows. False, nothing done, unless the cache is fp32 and not
  // latent (then call Attend).
  bool AttendRows(int64_t layer, const float* q, const float* k, const float* v,
                  int64_t ld, int64_t num_heads, float* out);

  // Wall time spent in Attend() so far (cache writes + attention).
  double attend_seconds() const { return attend_seconds_; }

 protected:
  // The layout Prepare() was given and each packed row's cache slot.
  const std::vector<AttentionSequence>& sequences() const { return seqs_; }
  // Built on first use after Prepare (only the tensor paths need it).
  const at::Tensor& slot_mapping() const;
  double& mutable_attend_seconds() { return attend_seconds_; }

 private:
  int64_t Window(int64_t layer) const;
  // fp32 rows x [T, n_kv * d] (row stride `ld`) into `cache` at the slots.
  void WriteSlots(const float* x, int64_t ld, float* cache) const;
  // The blocked kernel over every query row of the step (fp32): q rows of
  // num_heads * d floats with stride q_stride, out contiguous rows.
  void BlockedAttention(int64_t layer, const float* q, int64_t q_stride,
                        int64_t num_heads, float* out) const;
  bool Fp32Cache() const;
  // Cache slots of sequence s's context positions [0, context_len).
  at::Tensor ContextSlots(const AttentionSequence& s) const;

  KvCache* cache_;
  std::vector<int64_t> layer_windows_;
  std::vector<AttentionSequence> seqs_;
  int64_t num_tokens_ = 0;
  std::vector<int64_t> slots_;       // cache slot of each packed token
  mutable at::Tensor slot_mapping_;  // slots_ as a [T] long tensor, or
                                     // undefined until slot_mapping()
  // Prefill chunks and decode sequences: their index in seqs_ (the
  // gather path of other dtypes).
  std::vector<int64_t> prefill_, decode_;
  // The blocked kernel's arguments: per query row its packed row, context
  // length (causal within a chunk) and table row; the tables of the
  // sequences with queries, dense [n, table_width_]. Prefill tokens are
  // listed first, last, second, ... of each chunk, so that contiguous job
  // ranges (ParallelFor's split) get about equal causal work.
  std::vector<int64_t> query_rows_, query_lens_, query_tables_;
  std::vector<int32_t> tables_;
  int64_t table_width_ = 0;
  std::vector<int64_t> with_queries_;  // Prepare's scratch
  double attend_seconds_ = 0;
};

}  // namespace verl::infer

#endif  // VERL_INFER_PAGED_ATTENTION_H_
