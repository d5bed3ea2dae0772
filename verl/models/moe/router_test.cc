// File: verl/models/moe/router_test.cc
//
// The routers on hand-worked cases (group limiting overriding the best
// expert, the bias steering the choice but not the weights, renormalisation
// and scaling) and the grouped expert loop against a per-token loop.
#include "verl/models/moe/router.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

namespace verl::models {
namespace {

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

at::Tensor Logits() {
  return at::tensor({3.0, -3.0, 2.5, 2.4}, at::kDouble).view({1, 4});
}

TEST(RouterTest, GroupLimitedTopKPicksFromTheBestGroups) {
  GroupLimitedOptions o;
  o.top_k = 1;
  o.n_group = 2;
  o.topk_group = 1;
  o.norm_topk_prob = false;
  o.routed_scaling_factor = 2.0;
  // Expert 0 scores best, but its group (0, 1) sums to ~1.0 against ~1.84
  // for group (2, 3).
  Routing r = SigmoidGroupLimitedTopK(Logits(), at::zeros({4}, at::kDouble), o);
  EXPECT_EQ(r.indices.item<int64_t>(), 2);
  EXPECT_NEAR(r.weights.item<double>(), 2.0 * Sigmoid(2.5), 1e-12);
  // Without group limiting the best expert wins.
  o.topk_group = 2;
  r = SigmoidGroupLimitedTopK(Logits(), at::zeros({4}, at::kDouble), o);
  EXPECT_EQ(r.indices.item<int64_t>(), 0);
}

TEST(RouterTest, BiasSteersChoiceNotWeights) {
  GroupLimitedOptions o;
  o.top_k = 1;
  o.n_group = 2;
  o.topk_group = 1;
  o.norm_topk_prob = false;
  at::Tensor bias = at::tensor({0.0, 0.0, -0.1, 0.0}, at::kDouble);
  at::Tensor logits = Logits().requires_grad_(true);
  Routing r = SigmoidGroupLimitedTopK(logits, bias, o);
  EXPECT_EQ(r.indices.item<int64_t>(), 3);
  EXPECT_NEAR(r.weights.item<double>(), Sigmoid(2.4), 1e-12);  // no bias
  r.weights.sum().backward();
  at::Tensor g = logits.grad();
  EXPECT_NEAR(g[0][3].item<double>(), Sigmoid(2.4) * (1 - Sigmoid(2.4)), 1e-12);
  EXPECT_EQ(g.abs().sum().item<double>(), g[0][3].abs().item<double>());
}

TEST(RouterTest, RenormalisedWeightsSumToScalingFactor) {
  GroupLimitedOptions o;
  o.top_k = 3;
  o.n_group = 4;
  o.topk_group = 2;
  o.routed_scaling_factor = 2.5;
  at::Tensor logits = at::randn({16, 8}, at::kDouble);
  Routing r = SigmoidGroupLimitedTopK(logits, at::zeros({8}, at::kDouble), o);
  EXPECT_TRUE(
      at::allclose(r.weights.sum(-1), at::full({16}, 2.5, at::kDouble)));
  // All chosen experts come from at most topk_group groups.
  at::Tensor groups = at::floor_divide(r.indices, 2);
  for (int64_t t = 0; t < 16; ++t) {
    EXPECT_LE(std::get<0>(at::_unique(groups[t])).numel(), 2);
  }
}

TEST(RouterTest, SoftmaxTopK) {
  at::Tensor logits = at::randn({5, 6}, at::kDouble);
  Routing r = SoftmaxTopK(logits, 2, /*norm_topk_prob=*/false);
  at::Tensor probs = at::softmax(logits, -1);
  EXPECT_TRUE(at::allclose(r.weights, probs.gather(1, r.indices)));
  EXPECT_TRUE(at::equal(r.indices, std::get<1>(probs.topk(2, -1))));
  r = SoftmaxTopK(logits, 2, /*norm_topk_prob=*/true);
  EXPECT_TRUE(at::allclose(r.weights.sum(-1), at::ones({5}, at::kDouble)));
}

TEST(RouterTest, RunExpertsEqualsPerTokenLoop) {
  at::manual_seed(3);
  std::vector<std::shared_ptr<MLP>> experts;
  for (int e = 0; e < 4; ++e) {
    experts.push_back(std::make_shared<MLP>(6, 5));
    for (auto& p : experts.back()->parameters()) {
      at::NoGradGuard ng;
      p.normal_(0, 0.5);
    }
    experts.back()->to(at::kDouble);
  }
  at::Tensor x = at::randn({7, 6}, at::kDouble);
  Routing r = SoftmaxTopK(at::randn({7, 4}, at::kDouble), 2, true);
  at::Tensor got = RunExperts(x, experts, r);
  for (int64_t t = 0; t < 7; ++t) {
    at::Tensor want = at::zeros({6}, at::kDouble);
    for (int64_t j = 0; j < 2; ++j) {
      want += r.weights[t][j] *
              experts[r.indices[t][j].item<int64_t>()]->Forward(x[t]);
    }
    EXPECT_TRUE(at::allclose(got[t], want, 1e-12, 1e-12)) << t;
  }
}

}  // namespace
}  // namespace verl::models
