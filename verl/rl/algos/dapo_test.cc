// File: verl/rl/algos/dapo_test.cc
#include "verl/rl/algos/dapo.h"

#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

TEST(OverlongBufferTest, LinearPenaltyInsideBuffer) {
  // max 100, buffer 20: expected 80.
  EXPECT_DOUBLE_EQ(*OverlongBufferPenalty(50, 100, 20, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(*OverlongBufferPenalty(80, 100, 20, 1.0), 0.0);
  EXPECT_DOUBLE_EQ(*OverlongBufferPenalty(90, 100, 20, 1.0), -0.5);
  EXPECT_DOUBLE_EQ(*OverlongBufferPenalty(100, 100, 20, 2.0), -2.0);
  EXPECT_THAT(OverlongBufferPenalty(10, 10, 20, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "reward_kwargs.overlong_buffer_cfg: need 0 < len <="));
  EXPECT_THAT(OverlongBufferPenalty(10, 10, 0, 1.0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "reward_kwargs.overlong_buffer_cfg: need 0 < len <="));
}

TEST(FilterGroupsTest, KeepsVaryingAndSingletonGroups) {
  GroupFilterResult r = FilterGroupsByStd({"a", "b", "a", "b", "c", "d", "d"},
                                          {1, 0, 1, 1, 5, 0, 0});
  EXPECT_EQ(r.num_groups, 4);
  EXPECT_EQ(r.kept_uids, (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(r.kept_rows, (std::vector<int64_t>{1, 3, 4}));
}

TEST(DynamicSamplingTest, StoppingRule) {
  EXPECT_FALSE(*DynamicSamplingNeedsMoreRounds(32, 32, 1, 3));
  EXPECT_FALSE(*DynamicSamplingNeedsMoreRounds(40, 32, 3, 3));
  EXPECT_TRUE(*DynamicSamplingNeedsMoreRounds(10, 32, 2, 3));
  EXPECT_TRUE(*DynamicSamplingNeedsMoreRounds(10, 32, 100, 0));  // unlimited
  absl::StatusOr<bool> out = DynamicSamplingNeedsMoreRounds(10, 32, 3, 3);
  ASSERT_THAT(out, StatusIs(absl::StatusCode::kResourceExhausted,
                            "dynamic sampling kept 10 of 32 prompts after"));
  EXPECT_NE(out.status().message().find("max_num_gen_batches"),
            std::string::npos);
}

}  // namespace
}  // namespace verl::rl
