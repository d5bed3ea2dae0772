// File: verl/rl/data/seqlen_balancing.h
//
// Sequence-length balancing (verl/utils/seqlen_balancing.py): Karmarkar–Karp
// largest-differencing partitioning, the trainer's DP balancing reorder
// (trainer.balance_batch) with its global_seqlen/* metrics, and dynamic
// micro-batch partitions under a token budget (use_dynamic_bsz).
#ifndef VERL_RL_DATA_SEQLEN_BALANCING_H_
#define VERL_RL_DATA_SEQLEN_BALANCING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::rl {

// 24576·L + L²: verl's calibrated FLOPs proxy of one sequence of length L.
int64_t SeqlenWorkload(int64_t seqlen);

// Karmarkar–Karp into k parts (verl's tie-breaking). equal_size requires
// n % k == 0 and gives every part n/k items. Parts' indices are ascending.
absl::StatusOr<std::vector<std::vector<int64_t>>> KarmarkarKarp(
    const std::vector<int64_t>& values, int64_t k, bool equal_size);

// Same contract, checked: every index exactly once, no empty part.
absl::StatusOr<std::vector<std::vector<int64_t>>> GetSeqlenBalancedPartitions(
    const std::vector<int64_t>& values, int64_t k, bool equal_size);

struct BalancedOrder {
  // New batch order. Whole-batch mode: contiguous chunks of B/dp_size rows go
  // to DP ranks. Per-mini-batch mode: every mini-batch is its dp parts in
  // rank order (what the trainer's per-mini-batch sharding hands out).
  std::vector<int64_t> order;
  std::vector<std::vector<int64_t>> partitions;
  // global_seqlen/{min,max,minmax_diff,balanced_min,balanced_max,mean}
  std::map<std::string, double> metrics;
};

// trainer.balance_batch: KK (equal_size) on workloads of `seqlens` into
// dp_size parts; each part sorted by workload ascending and reordered as
// [even positions] + reversed([odd positions]) (small at both ends).
// mini_batch_rows > 0 balances each consecutive block of that many rows on
// its own (a departure from verl, which balances the whole batch): every
// mini-batch then holds the same rows for any dp_size, so training does not
// depend on the number of processes. partitions[r] is rank r's rows.
absl::StatusOr<BalancedOrder> BalanceBatch(const std::vector<int64_t>& seqlens,
                                           int64_t dp_size,
                                           int64_t mini_batch_rows = 0);

// verl's log_seqlen_unbalance metrics: min/max of contiguous equal chunks
// (before) vs the balanced partitions' sums, prefixed with `prefix`.
std::map<std::string, double> SeqlenUnbalanceMetrics(
    const std::vector<int64_t>& seqlens,
    const std::vector<std::vector<int64_t>>& partitions,
    const std::string& prefix = "global_seqlen");

// Dynamic micro-batching: n = max(min_num_micro_batch, min(B, ⌈Σ L /
// max_token_len⌉)), rounded up to a multiple of num_batches_divided_by (>0);
// KK (not equal size) on workloads; micro-batches sorted by workload
// descending, then reordered as [::2][::-1] + [1::2] (small at both ends).
// Error if a single sequence exceeds max_token_len.
absl::StatusOr<std::vector<std::vector<int64_t>>> RearrangeMicroBatches(
    const std::vector<int64_t>& seqlens, int64_t max_token_len,
    int64_t min_num_micro_batch = 0, int64_t num_batches_divided_by = 0);

// Inverse permutation of the concatenated micro-batch indices, to restore
// per-sample outputs to the original order.
std::vector<int64_t> RestoreOrderIndex(
    const std::vector<std::vector<int64_t>>& micro_batches);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_SEQLEN_BALANCING_H_
