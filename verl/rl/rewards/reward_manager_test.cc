// File: verl/rl/rewards/reward_manager_test.cc
#include "verl/rl/rewards/reward_manager.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <gtest/gtest.h>

#include <cmath>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

RewardRequest Req(const std::string& source, const std::string& solution,
                  const nlohmann::json& gt, int64_t len) {
  RewardRequest r;
  r.sample = {source, solution, gt};
  r.valid_response_length = len;
  return r;
}

TEST(RewardManagerTest, NaivePlacesScoreAtLastValidToken) {
  auto rm = *RewardManager::Create({});
  RewardOutput out = *rm->Score({Req("openai/gsm8k", "#### 72", "72", 2),
                                 Req("openai/gsm8k", "#### 7", "72", 4),
                                 Req("math_dapo", "Answer: 3", "3", 3)},
                                4);
  testing::ExpectTensorNear(
      out.reward_tensor,
      testing::Mat({{0, 1, 0, 0}, {0, 0, 0, 0}, {0, 0, 1, 0}}));
  // Dict-like results (math_dapo) log score/acc/pred; others are padded.
  ASSERT_EQ(out.extra_numeric.at("acc").size(), 3u);
  EXPECT_TRUE(std::isnan(out.extra_numeric.at("acc")[0]));
  EXPECT_EQ(out.extra_numeric.at("acc")[2], 1.0);
  EXPECT_EQ(out.extra_numeric.at("score")[2], 1.0);
  EXPECT_EQ(out.extra_text.at("pred")[2], "3");
}

TEST(RewardManagerTest, EmptyResponseWrapsToLastColumnLikeVerl) {
  auto rm = *RewardManager::Create({});
  RewardOutput out = *rm->Score({Req("arithmetic", "", "1", 0)}, 3);
  EXPECT_EQ(out.reward_tensor[0][2].item<float>(), 0.0f);
  EXPECT_THAT(
      rm->Score({Req("arithmetic", "1", "1", 5)}, 3),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "reward manager: sample 0 has valid_response_length 5 >"));
}

TEST(RewardManagerTest, DapoOverlongPenaltyAndEosStrip) {
  RewardManagerConfig c;
  c.name = "dapo";
  c.overlong_buffer_enable = true;
  c.overlong_buffer_len = 4;
  c.max_resp_len = 8;
  c.overlong_penalty_factor = 1.0;
  c.overlong_log = true;
  c.eos_text = "<|eos|>";
  auto rm = *RewardManager::Create(c);
  // Lengths 4 (no penalty), 6 (−0.5), 8 (−1); "#### 72<|eos|>" is stripped.
  RewardOutput out = *rm->Score({Req("arithmetic", "#### 72<|eos|>", "72", 4),
                                 Req("arithmetic", "#### 72", "72", 6),
                                 Req("arithmetic", "#### 1", "72", 8)},
                                8);
  EXPECT_FLOAT_EQ(out.reward_tensor[0][3].item<float>(), 1.0f);
  EXPECT_FLOAT_EQ(out.reward_tensor[1][5].item<float>(), 0.5f);
  EXPECT_FLOAT_EQ(out.reward_tensor[2][7].item<float>(), -1.0f);
  EXPECT_EQ(out.extra_numeric.at("acc"), (std::vector<double>{1, 1, 0}));
  EXPECT_EQ(out.extra_numeric.at("overlong"), (std::vector<double>{0, 1, 1}));
  EXPECT_DOUBLE_EQ(out.extra_numeric.at("overlong_reward")[1], -0.5);

  c.max_resp_len = 2;  // buffer longer than the response budget
  EXPECT_THAT(RewardManager::Create(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "reward_kwargs.overlong_buffer_cfg: need 0 < len <="));
  c.name = "prime";
  EXPECT_THAT(RewardManager::Create(c),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "reward_model.reward_manager: unknown manager 'prime'"));
}

TEST(RewardManagerTest, BatchManagerWithExternalCommand) {
  RewardManagerConfig c;
  c.name = "batch";
  auto rm = *RewardManager::Create(
      c, nullptr,
      ExternalCommandScoreFn("while read -r l; do echo 0.25; done", 10));
  RewardOutput out =
      *rm->Score({Req("any", "x", "y", 1), Req("any", "x", "y", 2)}, 2);
  testing::ExpectTensorNear(out.reward_tensor,
                            testing::Mat({{0.25, 0}, {0, 0.25}}));
}

}  // namespace
}  // namespace verl::rl
