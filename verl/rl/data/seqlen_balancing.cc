// File: verl/rl/data/seqlen_balancing.cc
#include "verl/rl/data/seqlen_balancing.h"

#include <algorithm>
#include <numeric>
#include <queue>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::rl {
namespace {

// One part of a KK state: total and (index, value) items.
struct Part {
  int64_t sum = 0;
  std::vector<std::pair<int64_t, int64_t>> items;
  void Merge(const Part& o) {
    sum += o.sum;
    items.insert(items.end(), o.items.begin(), o.items.end());
  }
  // verl's Set ordering: by sum, then #items, then the item lists.
  bool operator<(const Part& o) const {
    if (sum != o.sum) return sum < o.sum;
    if (items.size() != o.items.size()) return items.size() < o.items.size();
    return items < o.items;
  }
};

// A KK state: k parts sorted descending; spread = largest − smallest.
struct State {
  std::vector<Part> parts;
  State(const std::vector<std::pair<int64_t, int64_t>>& items, int64_t k)
      : parts(k) {
    for (size_t i = 0; i < items.size(); ++i) {
      parts[i].sum += items[i].second;
      parts[i].items.push_back(items[i]);
    }
    Sort();
  }
  void Sort() {
    std::sort(parts.begin(), parts.end(),
              [](const Part& a, const Part& b) { return b < a; });
  }
  int64_t Spread() const { return parts.front().sum - parts.back().sum; }
  // Largest differencing: pair my i-th largest with the other's i-th smallest.
  void Merge(const State& o) {
    const size_t k = parts.size();
    for (size_t i = 0; i < k; ++i) parts[i].Merge(o.parts[k - 1 - i]);
    Sort();
  }
};

// Max-heap on spread (ties: larger first part first), like verl's heapq with
// its inverted __lt__.
struct StateLess {
  bool operator()(const State& a, const State& b) const {
    if (a.Spread() != b.Spread()) return a.Spread() < b.Spread();
    return a.parts[0] < b.parts[0];
  }
};

}  // namespace

int64_t SeqlenWorkload(int64_t seqlen) {
  return 24576 * seqlen + seqlen * seqlen;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> KarmarkarKarp(
    const std::vector<int64_t>& values, int64_t k, bool equal_size) {
  const int64_t n = static_cast<int64_t>(values.size());
  if (k <= 0 || n < k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seqlen balancing: cannot split ", n, " items into ", k, " parts"));
  }
  if (equal_size && n % k != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "seqlen balancing: ", n, " items do not split evenly into ", k,
        " parts (batch size must be divisible by the DP size)"));
  }
  std::vector<std::pair<int64_t, int64_t>> sorted;  // (value, index)
  for (int64_t i = 0; i < n; ++i) sorted.emplace_back(values[i], i);
  std::sort(sorted.begin(), sorted.end());
  std::priority_queue<State, std::vector<State>, StateLess> heap;
  if (equal_size) {
    for (int64_t off = 0; off < n; off += k) {
      std::vector<std::pair<int64_t, int64_t>> items;
      for (int64_t i = 0; i < k; ++i)
        items.emplace_back(sorted[off + i].second, sorted[off + i].first);
      heap.emplace(items, k);
    }
  } else {
    for (const auto& [v, i] : sorted)
      heap.emplace(std::vector<std::pair<int64_t, int64_t>>{{i, v}}, k);
  }
  while (heap.size() > 1) {
    State a = heap.top();
    heap.pop();
    State b = heap.top();
    heap.pop();
    a.Merge(b);
    heap.push(std::move(a));
  }
  std::vector<std::vector<int64_t>> out;
  for (const Part& p : heap.top().parts) {
    std::vector<int64_t> idx;
    for (const auto& [i, v] : p.items) idx.push_back(i);
    std::sort(idx.begin(), idx.end());
    out.push_back(std::move(idx));
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> GetSeqlenBalancedPartitions(
    const std::vector<int64_t>& values, int64_t k, bool equal_size) {
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      KarmarkarKarp(values, k, equal_size);
  if (!parts.ok()) return parts;
  std::vector<int> seen(values.size(), 0);
  for (const auto& p : *parts) {
    if (p.empty()) {
      return absl::InternalError("seqlen balancing produced an empty part");
    }
    for (int64_t i : p) ++seen[i];
  }
  for (int s : seen)
    if (s != 1) return absl::InternalError("seqlen balancing lost an index");
  return parts;
}

std::map<std::string, double> SeqlenUnbalanceMetrics(
    const std::vector<int64_t>& seqlens,
    const std::vector<std::vector<int64_t>>& partitions,
    const std::string& prefix) {
  const size_t k = partitions.size();
  const size_t chunk = seqlens.size() / k;
  int64_t lo = INT64_MAX, hi = INT64_MIN, total = 0;
  for (size_t off = 0; off + chunk <= seqlens.size() && chunk > 0;
       off += chunk) {
    const int64_t s = std::accumulate(
        seqlens.begin() + off, seqlens.begin() + off + chunk, int64_t{0});
    lo = std::min(lo, s);
    hi = std::max(hi, s);
    total += s;
  }
  int64_t blo = INT64_MAX, bhi = INT64_MIN;
  for (const auto& p : partitions) {
    int64_t s = 0;
    for (int64_t i : p) s += seqlens[i];
    blo = std::min(blo, s);
    bhi = std::max(bhi, s);
  }
  return {{prefix + "/min", static_cast<double>(lo)},
          {prefix + "/max", static_cast<double>(hi)},
          {prefix + "/minmax_diff", static_cast<double>(hi - lo)},
          {prefix + "/balanced_min", static_cast<double>(blo)},
          {prefix + "/balanced_max", static_cast<double>(bhi)},
          {prefix + "/mean", static_cast<double>(total) / k}};
}

namespace {

// KK (equal size) of the rows `rows` on their workloads `work` into k parts;
// each part sorted by workload ascending, then [even] + reversed([odd]).
absl::StatusOr<std::vector<std::vector<int64_t>>> BalancedParts(
    const std::vector<int64_t>& work, const std::vector<int64_t>& rows,
    int64_t k) {
  std::vector<int64_t> sub;
  for (int64_t r : rows) sub.push_back(work[r]);
  VERL_ASSIGN_OR_RETURN(
      auto parts, GetSeqlenBalancedPartitions(sub, k, /*equal_size=*/true));
  for (auto& p : parts) {
    std::stable_sort(p.begin(), p.end(),
                     [&](int64_t a, int64_t b) { return sub[a] < sub[b]; });
    std::vector<int64_t> reordered;
    for (size_t i = 0; i < p.size(); i += 2) reordered.push_back(rows[p[i]]);
    std::vector<int64_t> odd;
    for (size_t i = 1; i < p.size(); i += 2) odd.push_back(rows[p[i]]);
    reordered.insert(reordered.end(), odd.rbegin(), odd.rend());
    p = std::move(reordered);
  }
  return parts;
}

}  // namespace

absl::StatusOr<BalancedOrder> BalanceBatch(const std::vector<int64_t>& seqlens,
                                           int64_t dp_size,
                                           int64_t mini_batch_rows) {
  const int64_t n = static_cast<int64_t>(seqlens.size());
  std::vector<int64_t> work;
  for (int64_t l : seqlens) work.push_back(SeqlenWorkload(l));
  const int64_t block = mini_batch_rows > 0 ? mini_batch_rows : n;
  if (n % block != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("balance_batch: a batch of ", n,
                     " rows does not split into ", "mini-batches of ", block));
  }
  BalancedOrder out;
  out.partitions.resize(dp_size);
  for (int64_t start = 0; start < n; start += block) {
    std::vector<int64_t> rows(block);
    std::iota(rows.begin(), rows.end(), start);
    VERL_ASSIGN_OR_RETURN(auto parts, BalancedParts(work, rows, dp_size));
    for (int64_t r = 0; r < dp_size; ++r) {
      out.order.insert(out.order.end(), parts[r].begin(), parts[r].end());
      out.partitions[r].insert(out.partitions[r].end(), parts[r].begin(),
                               parts[r].end());
    }
  }
  out.metrics = SeqlenUnbalanceMetrics(seqlens, out.partitions);
  return out;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> RearrangeMicroBatches(
    const std::vector<int64_t>& seqlens, int64_t max_token_len,
    int64_t min_num_micro_batch, int64_t num_batches_divided_by) {
  const int64_t n = static_cast<int64_t>(seqlens.size());
  if (n == 0) return absl::InvalidArgumentError("empty batch");
  const int64_t longest = *std::max_element(seqlens.begin(), seqlens.end());
  if (max_token_len < longest) {
    return absl::InvalidArgumentError(
        absl::StrCat("ppo_max_token_len_per_gpu (", max_token_len,
                     ") must be >= the longest sequence (", longest, ")"));
  }
  const int64_t total =
      std::accumulate(seqlens.begin(), seqlens.end(), int64_t{0});
  int64_t num = std::min(n, (total + max_token_len - 1) / max_token_len);
  num = std::max(num, min_num_micro_batch);
  if (num_batches_divided_by > 0) {
    num = (num + num_batches_divided_by - 1) / num_batches_divided_by *
          num_batches_divided_by;
  }
  if (num > n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dynamic batching needs ", num, " micro-batches for ", n, " samples"));
  }
  std::vector<int64_t> work;
  for (int64_t l : seqlens) work.push_back(SeqlenWorkload(l));
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      GetSeqlenBalancedPartitions(work, num, /*equal_size=*/false);
  if (!parts.ok()) return parts;
  auto key = [&](const std::vector<int64_t>& p) {
    int64_t s = 0;
    for (int64_t i : p) s += work[i];
    return std::make_pair(s, p.empty() ? int64_t{0} : p[0]);
  };
  std::sort(parts->begin(), parts->end(),
            [&](const auto& a, const auto& b) { return key(a) > key(b); });
  std::vector<std::vector<int64_t>> even, out;
  for (size_t i = 0; i < parts->size(); i += 2) even.push_back((*parts)[i]);
  out.assign(even.rbegin(), even.rend());
  for (size_t i = 1; i < parts->size(); i += 2) out.push_back((*parts)[i]);
  return out;
}

std::vector<int64_t> RestoreOrderIndex(
    const std::vector<std::vector<int64_t>>& micro_batches) {
  std::vector<int64_t> flat;
  for (const auto& mb : micro_batches)
    flat.insert(flat.end(), mb.begin(), mb.end());
  std::vector<int64_t> inverse(flat.size());
  for (size_t pos = 0; pos < flat.size(); ++pos) inverse[flat[pos]] = pos;
  return inverse;
}

}  // namespace verl::rl
