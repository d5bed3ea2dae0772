// File: verl/models/megatron/ring_attention_test.cc
//
// Context-parallel ring attention against the decoder's single-process
// packed attention: runs :ring_attention_worker as cp = 2 and cp = 4
// processes over loopback. The worker checks the load-balanced layout, the
// gathered output and the q/k/v gradients (<= 1e-5 relative) on packed
// sequences of mixed lengths and exits non-zero on a mismatch. Layout
// argument errors are checked in-process.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/parallel/megatron/context_parallel.h"
#include "verl/parallel/test_worker.h"

namespace verl::models {
namespace {

using core::testing::StatusIs;
using parallel::megatron::CpLayout;

int RunWorker(int nproc) {
  return parallel::RunTestWorker("verl/models/megatron/ring_attention_worker",
                                 nproc, {});
}

TEST(RingAttentionTest, Cp2MatchesSingleProcess) { EXPECT_EQ(RunWorker(2), 0); }

TEST(RingAttentionTest, Cp4MatchesSingleProcess) { EXPECT_EQ(RunWorker(4), 0); }

// cp 2, tp 2 (sequence parallel): sequences padded to multiples of 8, each
// rank holding chunks r and 3-r.
TEST(RingAttentionTest, LayoutPadsEverySequence) {
  absl::StatusOr<CpLayout> l = CpLayout::Create({0, 5, 5, 14}, 2, 1, 2);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->padded_cu_seqlens(), (std::vector<int64_t>{0, 8, 8, 24}));
  EXPECT_EQ(l->local_tokens(), 12);
  EXPECT_EQ(l->num_tokens(), 14);
  // Sequence 0 (chunks of 2): offsets 2,3 and 4,5; sequence 2 (chunks of
  // 4): 4..7 and 8..11.
  EXPECT_TRUE(at::equal(
      l->offsets(1),
      at::tensor(std::vector<int64_t>{2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 10, 11})));
  // Positions continue past a sequence's end for its pad tokens.
  at::Tensor pos = at::cat({at::arange(5), at::arange(9)});
  EXPECT_TRUE(at::equal(
      l->ShardPositions(pos),
      at::tensor(std::vector<int64_t>{2, 3, 4, 5, 4, 5, 6, 7, 8, 9, 10, 11})));
}

TEST(RingAttentionTest, LayoutErrors) {
  EXPECT_THAT(CpLayout::Create({0, 4}, 2, 2).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "rank=2"));
  EXPECT_THAT(CpLayout::Create({1, 4}, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "start at 0"));
  EXPECT_THAT(CpLayout::Create({0, 4, 3}, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "decreases"));
}

}  // namespace
}  // namespace verl::models
