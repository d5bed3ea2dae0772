// HF Qwen2.5-VL and Qwen2-VL folders: save -> load round trip (sharded),
// config.json as HF writes it, processor config kept, missing tensors named.
#include "verl/models/vlm/vlm_checkpoint.h"

#include <ATen/ops/tensor.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::models::vlm {
namespace {

using ::verl::core::testing::FreshTestDir;
using ::verl::core::testing::StatusIs;

class VlmCheckpointRoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(VlmCheckpointRoundTrip, SaveLoadRoundTrip) {
  const bool qwen2 = GetParam() == "tiny-qwen2-vl";
  auto config = MakeVlmPreset(GetParam());
  ASSERT_TRUE(config.ok());
  auto model = CreateVlmModel(*config, 3);
  ImageProcessorConfig processor;
  processor.max_pixels = 28 * 28 * 64;
  const std::string dir = FreshTestDir("vlm_ckpt_" + GetParam());
  VlmSaveOptions options;
  options.max_shard_size = 1 << 20;  // several shards with an index
  ASSERT_TRUE(SaveVlmCheckpoint(dir, *model, processor, {}, options).ok());
  EXPECT_TRUE(std::filesystem::exists(dir + "/model.safetensors.index.json"));
  auto json = core::ReadJsonFile(dir + "/config.json");
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["architectures"][0],
            qwen2 ? "Qwen2VLForConditionalGeneration"
                  : "Qwen2_5_VLForConditionalGeneration");
  EXPECT_EQ((*json)["model_type"], qwen2 ? "qwen2_vl" : "qwen2_5_vl");
  EXPECT_EQ((*json)["vision_config"]["depth"], 4);
  // HF's tensor names of the variant in the written shards.
  auto index = core::ReadJsonFile(dir + "/model.safetensors.index.json");
  ASSERT_TRUE(index.ok()) << index.status();
  const nlohmann::json& map = (*index)["weight_map"];
  for (const char* name :
       {"visual.blocks.3.mlp.fc1.weight", "visual.blocks.3.mlp.fc2.bias",
        "visual.blocks.0.norm1.bias", "visual.merger.ln_q.bias"}) {
    EXPECT_EQ(map.contains(name), qwen2) << name;
  }
  EXPECT_EQ(map.contains("visual.blocks.0.mlp.gate_proj.weight"), !qwen2);
  EXPECT_TRUE(map.contains("visual.merger.mlp.2.weight"));

  auto loaded = LoadVlmCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->processor.max_pixels, 28 * 28 * 64);
  auto want = model->named_parameters();
  auto got = loaded->model->named_parameters();
  ASSERT_EQ(got.size(), want.size());
  for (const auto& item : want) {
    EXPECT_TRUE(got[item.key()].equal(item.value())) << item.key();
  }
  torch::NoGradGuard no_grad;
  const int64_t pad = config->image_token_id;
  at::Tensor ids =
      at::tensor(std::vector<int64_t>{3, pad, pad, pad, pad, 7}, at::kLong);
  at::Tensor grid =
      at::tensor(std::vector<int64_t>{1, 4, 4}, at::kLong).reshape({1, 3});
  at::Tensor pix = at::randn({16, 1176});
  auto a = model->ForwardMultimodal(ids, {0, 6}, pix, grid);
  auto b = loaded->model->ForwardMultimodal(ids, {0, 6}, pix, grid);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(a->logits.equal(b->logits));

  // Saving on top of the JSON read keeps keys the config does not model.
  nlohmann::json base = loaded->config_json;
  base["transformers_version"] = "4.51.0";
  ASSERT_TRUE(
      SaveVlmCheckpoint(dir, *loaded->model, loaded->processor, base).ok());
  auto json2 = core::ReadJsonFile(dir + "/config.json");
  ASSERT_TRUE(json2.ok());
  EXPECT_EQ((*json2)["transformers_version"], "4.51.0");
}

INSTANTIATE_TEST_SUITE_P(Presets, VlmCheckpointRoundTrip,
                         ::testing::Values("tiny-qwen2.5-vl", "tiny-qwen2-vl"));

TEST(VlmCheckpointTest, MissingTensorsAreNamed) {
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto model = CreateVlmModel(*config, 3);
  const std::string dir = FreshTestDir("vlm_ckpt_missing");
  ASSERT_TRUE(SaveVlmCheckpoint(dir, *model, ImageProcessorConfig()).ok());
  // Rewrite the weights without the merger.
  ckpt::TensorMap tensors;
  for (const auto& item : model->named_parameters()) {
    if (item.key().rfind("visual.merger", 0) != 0) {
      tensors[item.key()] = item.value().detach();
    }
  }
  ASSERT_TRUE(ckpt::SaveSafetensorsFolder(dir, tensors).ok());
  EXPECT_THAT(LoadVlmCheckpoint(dir),
              StatusIs(absl::StatusCode::kNotFound,
                       "missing tensors: visual.merger.ln_q.weight"));
  EXPECT_THAT(LoadVlmCheckpoint(dir + "/nope"),
              StatusIs(absl::StatusCode::kNotFound, "config.json"));
}

// The tokenizer and the processor's chat template travel with the weights
// (verl saves the processing class next to them).
TEST(VlmCheckpointTest, TokenizerFilesAreSavedAndLoaded) {
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto tok = MakeVlmTokenizer(*config);
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto model = CreateVlmModel(*config, 5);
  const std::string dir = FreshTestDir("vlm_ckpt_tok");
  VlmSaveOptions options;
  options.tokenizer = &*tok;
  ASSERT_TRUE(SaveVlmCheckpoint(dir, *model, {}, {}, options).ok());
  for (const char* f : {"tokenizer.json", "tokenizer_config.json",
                        "chat_template.json", "preprocessor_config.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + f)) << f;
  }
  auto tmpl = core::ReadJsonFile(dir + "/chat_template.json");
  ASSERT_TRUE(tmpl.ok());
  EXPECT_EQ((*tmpl)["chat_template"], Qwen2VLChatTemplate());
  auto loaded = LoadVlmCheckpoint(dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_TRUE(loaded->tokenizer.has_value());
  const std::string text =
      "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Hi";
  EXPECT_EQ(loaded->tokenizer->Encode(text), tok->Encode(text));
  EXPECT_EQ(loaded->tokenizer->chat_templates().at("default"),
            Qwen2VLChatTemplate());
  // Without a tokenizer: no tokenizer files, none loaded.
  const std::string bare = FreshTestDir("vlm_ckpt_bare");
  ASSERT_TRUE(SaveVlmCheckpoint(bare, *model, {}).ok());
  EXPECT_FALSE(std::filesystem::exists(bare + "/tokenizer.json"));
  auto bare_loaded = LoadVlmCheckpoint(bare);
  ASSERT_TRUE(bare_loaded.ok());
  EXPECT_FALSE(bare_loaded->tokenizer.has_value());
}

}  // namespace
}  // namespace verl::models::vlm
