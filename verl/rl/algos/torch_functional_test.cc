// File: verl/rl/algos/torch_functional_test.cc
#include "verl/rl/algos/torch_functional.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cmath>

#include "verl/core/test_util.h"
#include "verl/rl/algos/testing/rl_test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

using testing::ExpectTensorNear;
using testing::Mat;
using testing::Vec;

TEST(TorchFunctionalTest, MaskedMeanAndSumUseVerlEpsilon) {
  at::Tensor x = Vec({1, 2, 3, 4});
  at::Tensor m = Vec({1, 1, 0, 1});
  EXPECT_DOUBLE_EQ(MaskedSum(x, m).item<double>(), 7.0);
  EXPECT_DOUBLE_EQ(MaskedMean(x, m).item<double>(), 7.0 / (3.0 + 1e-8));
}

TEST(TorchFunctionalTest, MaskedSumIgnoresNanOutsideMask) {
  at::Tensor x = Vec({1, NAN, 2});
  at::Tensor m = Vec({1, 0, 1});
  EXPECT_DOUBLE_EQ(MaskedSum(x, m).item<double>(), 3.0);
}

TEST(TorchFunctionalTest, MaskedMeanAlongAxis) {
  at::Tensor x = Mat({{1, 2, 3}, {4, 5, 6}});
  at::Tensor m = Mat({{1, 1, 0}, {0, 0, 1}});
  ExpectTensorNear(MaskedMean(x, m, -1), Vec({1.5, 6.0}), 1e-7);
}

TEST(TorchFunctionalTest, MaskedVarUnbiased) {
  // Valid values 1, 2, 4: mean 7/3, Σ(x−μ)² = 42/9, unbiased var = 7/3.
  at::Tensor x = Vec({1, 2, 100, 4});
  at::Tensor m = Vec({1, 1, 0, 1});
  EXPECT_NEAR(MaskedVar(x, m)->item<double>(), 7.0 / 3.0, 1e-6);
  EXPECT_NEAR(MaskedVar(x, m, false)->item<double>(), 42.0 / 27.0, 1e-6);
}

TEST(TorchFunctionalTest, MaskedVarOfOneTokenIsAnErrorNotAnAbort) {
  // verl's masked_var raises for N < 2 with unbiased=True; here a Status.
  at::Tensor x = Vec({1, 2, 3});
  at::Tensor one = Vec({0, 1, 0});
  absl::StatusOr<at::Tensor> var = MaskedVar(x, one);
  ASSERT_THAT(var,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "masked_var: unbiased variance needs at least 2 valid"));
  EXPECT_EQ(var.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(var.status().message().find("at least 2 valid"), std::string::npos)
      << var.status();
  EXPECT_THAT(MaskedVar(x, Vec({0, 0, 0})),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "masked_var: unbiased variance needs at least 2 valid"));
  EXPECT_THAT(MaskedWhiten(x, one),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "masked_var: unbiased variance needs at least 2 valid"));
  // The biased variance of one token is 0, as in verl.
  EXPECT_NEAR(MaskedVar(x, one, /*unbiased=*/false)->item<double>(), 0.0,
              1e-12);
}

TEST(TorchFunctionalTest, MaskedWhitenMatchesNaiveFormula) {
  at::Tensor x = Vec({1, 2, 100, 4});
  at::Tensor m = Vec({1, 1, 0, 1});
  const double mu = 7.0 / 3.0, inv = 1.0 / std::sqrt(7.0 / 3.0 + 1e-8);
  ExpectTensorNear(
      *MaskedWhiten(x, m),
      Vec({(1 - mu) * inv, (2 - mu) * inv, (100 - mu) * inv, (4 - mu) * inv}),
      1e-5);
  ExpectTensorNear(*MaskedWhiten(x, m, /*shift_mean=*/false),
                   Vec({(1 - mu) * inv + mu, (2 - mu) * inv + mu,
                        (100 - mu) * inv + mu, (4 - mu) * inv + mu}),
                   1e-5);
}

TEST(TorchFunctionalTest, EntropyAndSumPiSquared) {
  // p = (1/4, 3/4) from logits (0, ln 3).
  at::Tensor z = Mat({{0.0, std::log(3.0)}, {0.0, 0.0}});
  const double h = -(0.25 * std::log(0.25) + 0.75 * std::log(0.75));
  ExpectTensorNear(EntropyFromLogits(z), Vec({h, std::log(2.0)}), 1e-9);
  ExpectTensorNear(SumPiSquaredFromLogits(z), Vec({0.625, 0.5}), 1e-9);
  at::Tensor labels = at::tensor({1, 0}, at::kLong);
  ExpectTensorNear(LogprobsFromLogits(z, labels),
                   Vec({std::log(0.75), std::log(0.5)}), 1e-9);
}

TEST(TorchFunctionalTest, ClipByValueWithTensorBounds) {
  ExpectTensorNear(
      ClipByValue(Vec({-5, 0.5, 5}), Vec({-1, 0, 0}), Vec({1, 1, 2})),
      Vec({-1, 0.5, 2}));
}

TEST(TorchFunctionalTest, ResponseMaskStopsAfterFirstEosOfList) {
  at::Tensor ids = at::tensor({5, 2, 7, 2, 1, 1, 1, 1, 9, 3, 4, 4}, at::kLong)
                       .reshape({3, 4});
  at::Tensor mask = GetResponseMask(ids, {2, 3}, at::kFloat);
  ExpectTensorNear(mask, Mat({{1, 1, 0, 0}, {1, 1, 1, 1}, {1, 1, 0, 0}}));
}

TEST(TorchFunctionalTest, ConstantSchedule) {
  EXPECT_DOUBLE_EQ(ConstantScheduleWithWarmup(0, 10), 0.0);
  EXPECT_DOUBLE_EQ(ConstantScheduleWithWarmup(5, 10), 0.5);
  EXPECT_DOUBLE_EQ(ConstantScheduleWithWarmup(10, 10), 1.0);
  EXPECT_DOUBLE_EQ(ConstantScheduleWithWarmup(3, 0), 1.0);
}

TEST(TorchFunctionalTest, CosineSchedule) {
  EXPECT_NEAR(CosineScheduleWithWarmup(60, 10, 110), 0.5, 1e-12);
  EXPECT_NEAR(CosineScheduleWithWarmup(10, 10, 110), 1.0, 1e-12);
  EXPECT_NEAR(CosineScheduleWithWarmup(110, 10, 110), 0.0, 1e-12);
  EXPECT_NEAR(CosineScheduleWithWarmup(60, 10, 110, 0.1), 0.55, 1e-12);
  EXPECT_NEAR(CosineScheduleWithWarmup(110, 10, 110, 0.1), 0.1, 1e-12);
  EXPECT_NEAR(CosineScheduleWithWarmup(5, 10, 110, 0.0, 0.5, 0.2), 0.6, 1e-12);
}

TEST(TorchFunctionalTest, WsdSchedule) {
  // W=10, N=110: 90 stable steps, 10 decay steps.
  EXPECT_NEAR(WsdScheduleWithWarmup(5, 10, 110), 0.5, 1e-12);
  EXPECT_NEAR(WsdScheduleWithWarmup(50, 10, 110), 1.0, 1e-12);
  EXPECT_NEAR(WsdScheduleWithWarmup(99, 10, 110), 1.0, 1e-12);
  EXPECT_NEAR(WsdScheduleWithWarmup(105, 10, 110), 0.5, 1e-12);
  EXPECT_NEAR(WsdScheduleWithWarmup(105, 10, 110, 0.2), 0.6, 1e-12);
  EXPECT_NEAR(WsdScheduleWithWarmup(120, 10, 110, 0.2), 0.2, 1e-12);
}

}  // namespace
}  // namespace verl::rl
