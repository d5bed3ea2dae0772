// File: verl/models/moe/router_test.cc
//
// The routers on hand-worked cases (group limiting overriding the best
// expert, the bias steering the choice but not the weights, renormalisation
// and scaling) and the grouped expert loop against a per-token loop.
#include "verl/models/moe/router.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

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

TEST(RouterTest, ExpertCapacityIsMegatrons) {
  EXPECT_EQ(ExpertCapacity(13, 2, 4, 0.5), 4);  // ceil(6.5 * 0.5)
  EXPECT_EQ(ExpertCapacity(16, 2, 8, 1.0), 4);
  EXPECT_EQ(ExpertCapacity(17, 2, 8, 1.0), 5);  // ceil(4.25)
  EXPECT_EQ(ExpertCapacity(3, 2, 2, 10.0), 3);  // at most every token
  EXPECT_EQ(ExpertCapacity(0, 2, 8, 1.0), 0);
}

// The dropped set by plain loops: expert by expert, its routed pairs in
// token order (probs: by weight, descending, earlier token first on ties),
// the first `capacity` kept; padding rows never kept.
std::vector<std::vector<bool>> LoopKeep(const Routing& r, int64_t experts,
                                        int64_t capacity, bool by_probs,
                                        const std::vector<bool>& real) {
  const int64_t t = r.indices.size(0), k = r.indices.size(1);
  std::vector<std::vector<bool>> keep(t, std::vector<bool>(k, false));
  for (int64_t e = 0; e < experts; ++e) {
    std::vector<std::pair<int64_t, int64_t>> pairs;  // (token, slot)
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        if (real[i] && r.indices[i][j].item<int64_t>() == e) {
          pairs.emplace_back(i, j);
        }
      }
    }
    if (by_probs) {
      using Pair = std::pair<int64_t, int64_t>;
      auto weight = [&](const Pair& p) {
        return r.weights[p.first][p.second].item<double>();
      };
      std::stable_sort(
          pairs.begin(), pairs.end(),
          [&](const Pair& a, const Pair& b) { return weight(a) > weight(b); });
    }
    for (size_t n = 0; n < pairs.size() && static_cast<int64_t>(n) < capacity;
         ++n) {
      keep[pairs[n].first][pairs[n].second] = true;
    }
  }
  return keep;
}

TEST(RouterTest, CapacityKeepMaskEqualsLoops) {
  at::manual_seed(5);
  const int64_t t = 13, e = 4, k = 2;
  // Rows 3 and 4 share logits (equal weights: ties go to the earlier token).
  at::Tensor logits = at::randn({t, e}, at::kDouble);
  logits[4].copy_(logits[3]);
  const Routing r = SoftmaxTopK(logits, k, /*norm_topk_prob=*/true);
  std::vector<bool> all(t, true), some(t, true);
  some[1] = some[12] = false;
  at::Tensor some_rows = at::ones({t}, at::kBool);
  some_rows[1] = false;
  some_rows[12] = false;
  for (const bool by_probs : {true, false}) {
    const TokenDropPolicy policy =
        by_probs ? TokenDropPolicy::kProbs : TokenDropPolicy::kPosition;
    for (const int64_t cap : {int64_t{0}, int64_t{1}, int64_t{3},
                              ExpertCapacity(t, k, e, 0.5), t}) {
      for (const bool padded : {false, true}) {
        at::Tensor got = CapacityKeepMask(r, e, cap, policy,
                                          padded ? some_rows : at::Tensor());
        const auto want = LoopKeep(r, e, cap, by_probs, padded ? some : all);
        int64_t kept = 0;
        for (int64_t i = 0; i < t; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            EXPECT_EQ(got[i][j].item<bool>(), want[i][j])
                << "policy " << by_probs << " capacity " << cap << " padded "
                << padded << " pair " << i << "," << j;
            kept += want[i][j];
          }
        }
        if (cap == t && !padded) {
          EXPECT_EQ(kept, t * k);  // nothing dropped
        }
        if (cap == 3) {
          EXPECT_LT(kept, t * k);  // some dropped
        }
      }
    }
  }
}

}  // namespace
}  // namespace verl::models
