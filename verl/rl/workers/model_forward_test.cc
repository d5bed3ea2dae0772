#include "verl/rl/workers/model_forward.h"

#include <torch/types.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/batch.h"
#include "verl/models/presets.h"
#include "verl/models/testing/graph_testutil.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::rl {
namespace {

struct Layout {
  at::Tensor input_ids, attention_mask, position_ids;
  std::vector<int64_t> prompt_lens, response_lens;
};

// Left-padded prompts of length P, right-padded responses of length R.
Layout MakeLayout(int64_t vocab, int64_t P, int64_t R,
                  std::vector<int64_t> prompt_lens,
                  std::vector<int64_t> response_lens) {
  const int64_t B = prompt_lens.size();
  Layout l;
  l.prompt_lens = prompt_lens;
  l.response_lens = response_lens;
  l.input_ids = torch::randint(1, vocab, {B, P + R}, torch::kLong);
  l.attention_mask = torch::zeros({B, P + R}, torch::kLong);
  for (int64_t b = 0; b < B; ++b) {
    l.attention_mask[b].narrow(0, P - prompt_lens[b], prompt_lens[b]).fill_(1);
    l.attention_mask[b].narrow(0, P, response_lens[b]).fill_(1);
  }
  l.position_ids = (l.attention_mask.cumsum(1) - 1).clamp_min(0);
  return l;
}

TEST(ModelForwardTest, LogProbsMatchPerSequenceReference) {
  at::manual_seed(0);
  auto config = models::MakePreset("tiny-qwen2");
  ASSERT_TRUE(config.ok());
  auto model = models::CreateModel(*config, 1);
  const int64_t P = 6, R = 5;
  Layout l = MakeLayout(config->vocab_size, P, R, {6, 3, 1}, {5, 2, 0});
  const double temp = 0.7;
  ResponseForward out =
      ForwardResponses(*model, l.input_ids, l.attention_mask, l.position_ids, R,
                       temp, /*with_entropy=*/true);
  ASSERT_EQ(out.log_probs.sizes(), (std::vector<int64_t>{3, R}));
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = l.prompt_lens[b] + l.response_lens[b];
    at::Tensor ids = l.input_ids[b].narrow(0, P - l.prompt_lens[b], n);
    models::ForwardOutput ref =
        model->ForwardPacked(ids, torch::arange(n, torch::kLong), {0, n});
    at::Tensor logp =
        torch::log_softmax(ref.logits.to(torch::kFloat) / temp, -1);
    at::Tensor probs = logp.exp();
    for (int64_t k = 0; k < R; ++k) {
      if (k >= l.response_lens[b]) {
        EXPECT_EQ(out.log_probs[b][k].item<float>(), 0.0f);
        continue;
      }
      const int64_t t =
          l.prompt_lens[b] - 1 + k;  // position predicting token t+1
      const int64_t label = ids[t + 1].item<int64_t>();
      EXPECT_NEAR(out.log_probs[b][k].item<float>(),
                  logp[t][label].item<float>(), 1e-5);
      const float entropy = -(probs[t] * logp[t]).sum().item<float>();
      EXPECT_NEAR(out.entropy[b][k].item<float>(), entropy, 1e-5);
    }
  }
}

TEST(ModelForwardTest, GradientsFlowToParameters) {
  at::manual_seed(1);
  auto config = models::MakePreset("tiny-qwen2");
  auto model = models::CreateModel(*config, 2);
  model->enable_gradient_checkpointing(true);
  Layout l = MakeLayout(config->vocab_size, 4, 3, {4, 2}, {3, 1});
  ResponseForward out = ForwardResponses(*model, l.input_ids, l.attention_mask,
                                         l.position_ids, 3, 1.0, false);
  out.log_probs.sum().backward();
  int with_grad = 0;
  for (const auto& p : model->parameters()) with_grad += p.grad().defined();
  EXPECT_GT(with_grad, 0);
  EXPECT_TRUE(
      model->named_parameters()["model.embed_tokens.weight"].grad().defined());
}

using ::verl::models::testing::CountGraphNodes;

// Two rows, P = 8 (row 1 left-padded by one), R = 3, whose prompts hold
// one 4x4-patch image each (4 pads between vision_start and vision_end).
Layout ImagePromptLayout(const models::vlm::VlmConfig& config) {
  Layout l = MakeLayout(config.text.vocab_size - 8, 8, 3, {8, 7}, {3, 2});
  const int64_t pad = config.image_token_id;
  const std::vector<int64_t> prompt = {
      config.vision_start_token_id, pad, pad, pad, pad,
      config.vision_end_token_id,   6};
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 7; ++i) l.input_ids[b][1 + i] = prompt[i];
  }
  return l;
}

// A vision-language policy with gradient checkpointing on (what the trainer
// sets from actor_rollout_ref.model.enable_gradient_checkpointing): the
// actor's forward with images recomputes every vision block as well as
// every decoder layer, and gradients reach the tower.
TEST(ModelForwardTest, VisionLanguageCheckpointingReachesTheTower) {
  for (const char* preset : {"tiny-qwen2.5-vl", "tiny-qwen2-vl"}) {
    SCOPED_TRACE(preset);
    auto config = models::vlm::MakeVlmPreset(preset);
    ASSERT_TRUE(config.ok());
    auto model = models::vlm::CreateVlmModel(*config, 4);
    model->enable_gradient_checkpointing(true);
    Layout l = ImagePromptLayout(*config);
    ForwardExtras extras;
    extras.images.pixel_values = torch::randn({32, config->vision.PatchDim()});
    extras.images.image_grid_thw =
        torch::tensor({1, 4, 4, 1, 4, 4}, torch::kLong).reshape({2, 3});
    ResponseForward out =
        ForwardResponses(*model, l.input_ids, l.attention_mask, l.position_ids,
                         3, 1.0, false, SequenceParallel(), extras);
    EXPECT_EQ(CountGraphNodes(out.log_probs, "CheckpointBackward"),
              config->vision.depth + config->text.num_hidden_layers);
    out.log_probs.sum().backward();
    EXPECT_GT(
        model->visual->patch_embed->weight.grad().abs().sum().item<double>(),
        0);
  }
}

// A sampled response holding <|image_pad|> tokens: each row's own images
// (multi_modal_inputs, counted per row by BatchImageInputs) are spliced at
// its prompt's pads and the response's pads stay text, as the rollout
// engine embedded them; the response's log-probs equal those of the same
// rows run one at a time.
TEST(ModelForwardTest, VisionLanguageResponsePadsAreText) {
  auto config = models::vlm::MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto model = models::vlm::CreateVlmModel(*config, 4);
  torch::NoGradGuard no_grad;
  const int64_t pad = config->image_token_id;
  Layout l = ImagePromptLayout(*config);
  l.input_ids[0][8] = pad;  // row 0's response: pad, x, pad
  l.input_ids[0][10] = pad;
  l.input_ids[1][9] = config->vision_start_token_id;  // row 1's: vs, pad
  l.input_ids[1][8] = pad;
  std::vector<nlohmann::json> mm;
  for (int64_t b = 0; b < 2; ++b) {
    mm.push_back(models::vlm::MultiModalInputsToJson(
        torch::randn({16, config->vision.PatchDim()}),
        torch::tensor({1, 4, 4}, torch::kLong).reshape({1, 3})));
  }
  core::Batch batch;
  ASSERT_TRUE(batch.SetTensor("input_ids", l.input_ids).ok());
  ASSERT_TRUE(batch.SetNonTensor("multi_modal_inputs", mm).ok());
  auto images = BatchImageInputs(batch);
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ(images->images_per_row, (std::vector<int64_t>{1, 1}));
  ForwardExtras extras;
  extras.images = *images;
  ResponseForward both =
      ForwardResponses(*model, l.input_ids, l.attention_mask, l.position_ids, 3,
                       1.0, false, SequenceParallel(), extras);
  for (int64_t b = 0; b < 2; ++b) {
    core::Batch row;
    ASSERT_TRUE(row.SetTensor("input_ids", l.input_ids.narrow(0, b, 1)).ok());
    ASSERT_TRUE(row.SetNonTensor("multi_modal_inputs", {mm[b]}).ok());
    ForwardExtras one;
    one.images = *BatchImageInputs(row);
    ResponseForward alone = ForwardResponses(
        *model, l.input_ids.narrow(0, b, 1), l.attention_mask.narrow(0, b, 1),
        l.position_ids.narrow(0, b, 1), 3, 1.0, false, SequenceParallel(), one);
    EXPECT_TRUE(both.log_probs[b].allclose(alone.log_probs[0], 1e-5, 1e-6))
        << b;
  }
}

TEST(ModelForwardTest, ValueModelReturnsValuesAtPredictingPositions) {
  auto config = models::MakePreset("tiny-qwen2");
  config->is_value_model = true;
  auto model = models::CreateModel(*config, 3);
  Layout l = MakeLayout(config->vocab_size, 4, 3, {2, 4}, {3, 2});
  ResponseForward out = ForwardResponses(*model, l.input_ids, l.attention_mask,
                                         l.position_ids, 3, 1.0, false);
  ASSERT_EQ(out.values.sizes(), (std::vector<int64_t>{2, 3}));
  // Row 0: real tokens are columns 2..6; value for response k sits at column
  // 3+k.
  at::Tensor ids = l.input_ids[0].narrow(0, 2, 5);
  models::ForwardOutput ref =
      model->ForwardPacked(ids, torch::arange(5, torch::kLong), {0, 5});
  for (int64_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(out.values[0][k].item<float>(), ref.values[1 + k].item<float>(),
                1e-5);
  }
  EXPECT_EQ(out.values[1][2].item<float>(), 0.0f);
}

}  // namespace
}  // namespace verl::rl
