// File: verl/parallel/megatron/context_parallel.h
//
// Megatron's context parallelism (`context_parallel_size`, cp): the tokens of
// every packed sequence are split over the ranks of the cp group, and
// attention runs as ring attention over that group.
//
// Layout (Megatron's load balancing for the causal mask, get_batch_on_this_
// cp_rank): each sequence is padded at its end to a multiple of 2*cp*m
// (m = tp under sequence parallelism, else 1), cut into 2*cp equal chunks,
// and cp rank r holds chunks r and 2cp-1-r (early and late tokens, so every
// rank does the same share of the causal work). A rank's tokens are its two
// chunks of sequence 0, then of sequence 1, ... Pad tokens repeat their
// sequence's last token and sit after it, so causally no real token sees
// them; Gather() drops them.
//
// Ring attention (RingAttention): every rank keeps its queries; the K/V
// blocks travel around the ring (send to r+1, receive from r-1, cp-1 steps
// of c10d p2p), and each step's partial result is merged by online softmax
// (running max and sum, flash-attention style), so no rank ever holds more
// than its own queries against one K/V block. Backward recomputes the block
// probabilities from the saved log-sum-exp and passes the K/V blocks around
// again together with their dK/dV accumulators (cp steps; the last step
// hands each block's dK/dV back to its owner), as TransformerEngine's
// AttnFuncWithCPAndKVP2P and ring-flash-attention do. The causal mask is
// exact for any packing: key j is visible to query i when both are in the
// same sequence and j's offset in it is <= i's.
//
//   VERL_ASSIGN_OR_RETURN(CpLayout layout,
//                         CpLayout::Create(cu_seqlens, cp->size(),
//                         cp->rank()));
//   at::Tensor q_local = layout.Shard(q);        // [T_local, heads, d]
//   at::Tensor o_local = RingAttention(q_local, k_local, v_local,
//                                      layout_ptr, cp);
//   at::Tensor o = layout.Gather(o_local, cp);   // [T, heads, d], every rank
//
// Every rank of the cp group must make the same calls in the same order,
// forward and backward. A failed p2p ends the process naming the rank.
#ifndef VERL_PARALLEL_MEGATRON_CONTEXT_PARALLEL_H_
#define VERL_PARALLEL_MEGATRON_CONTEXT_PARALLEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/megatron/mappings.h"

namespace verl::parallel::megatron {

class CpLayout {
 public:
  // `cu_seqlens` of the packed stream (starts at 0, non-decreasing; any
  // lengths). `multiple`: extra factor of the per-sequence padding (tp under
  // sequence parallelism, so the local stream divides by tp).
  // InvalidArgument (one line) for bad sizes or cu_seqlens.
  static absl::StatusOr<CpLayout> Create(const std::vector<int64_t>& cu_seqlens,
                                         int cp, int rank,
                                         int64_t multiple = 1);

  int cp() const { return cp_; }
  int rank() const { return rank_; }
  int64_t num_tokens() const { return num_tokens_; }        // T (unpadded)
  int64_t padded_tokens() const { return padded_tokens_; }  // sum of padded
  int64_t local_tokens() const { return padded_tokens_ / cp_; }
  const std::vector<int64_t>& padded_cu_seqlens() const { return padded_cu_; }

  // This rank's rows of a per-token tensor x [T, ...] (pads repeat their
  // sequence's last row). Differentiable (index_select).
  at::Tensor Shard(const at::Tensor& x) const;
  // Position ids [T] -> this rank's, pads continuing their sequence.
  at::Tensor ShardPositions(const at::Tensor& position_ids) const;
  // This rank's [T_local, ...] -> the whole stream [T, ...] on every rank
  // (all-gather over `cp`, pads dropped). Backward keeps this rank's rows of
  // the gradient: every rank computes the same loss from the gathered
  // tensor, so the parameter gradients summed over cp are the single-
  // process ones (see FinalizeGrads in megatron_gpt.h).
  at::Tensor Gather(const at::Tensor& local, const CommPtr& cp) const;

  // Sequence index and offset within its padded sequence of every token of
  // rank `r` ([T_local] int64): the ring attention's mask.
  const at::Tensor& seq_ids(int r) const { return seq_ids_[r]; }
  const at::Tensor& offsets(int r) const { return offsets_[r]; }

 private:
  int cp_ = 1, rank_ = 0;
  int64_t num_tokens_ = 0, padded_tokens_ = 0;
  std::vector<int64_t> padded_cu_;
  at::Tensor source_;     // [T_local] row of the unpadded stream per token
  at::Tensor pad_shift_;  // [T_local] steps past the last real token (pads)
  at::Tensor unshard_;    // [T] row of the gathered [cp*T_local] per token
  std::vector<at::Tensor> seq_ids_, offsets_;  // per rank
};

// Causal attention of this rank's queries against every rank's keys, over
// the cp ring. q [T_local, heads, d], k/v [T_local, kv_heads, d] (heads a
// multiple of kv_heads; GQA by broadcasting), laid out by `layout`; returns
// [T_local, heads, d]. Scale d^-0.5, softmax statistics in fp32 (double for
// double inputs). Differentiable in q, k, v; cp of size 1 needs no
// communication. Queries are processed in row tiles of at most
// `max_tile_cells` score cells (heads x rows x T_local keys; default 1M, 4
// MiB in fp32), so the transient scores stay bounded and the memory kept
// for backward is q, k, v, the output and one log-sum-exp per query.
constexpr int64_t kRingMaxTileCells = int64_t{1} << 20;
at::Tensor RingAttention(const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v,
                         std::shared_ptr<const CpLayout> layout,
                         const CommPtr& cp,
                         int64_t max_tile_cells = kRingMaxTileCells);

// x sent to cp rank r+1, the tensor of the same shape from r-1 returned
// (the ring's p2p step; even ranks send first, odd ranks receive first, so
// blocking Gloo send/recv cannot deadlock).
at::Tensor RingShift(const at::Tensor& x, Communicator& cp);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_CONTEXT_PARALLEL_H_
