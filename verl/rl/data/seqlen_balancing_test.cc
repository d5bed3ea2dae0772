// File: verl/rl/data/seqlen_balancing_test.cc
#include "verl/rl/data/seqlen_balancing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>

#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

int64_t PartSum(const std::vector<int64_t>& v, const std::vector<int64_t>& p) {
  int64_t s = 0;
  for (int64_t i : p) s += v[i];
  return s;
}

int64_t MaxPartSum(const std::vector<int64_t>& v,
                   const std::vector<std::vector<int64_t>>& parts) {
  int64_t m = 0;
  for (const auto& p : parts) m = std::max(m, PartSum(v, p));
  return m;
}

// Brute force: smallest possible largest part (optionally equal sizes).
int64_t OptimalMaxPartSum(const std::vector<int64_t>& v, int64_t k,
                          bool equal_size) {
  const size_t n = v.size();
  std::vector<int64_t> sums(k, 0), counts(k, 0);
  int64_t best = INT64_MAX;
  std::function<void(size_t)> rec = [&](size_t i) {
    if (i == n) {
      best = std::min(best, *std::max_element(sums.begin(), sums.end()));
      return;
    }
    for (int64_t p = 0; p < k; ++p) {
      if (equal_size && counts[p] == static_cast<int64_t>(n) / k) continue;
      sums[p] += v[i];
      ++counts[p];
      if (sums[p] < best) rec(i + 1);
      sums[p] -= v[i];
      --counts[p];
    }
  };
  rec(0);
  return best;
}

void ExpectValidPartition(const std::vector<std::vector<int64_t>>& parts,
                          size_t n, int64_t k, bool equal_size) {
  ASSERT_EQ(static_cast<int64_t>(parts.size()), k);
  std::vector<int> seen(n, 0);
  for (const auto& p : parts) {
    EXPECT_FALSE(p.empty());
    if (equal_size) {
      EXPECT_EQ(p.size(), n / k);
    }
    for (int64_t i : p) ++seen[i];
  }
  for (int s : seen) EXPECT_EQ(s, 1);
}

TEST(KarmarkarKarpTest, ClassicTwoWayExample) {
  // KK's differencing on {4,5,6,7,8}: 8−7, 6−5, then 4,1,1 → spread 2.
  std::vector<int64_t> v = {4, 5, 6, 7, 8};
  auto parts = *KarmarkarKarp(v, 2, false);
  ExpectValidPartition(parts, 5, 2, false);
  EXPECT_EQ(std::abs(PartSum(v, parts[0]) - PartSum(v, parts[1])), 2);
}

TEST(KarmarkarKarpTest, QualityAgainstBruteForce) {
  std::mt19937 rng(123);
  double ratio_sum = 0.0;
  int trials = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t k = 2 + trial % 3;
    const bool equal = trial % 2 == 0;
    const size_t n = equal ? k * (2 + trial % 2) : 6 + trial % 4;
    std::vector<int64_t> v(n);
    for (auto& x : v) x = std::uniform_int_distribution<int64_t>(1, 100)(rng);
    auto parts = *GetSeqlenBalancedPartitions(v, k, equal);
    ExpectValidPartition(parts, n, k, equal);
    const double opt = OptimalMaxPartSum(v, k, equal);
    const double got = MaxPartSum(v, parts);
    EXPECT_GE(got, opt);
    EXPECT_LE(got, 4.0 / 3.0 * opt) << "trial " << trial;
    ratio_sum += got / opt;
    ++trials;
  }
  EXPECT_LT(ratio_sum / trials, 1.05);  // near-optimal on average
}

TEST(KarmarkarKarpTest, Errors) {
  EXPECT_THAT(KarmarkarKarp({1, 2, 3}, 2, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "seqlen balancing: 3 items do not split evenly into 2 "
                       "parts"));  // 3 % 2 != 0
  EXPECT_THAT(
      KarmarkarKarp({1}, 2, false),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          "seqlen balancing: cannot split 1 items into 2 parts"));  // fewer
                                                                    // items
  EXPECT_THAT(KarmarkarKarp({1, 2}, 0, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "seqlen balancing: cannot split 2 items into 0 parts"));
}

TEST(BalanceBatchTest, EqualSizeReorderAndMetrics) {
  std::vector<int64_t> lens = {1, 2, 3, 4, 5, 6, 7, 8};
  BalancedOrder b = *BalanceBatch(lens, 2);
  ASSERT_EQ(b.order.size(), 8u);
  ExpectValidPartition(b.partitions, 8, 2, true);
  for (const auto& p : b.partitions) {
    // [even positions] + reversed(odd) of the ascending order: the two
    // smallest sit at both ends, the largest in the middle.
    std::vector<int64_t> sorted = p;
    std::sort(sorted.begin(), sorted.end(),
              [&](int64_t a, int64_t c) { return lens[a] < lens[c]; });
    EXPECT_EQ(p.front(), sorted[0]);
    EXPECT_EQ(p.back(), sorted[1]);
    EXPECT_EQ(p[1], sorted[2]);
    EXPECT_EQ(p[2], sorted[3]);
  }
  // Contiguous chunks before balancing: 10 and 26.
  EXPECT_EQ(b.metrics.at("global_seqlen/min"), 10);
  EXPECT_EQ(b.metrics.at("global_seqlen/max"), 26);
  EXPECT_EQ(b.metrics.at("global_seqlen/minmax_diff"), 16);
  EXPECT_EQ(b.metrics.at("global_seqlen/mean"), 18);
  EXPECT_EQ(b.metrics.at("global_seqlen/balanced_min"), 18);
  EXPECT_EQ(b.metrics.at("global_seqlen/balanced_max"), 18);
  EXPECT_THAT(
      BalanceBatch({1, 2, 3}, 2),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "seqlen balancing: 3 items do not split evenly into 2 parts"));
}

TEST(BalanceBatchTest, PerMiniBatchKeepsEveryMiniBatchsRows) {
  const std::vector<int64_t> lens = {9, 1, 8, 2, 7, 3, 6, 4, 5, 5, 1, 9};
  const int64_t mini = 4;  // 3 mini-batches of 4 rows
  for (int64_t dp : {1, 2, 4}) {
    BalancedOrder b = *BalanceBatch(lens, dp, mini);
    ASSERT_EQ(b.order.size(), lens.size());
    ExpectValidPartition(b.partitions, 12, dp, true);
    for (int64_t m = 0; m < 3; ++m) {
      // Mini-batch m of the new order holds exactly rows [4m, 4m+4), and its
      // dp chunks (what rank r trains on) are rank r's part of it.
      std::vector<int64_t> rows(b.order.begin() + m * mini,
                                b.order.begin() + (m + 1) * mini);
      std::sort(rows.begin(), rows.end());
      EXPECT_EQ(rows,
                (std::vector<int64_t>{4 * m, 4 * m + 1, 4 * m + 2, 4 * m + 3}))
          << "dp " << dp << " mini " << m;
      for (int64_t r = 0; r < dp; ++r) {
        const int64_t per = mini / dp;
        std::vector<int64_t> chunk(b.order.begin() + m * mini + r * per,
                                   b.order.begin() + m * mini + (r + 1) * per);
        std::vector<int64_t> part(b.partitions[r].begin() + m * per,
                                  b.partitions[r].begin() + (m + 1) * per);
        EXPECT_EQ(chunk, part);
      }
    }
  }
  // dp=2, mini-batch 0 = lens {9,1,8,2}: balanced halves {9,1} and {8,2}.
  BalancedOrder b = *BalanceBatch(lens, 2, mini);
  EXPECT_EQ(lens[b.order[0]] + lens[b.order[1]], 10);
  EXPECT_THAT(
      BalanceBatch(lens, 2, 5),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          "balance_batch: a batch of 12 rows does not split into"));  // 12
                                                                      // rows,
                                                                      // blocks
                                                                      // of 5
}

TEST(WorkloadTest, Formula) {
  EXPECT_EQ(SeqlenWorkload(0), 0);
  EXPECT_EQ(SeqlenWorkload(10), 245760 + 100);
}

TEST(DynamicBatchTest, TokenBudgetAndOrdering) {
  std::vector<int64_t> lens = {10, 20, 30, 40, 50};
  auto mbs = *RearrangeMicroBatches(lens, 60);
  ASSERT_EQ(mbs.size(), 3u);  // ⌈150/60⌉
  ExpectValidPartition(mbs, 5, 3, false);
  std::vector<int64_t> w;
  for (const auto& mb : mbs) {
    int64_t s = 0;
    for (int64_t i : mb) s += SeqlenWorkload(lens[i]);
    w.push_back(s);
  }
  // Sorted descending d0 ≥ d1 ≥ d2 then [::2][::-1] + [1::2] = d2, d0, d1.
  EXPECT_LE(w[0], w[2]);
  EXPECT_GE(w[1], w[2]);
  EXPECT_EQ(RearrangeMicroBatches(lens, 60, 4)->size(), 4u);
  EXPECT_EQ(RearrangeMicroBatches(lens, 60, 0, 2)->size(), 4u);
  EXPECT_THAT(
      RearrangeMicroBatches(lens, 40),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          "ppo_max_token_len_per_gpu (40) must be >= the longest"));  // 50 >
                                                                      // budget

  std::vector<int64_t> inv = RestoreOrderIndex(mbs);
  std::vector<int64_t> flat;
  for (const auto& mb : mbs) flat.insert(flat.end(), mb.begin(), mb.end());
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(flat[inv[i]], i);
}

}  // namespace
}  // namespace verl::rl
