// File: verl/rl/algos/pf_ppo_test.cc
#include "verl/rl/algos/pf_ppo.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::ExpectTensorNear;
using testing::Vec;

TEST(PfPpoTest, Weights) {
  at::Tensor s = Vec({-2, 1, 0, 0.5});
  ExpectTensorNear(*PfPpoWeights(s, "pow", 2.0), Vec({4, 1, 0, 0.25}) + 1e-8,
                   1e-12);
  ExpectTensorNear(*PfPpoWeights(s, "max_min"), Vec({1, 1, 0, 0}) + 1e-8,
                   1e-12);
  ExpectTensorNear(*PfPpoWeights(s, "max_random"), Vec({0.1, 0.4, 0.1, 0.1}),
                   1e-7);
  EXPECT_THAT(
      PfPpoWeights(s, "softmax"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "algorithm.pf_ppo.reweight_method: unknown value 'softmax'"));
}

TEST(PfPpoTest, ResampleIsSeededAndFollowsWeights) {
  at::Tensor w = Vec({1e-8, 1e-8, 1.0, 1e-8});
  at::Tensor idx = PfPpoResampleIndices(w, 11);
  ASSERT_EQ(idx.numel(), 4);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(idx[i].item<int64_t>(), 2);
  at::Tensor u = Vec({1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_TRUE(
      at::equal(PfPpoResampleIndices(u, 5), PfPpoResampleIndices(u, 5)));
}

}  // namespace
}  // namespace verl::rl
