#include "verl/rl/workers/critic.h"

#include <torch/types.h>

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/batch.h"
#include "verl/core/test_util.h"
#include "verl/models/presets.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"
#include "verl/rl/workers/testing/batch_testutil.h"
#include "verl/rl/workers/train_state.h"

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

// A vision-language critic (Qwen2.5-VL with a value head) sees the rows'
// images in its update as in ComputeValues: the update's first forward (the
// weights ComputeValues used) gives the same values, and those depend on the
// images.
TEST(CriticTest, VisionLanguageCriticUpdatesWithTheImages) {
  models::vlm::VlmConfig config =
      *models::vlm::MakeVlmPreset("tiny-qwen2.5-vl");
  config.text.is_value_model = true;
  auto model = models::vlm::CreateVlmModel(config, 5);
  OptimizerOptions opt;
  opt.lr = 1e-2;
  opt.grad_clip = 0;
  CriticOptions o;
  o.mini_batch_size = 2;
  o.update_micro.micro_batch_size = 2;
  o.ppo_epochs = 1;
  Critic critic(
      model,
      std::make_unique<ReplicatedTrainState>(model->parameters(), opt, nullptr),
      o, nullptr);
  // Two rows, each prompt holding one 84x84 image (6x6 patches, 9 pads).
  const int64_t P = 16;
  core::Batch batch = testing::MakeRolloutBatch(config.text.vocab_size, P, 3,
                                                {13, 12}, {3, 2}, 7);
  at::Tensor ids = batch.tensor("input_ids");
  ids.masked_fill_(ids >= config.vision_start_token_id, 5);  // no specials
  std::vector<nlohmann::json> mm;
  for (int64_t r = 0; r < 2; ++r) {
    const int64_t start = P - (r == 0 ? 13 : 12);
    ids[r][start] = config.vision_start_token_id;
    ids[r].narrow(0, start + 1, 9).fill_(config.image_token_id);
    ids[r][start + 10] = config.vision_end_token_id;
    mm.push_back(models::vlm::MultiModalInputsToJson(
        at::randn({36, config.vision.PatchDim()}) * 3.0,
        at::tensor({1, 6, 6}, at::kLong).view({1, 3})));
  }
  ASSERT_TRUE(batch.SetTensor("input_ids", ids).ok());
  core::Batch blank = batch;  // the same rows, the images all zero
  ASSERT_TRUE(batch.SetNonTensor("multi_modal_inputs", mm).ok());
  for (auto& j : mm) {
    auto in = *models::vlm::MultiModalInputsFromJson(j);
    j = models::vlm::MultiModalInputsToJson(at::zeros_like(in.pixel_values),
                                            in.image_grid_thw);
  }
  ASSERT_TRUE(blank.SetNonTensor("multi_modal_inputs", mm).ok());

  auto values = critic.ComputeValues(batch);
  auto blank_values = critic.ComputeValues(blank);
  ASSERT_TRUE(values.ok() && blank_values.ok()) << values.status();
  const at::Tensor mask = batch.tensor("response_mask").to(at::kFloat);
  const double mean = ((*values * mask).sum() / mask.sum()).item<double>();
  const double blank_mean =
      ((*blank_values * mask).sum() / mask.sum()).item<double>();
  EXPECT_GT(std::abs(mean - blank_mean), 1e-5);  // the images matter

  ASSERT_TRUE(batch.SetTensor("values", *values).ok());
  ASSERT_TRUE(batch.SetTensor("returns", mask * 2.0).ok());
  auto m = critic.UpdateCritic(batch);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NEAR(m->at("critic/vpred_mean"), mean, 1e-6);
  EXPECT_GT(m->at("critic/grad_norm"), 0.0);
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
