#include "verl/rl/workers/train_state.h"

#include <torch/types.h>

#include <cmath>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

TEST(TrainStateTest, ClipsToMaxNormAndReportsPreClipNorm) {
  at::Tensor w = torch::zeros({2}, torch::requires_grad());
  OptimizerOptions o;
  o.lr = 0.1;
  o.weight_decay = 0;
  o.grad_clip = 1.0;
  ReplicatedTrainState state({w}, o, parallel::SingleProcessCommunicator());
  w.mutable_grad() = torch::tensor({3.0f, 4.0f});
  auto norm = state.Step();
  ASSERT_TRUE(norm.ok());
  EXPECT_NEAR(*norm, 5.0, 1e-6);
  // Clipped grad = (0.6, 0.8); AdamW's first step moves each weight by
  // -lr*sign.
  EXPECT_NEAR(w[0].item<float>(), -0.1f, 1e-4);
  EXPECT_NEAR(w[1].item<float>(), -0.1f, 1e-4);
  EXPECT_NEAR(w.grad()[0].item<float>(), 3.0f / (5.0f + 1e-6f), 1e-5);
}

TEST(TrainStateTest, AdamWMatchesClosedFormFirstSteps) {
  // Two steps of AdamW with constant gradient g: m_hat = g, v_hat = g^2, so
  // each update is -lr * g / (|g| + eps) - lr * wd * w.
  at::Tensor w = torch::ones({1}, torch::requires_grad());
  OptimizerOptions o;
  o.lr = 0.01;
  o.weight_decay = 0.1;
  o.grad_clip = 0;
  ReplicatedTrainState state({w}, o, nullptr);
  double expected = 1.0;
  for (int step = 0; step < 2; ++step) {
    w.mutable_grad() = torch::full({1}, 0.5f);
    ASSERT_TRUE(state.Step().ok());
    expected = expected * (1 - 0.01 * 0.1) - 0.01 * 0.5 / (0.5 + 1e-8);
  }
  EXPECT_NEAR(w.item<float>(), expected, 1e-6);
}

TEST(TrainStateTest, NonFiniteNormSkipsStep) {
  at::Tensor w = torch::ones({2}, torch::requires_grad());
  OptimizerOptions o;
  o.lr = 1.0;
  ReplicatedTrainState state({w}, o, nullptr);
  w.mutable_grad() = torch::tensor({NAN, 1.0f});
  auto norm = state.Step();
  ASSERT_TRUE(norm.ok());
  EXPECT_TRUE(std::isnan(*norm));
  EXPECT_EQ(state.skipped_steps(), 1);
  EXPECT_TRUE(torch::equal(w, torch::ones({2})));
  EXPECT_EQ(w.grad()[1].item<float>(), 0.0f);  // grads zeroed
}

TEST(TrainStateTest, CosineScheduleWithWarmup) {
  at::Tensor w = torch::ones({1}, torch::requires_grad());
  OptimizerOptions o;
  o.lr = 1.0;
  o.lr_scheduler_type = "cosine";
  o.warmup_steps = 2;
  o.total_steps = 6;
  ReplicatedTrainState state({w}, o, nullptr);
  std::vector<double> lrs;
  for (int i = 0; i < 6; ++i) lrs.push_back(state.StepSchedule());
  EXPECT_DOUBLE_EQ(lrs[0], 0.0);
  EXPECT_DOUBLE_EQ(lrs[1], 0.5);
  EXPECT_DOUBLE_EQ(lrs[2], 1.0);  // end of warmup: cos(0)
  // p = (step - W) / (N - W); factor = 0.5 * (1 + cos(pi * p)).
  EXPECT_NEAR(lrs[3], 0.5 * (1 + std::cos(M_PI * 0.25)), 1e-12);
  EXPECT_NEAR(lrs[5], 0.5 * (1 + std::cos(M_PI * 0.75)), 1e-12);
  state.set_schedule_step(2);
  EXPECT_DOUBLE_EQ(state.lr(), 1.0);
}

TEST(TrainStateTest, OptionsFromConfigResolveWarmupAndValidate) {
  parallel::OptimConfig optim;
  optim.set_lr(1e-5);
  optim.set_lr_warmup_steps_ratio(0.25);
  auto o = OptimizerOptionsFromConfig(optim, 1.0, 40);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->warmup_steps, 10);
  EXPECT_EQ(o->total_steps, 40);
  EXPECT_DOUBLE_EQ(o->beta2, 0.999);
  optim.set_lr_warmup_steps(3);
  EXPECT_EQ(OptimizerOptionsFromConfig(optim, 1.0, 40)->warmup_steps, 3);
  optim.set_lr_scheduler_type("linear");
  auto bad = OptimizerOptionsFromConfig(optim, 1.0, 40);
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "optim.lr_scheduler_type: \"linear\""));
  EXPECT_NE(bad.status().message().find("lr_scheduler_type"),
            std::string::npos);
  optim.set_lr_scheduler_type("cosine");
  optim.add_betas(0.9);
  EXPECT_THAT(OptimizerOptionsFromConfig(optim, 1.0, 40),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "optim.betas: expected 2 values, got 1"));
}

}  // namespace
}  // namespace verl::rl
