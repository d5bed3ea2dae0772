// The reward-model role against verl's own formula: the value head's output
// at argmax(position_ids * attention_mask), written at that position of the
// response (verl's _expand_to_token_level).
#include "verl/rl/workers/reward_model.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/zeros.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

constexpr int64_t kP = 4, kR = 5;

// Saves a tiny value model (or causal LM) as an HF folder.
std::string SaveTinyModel(const std::string& name, bool value_model,
                          std::shared_ptr<models::CausalLM>* out) {
  models::ModelConfig config = *models::MakePreset("tiny-qwen2");
  config.is_value_model = value_model;
  auto model = models::CreateModel(config, 5);
  models::HfCheckpoint ckpt;
  ckpt.config = config;
  for (const auto& item : model->named_parameters())
    ckpt.tensors[item.key()] = item.value().detach();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  EXPECT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());
  if (out) *out = model;
  return dir;
}

// Left-padded prompts of `prompt_lens`, right-padded responses of
// `response_lens`.
core::Batch MakeBatch(const std::vector<int64_t>& prompt_lens,
                      const std::vector<int64_t>& response_lens,
                      int64_t vocab) {
  const int64_t B = prompt_lens.size();
  at::Tensor ids = at::randint(1, vocab, {B, kP + kR}, at::kLong);
  at::Tensor mask = at::zeros({B, kP + kR}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    mask[b].narrow(0, kP - prompt_lens[b], prompt_lens[b]).fill_(1);
    mask[b].narrow(0, kP, response_lens[b]).fill_(1);
  }
  at::Tensor pos = (mask.cumsum(1) - 1).clamp_min(0);
  return *core::Batch::FromColumns(
      {{"input_ids", ids * mask},
       {"attention_mask", mask},
       {"position_ids", pos},
       {"responses", (ids * mask).narrow(1, kP, kR).contiguous()}});
}

TEST(RewardModelTest, ScoresTheLastValidTokenAtTheLastResponsePosition) {
  at::manual_seed(0);
  std::shared_ptr<models::CausalLM> reference;
  const std::string dir = SaveTinyModel("rm", true, &reference);
  MicroBatchOptions micro;
  micro.micro_batch_size = 2;
  auto rm = RewardModel::Load(dir, reference->config().vocab_size, micro);
  ASSERT_TRUE(rm.ok()) << rm.status();
  core::Batch batch =
      MakeBatch({4, 2, 3, 1}, {5, 2, 0, 1}, reference->config().vocab_size);
  auto scores = (*rm)->ComputeRmScore(batch);
  ASSERT_TRUE(scores.ok()) << scores.status();
  ASSERT_EQ(scores->sizes(), (at::IntArrayRef{4, kR}));

  // verl: eos_mask_idx = argmax(position_ids * attention_mask).
  at::NoGradGuard no_grad;
  const at::Tensor& mask = batch.tensor("attention_mask");
  at::Tensor values = reference
                          ->ForwardPadded(batch.tensor("input_ids"), mask,
                                          batch.tensor("position_ids"))
                          .values;
  at::Tensor idx = (batch.tensor("position_ids") * mask).argmax(-1);
  at::Tensor expected = at::zeros({4, kP + kR}, at::kFloat);
  for (int64_t b = 0; b < 4; ++b) {
    const int64_t i = idx[b].item<int64_t>();
    expected[b][i] = values[b][i];
  }
  expected = expected.narrow(1, kP, kR);
  EXPECT_TRUE(at::allclose(*scores, expected, 1e-5, 1e-6)) << *scores << "\n"
                                                           << expected;
  // One non-zero per non-empty response, none for the empty one.
  EXPECT_EQ(scores->ne(0).sum().item<int64_t>(), 3);
  EXPECT_EQ((*scores)[2].abs().sum().item<float>(), 0.0f);

  // Micro-batching does not change the scores.
  micro.micro_batch_size = 4;
  auto whole = RewardModel::Load(dir, 1, micro);
  ASSERT_TRUE(whole.ok());
  EXPECT_TRUE(
      at::allclose(*(*whole)->ComputeRmScore(batch), *scores, 1e-5, 1e-6));
}

TEST(RewardModelTest, RejectsACausalLmAndASmallVocabulary) {
  const std::string lm = SaveTinyModel("lm", false, nullptr);
  auto rm = RewardModel::Load(lm, 1, MicroBatchOptions{});
  ASSERT_THAT(rm, StatusIs(absl::StatusCode::kInvalidArgument,
                           "reward_model.model.path"));
  EXPECT_NE(rm.status().message().find("not a value model"), std::string::npos)
      << rm.status();
  EXPECT_NE(rm.status().message().find(lm), std::string::npos);
  const std::string value = SaveTinyModel("rm_small", true, nullptr);
  rm = RewardModel::Load(value, 1 << 20, MicroBatchOptions{});
  ASSERT_THAT(rm, StatusIs(absl::StatusCode::kInvalidArgument,
                           "reward_model.model.path"));
  EXPECT_NE(rm.status().message().find("vocab_size"), std::string::npos);
}

}  // namespace
}  // namespace verl::rl
