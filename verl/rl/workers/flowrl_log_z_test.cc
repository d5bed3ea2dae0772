// File: verl/rl/workers/flowrl_log_z_test.cc
//
// The log-Z head: the recipe's layer structure, its gradient against finite
// differences (double precision, dropout off), its dropout drawn from its own
// generator, and the joint train state stepping both parameter sets.
#include "verl/rl/workers/flowrl_log_z.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

namespace verl::rl {
namespace {

TEST(LogZHeadTest, RecipeLayersAndFiniteDifferenceGradient) {
  at::manual_seed(0);
  LogZHead head(/*hidden_size=*/6, /*num_layers=*/3, /*dropout=*/0.1);
  // (Linear, GELU, LayerNorm, Dropout) x 2, then Linear(H, 1).
  std::vector<std::string> names;
  for (const auto& p : head->named_parameters()) names.push_back(p.key());
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias",
                "net.4.weight", "net.4.bias", "net.6.weight", "net.6.bias",
                "net.8.weight", "net.8.bias"}));
  head->to(at::kDouble);
  head->eval();  // dropout off: a deterministic function to differentiate
  at::Tensor x = at::randn({3, 6}, at::kDouble);
  auto loss_of = [&] {
    at::Tensor z = head->forward(x);
    EXPECT_EQ(z.sizes(), (std::vector<int64_t>{3}));
    return (z * z * at::tensor({1.0, -2.0, 0.5}, at::kDouble)).sum();
  };
  for (auto& p : head->parameters()) p.mutable_grad() = at::Tensor();
  loss_of().backward();
  for (const auto& item : head->named_parameters()) {
    at::Tensor p = item.value();
    at::Tensor grad = p.grad().clone();
    at::NoGradGuard no_grad;
    at::Tensor flat = p.view({-1});
    for (int64_t i = 0; i < std::min<int64_t>(flat.numel(), 5); ++i) {
      const double h = 1e-6, orig = flat[i].item<double>();
      flat[i] = orig + h;
      const double up = loss_of().item<double>();
      flat[i] = orig - h;
      const double down = loss_of().item<double>();
      flat[i] = orig;
      EXPECT_NEAR(grad.view({-1})[i].item<double>(), (up - down) / (2 * h),
                  1e-6)
          << item.key() << "[" << i << "]";
    }
  }
}

// Under Megatron every tp rank runs the head: with a dropout generator the
// masks depend on its seed only, and the global generator is left alone.
TEST(LogZHeadTest, DropoutFromItsOwnGenerator) {
  at::manual_seed(2);
  LogZHead head(/*hidden_size=*/16, /*num_layers=*/2, /*dropout=*/0.5);
  at::Generator gen = at::detail::createCPUGenerator();
  head->set_dropout_generator(gen);
  const at::Tensor x = at::randn({4, 16});
  auto train_z = [&](uint64_t seed) {
    head->train();
    gen.set_current_seed(seed);
    return head->forward(x).detach();
  };
  at::manual_seed(7);
  const at::Tensor a = train_z(5);
  const at::Tensor after = at::randn({3});
  at::manual_seed(7);
  EXPECT_TRUE(at::equal(after, at::randn({3})));  // global one not drawn
  at::manual_seed(99);
  EXPECT_TRUE(at::equal(train_z(5), a));  // the seed alone decides
  EXPECT_FALSE(at::equal(train_z(6), a));
  head->eval();
  EXPECT_FALSE(at::equal(head->forward(x).detach(), a));  // dropout was on
}

TEST(LogZHeadTest, JointTrainStateStepsBoth) {
  at::manual_seed(1);
  torch::nn::Linear policy(3, 2);
  LogZHead head(3, 2, 0.0);
  OptimizerOptions opt;
  opt.lr = 0.1;
  ReplicatedTrainState policy_state(NamedParameters(*policy), opt, nullptr);
  ReplicatedTrainState head_state(NamedParameters(*head), opt, nullptr);
  JointTrainState joint(policy_state, head_state);
  const at::Tensor w_before = policy->weight.detach().clone();
  const at::Tensor z_before = head->parameters().front().detach().clone();
  joint.ZeroGrad();
  at::Tensor x = at::randn({4, 3});
  (policy->forward(x).sum() + head->forward(x).sum()).backward();
  auto norm = joint.Step();
  ASSERT_TRUE(norm.ok()) << norm.status();
  EXPECT_GT(*norm, 0.0);
  EXPECT_GT(joint.head_grad_norm(), 0.0);
  EXPECT_FALSE(at::equal(policy->weight.detach(), w_before));
  EXPECT_FALSE(at::equal(head->parameters().front().detach(), z_before));
}

}  // namespace
}  // namespace verl::rl
