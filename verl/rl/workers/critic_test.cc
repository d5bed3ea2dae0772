#include "verl/rl/workers/critic.h"

#include <torch/types.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/presets.h"
#include "verl/rl/workers/testing/batch_testutil.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

std::unique_ptr<Critic> MakeCritic(CriticOptions o) {
  auto config = *models::MakePreset("tiny-qwen2");
  config.is_value_model = true;
  auto model = models::CreateModel(config, 5);
  model->enable_gradient_checkpointing(true);  // backward re-runs layers
  OptimizerOptions opt;
  opt.lr = 1e-2;
  opt.grad_clip = 0;
  auto state =
      std::make_unique<ReplicatedTrainState>(model->parameters(), opt, nullptr);
  return std::make_unique<Critic>(model, std::move(state), o, nullptr);
}

core::Batch MakeBatch() {
  auto config = *models::MakePreset("tiny-qwen2");
  return testing::MakeRolloutBatch(config.vocab_size, 4, 3, {4, 2, 3, 1},
                                   {3, 1, 2, 3}, 3);
}

TEST(CriticTest, ValuesAreMaskedAndMicroBatchInvariant) {
  CriticOptions a;
  a.forward_micro.micro_batch_size = 1;
  CriticOptions b;
  b.forward_micro.micro_batch_size = 4;
  core::Batch batch = MakeBatch();
  auto va = MakeCritic(a)->ComputeValues(batch);
  auto vb = MakeCritic(b)->ComputeValues(batch);
  ASSERT_TRUE(va.ok() && vb.ok());
  EXPECT_TRUE(torch::allclose(*va, *vb, 1e-5, 1e-6));
  EXPECT_EQ((*va)[1][1].item<float>(), 0.0f);  // row 1 has one response token
}

TEST(CriticTest, UpdateFitsReturnsAndIsMicroBatchInvariant) {
  std::vector<MetricMap> metrics;
  for (int64_t micro : {1, 2, 4}) {
    CriticOptions o;
    o.mini_batch_size = 4;
    o.update_micro.micro_batch_size = micro;
    o.ppo_epochs = 1;
    auto critic = MakeCritic(o);
    core::Batch batch = MakeBatch();
    auto values = critic->ComputeValues(batch);
    ASSERT_TRUE(batch.SetTensor("values", *values).ok());
    ASSERT_TRUE(
        batch.SetTensor("returns", batch.tensor("response_mask") * 2.0).ok());
    auto m = critic->UpdateCritic(batch);
    ASSERT_TRUE(m.ok()) << m.status();
    metrics.push_back(*m);
  }
  for (const auto& m : metrics) {
    for (const char* key : {"critic/vf_loss", "critic/vf_clipfrac",
                            "critic/vpred_mean", "critic/grad_norm"}) {
      ASSERT_TRUE(m.count(key)) << key;
      EXPECT_NEAR(m.at(key), metrics[0].at(key), 1e-5) << key;
    }
  }
  // Loss = 0.5 * mean((V - 2)^2) before the step (clipping is inactive at
  // V_old).
  CriticOptions o;
  o.mini_batch_size = 4;
  o.update_micro.micro_batch_size = 4;
  o.ppo_epochs = 20;
  auto critic = MakeCritic(o);
  core::Batch batch = MakeBatch();
  auto v0 = critic->ComputeValues(batch);
  const at::Tensor mask = batch.tensor("response_mask");
  ASSERT_TRUE(batch.SetTensor("values", *v0).ok());
  ASSERT_TRUE(batch.SetTensor("returns", mask * 2.0).ok());
  const double before =
      (((*v0 - 2.0).pow(2) * mask).sum() / mask.sum()).item<double>();
  ASSERT_TRUE(critic->UpdateCritic(batch).ok());
  auto v1 = critic->ComputeValues(batch);
  const double after =
      (((*v1 - 2.0).pow(2) * mask).sum() / mask.sum()).item<double>();
  EXPECT_LT(after, before);
}

TEST(CriticTest, MissingKeysAreErrors) {
  auto critic = MakeCritic({});
  auto m = critic->UpdateCritic(MakeBatch());
  ASSERT_THAT(m, StatusIs(absl::StatusCode::kInvalidArgument,
                          "update_critic: batch lacks \"values\""));
  EXPECT_NE(m.status().message().find("values"), std::string::npos);
}

}  // namespace
}  // namespace verl::rl
