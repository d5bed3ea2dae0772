// Qwen2.5-VL and Qwen2-VL against an independent float64 reference written
// from HF's modeling equations (testing/gen_qwen2_5_vl_golden.py): the same
// tiny configs, weights and pixel values from a counter-based hash both sides
// compute, three prompts (a small image; a larger image whose windows are
// padded on both axes; two images in one prompt). Checks the parameter
// names/shapes (HF's), the M-RoPE positions exactly, the image embeddings
// and the logits (float64 <= 1e-9 rel, float32 <= 1e-5 rel). Also: gradient
// checkpointing of the vision blocks (same gradients, fewer activations
// kept).
#include "verl/models/vlm/qwen2_vl.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/tensor.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/grad_mode.h>
#include <torch/optim/adamw.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/testing/graph_testutil.h"
#include "verl/models/vlm/vision.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/memory_tracker.h"

namespace verl::models::vlm {
namespace {

using ::verl::core::testing::StatusIs;

constexpr char kDir[] = "verl/models/vlm/testdata/";

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char b : s) h = (h ^ b) * 0x100000001b3ULL;
  return h;
}

// Same as the generator's hash_uniform: values in [-1, 1).
at::Tensor HashUniform(const std::string& name, int64_t n) {
  const uint64_t seed = Fnv1a(name);
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) {
    uint64_t z = seed + static_cast<uint64_t>(i) + 0x9E3779B97F4A7C15ULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    v[i] = static_cast<double>(z >> 11) * std::ldexp(1.0, -52) - 1.0;
  }
  return at::tensor(v, at::kDouble);
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The generator's weight rule: norms 1 + 0.1u, biases 0.1u, else
// u/sqrt(fan_in).
void FillHashWeights(torch::nn::Module& model) {
  torch::NoGradGuard no_grad;
  for (const auto& item : model.named_parameters()) {
    const std::string& name = item.key();
    at::Tensor p = item.value();
    at::Tensor u = HashUniform(name, p.numel()).reshape(p.sizes());
    if (EndsWith(name, "norm.weight") || EndsWith(name, "norm1.weight") ||
        EndsWith(name, "norm2.weight") || EndsWith(name, "ln_q.weight")) {
      u = 1.0 + 0.1 * u;
    } else if (EndsWith(name, ".bias")) {
      u = 0.1 * u;
    } else {
      u = u / std::sqrt(static_cast<double>(p.numel() / p.size(0)));
    }
    p.copy_(u);
  }
}

// The golden set `prefix` ("qwen2_5_vl" or "qwen2_vl").
nlohmann::json Golden(const std::string& prefix) {
  auto text = core::ReadFile(std::string(kDir) + prefix + "_golden.json");
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.ok() ? *text : "{}");
}

at::Tensor ReadF64(const std::string& file) {
  auto bytes = core::ReadFile(std::string(kDir) + file);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return at::from_blob(bytes->data(), {static_cast<int64_t>(bytes->size() / 8)},
                       at::kDouble)
      .clone();
}

double RelErr(const at::Tensor& got, const at::Tensor& want) {
  return ((got.to(at::kDouble) - want).abs().max() / want.abs().max())
      .item<double>();
}

// Parameterized by the golden set: Qwen2.5-VL's and Qwen2-VL's towers.
class Qwen2VLTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    golden_ = Golden(GetParam());
    auto config = VlmConfigFromHfJson(golden_["config"], "golden config");
    ASSERT_TRUE(config.ok()) << config.status();
    config_ = *config;
  }
  nlohmann::json golden_;
  VlmConfig config_;
};

TEST_P(Qwen2VLTest, ParameterNamesAndShapesAreHfs) {
  EXPECT_EQ(config_.vision.IsQwen2Vl(), GetParam() == "qwen2_vl");
  Qwen2VLForConditionalGeneration model(config_);
  std::map<std::string, std::vector<int64_t>> got, want;
  for (const auto& item : model.named_parameters()) {
    got[item.key()] = item.value().sizes().vec();
  }
  for (const auto& [name, shape] : golden_["params"].items()) {
    want[name] = shape.get<std::vector<int64_t>>();
  }
  EXPECT_EQ(got, want);
}

TEST_P(Qwen2VLTest, LogitsMatchFloat64Reference) {
  auto model = std::make_shared<Qwen2VLForConditionalGeneration>(config_);
  model->to(at::kDouble);
  FillHashWeights(*model);
  torch::NoGradGuard no_grad;
  ASSERT_EQ(golden_["cases"].size(), 3u);
  for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    model->to(dtype);
    int k = 0;
    for (const auto& c : golden_["cases"]) {
      SCOPED_TRACE(::testing::Message() << "case " << k++ << " " << dtype);
      const auto ids_vec = c["input_ids"].get<std::vector<int64_t>>();
      const int64_t t = ids_vec.size();
      at::Tensor ids = at::tensor(ids_vec, at::kLong);
      std::vector<int64_t> grid_flat;
      int64_t patches = 0;
      for (const auto& g : c["image_grid_thw"]) {
        const auto v = g.get<std::vector<int64_t>>();
        grid_flat.insert(grid_flat.end(), v.begin(), v.end());
        patches += v[0] * v[1] * v[2];
      }
      at::Tensor grid = at::tensor(grid_flat, at::kLong).reshape({-1, 3});
      at::Tensor pixels =
          HashUniform(c["pixel_values"].get<std::string>(), patches * 1176)
              .reshape({patches, 1176}) *
          c["pixel_scale"].get<double>();

      auto inputs = model->PrepareInputs(ids, {0, t}, pixels, grid);
      ASSERT_TRUE(inputs.ok()) << inputs.status();
      at::Tensor want_pos = at::tensor(
          c["position_ids"][0].get<std::vector<int64_t>>(), at::kLong);
      for (int r = 1; r < 3; ++r) {
        want_pos = at::cat(
            {want_pos,
             at::tensor(c["position_ids"][r].get<std::vector<int64_t>>(),
                        at::kLong)});
      }
      EXPECT_TRUE(inputs->position_ids.equal(want_pos.reshape({3, t})));

      at::Tensor embeds =
          model->visual->Forward(pixels.to(dtype), GridsFromTensor(grid));
      const double tol = dtype == at::kDouble ? 1e-9 : 1e-5;
      EXPECT_NEAR(embeds.sum().item<double>(), c["image_embeds_sum"], tol * 10);
      EXPECT_LE(
          RelErr(embeds[0],
                 at::tensor(c["image_embeds_row0"].get<std::vector<double>>(),
                            at::kDouble)),
          tol);

      auto out = model->ForwardMultimodal(ids, {0, t}, pixels, grid);
      ASSERT_TRUE(out.ok()) << out.status();
      at::Tensor want = ReadF64(c["logits"]).reshape({t, -1});
      const double err = RelErr(out->logits, want);
      EXPECT_LE(err, tol);
      std::printf("%s case %d %s: logits max rel err %.3g\n",
                  GetParam().c_str(), k - 1,
                  dtype == at::kDouble ? "float64" : "float32", err);
    }
  }
}

TEST_P(Qwen2VLTest, PackedSequencesEqualSeparateOnes) {
  auto model = std::make_shared<Qwen2VLForConditionalGeneration>(config_);
  model->to(at::kDouble);
  FillHashWeights(*model);
  torch::NoGradGuard no_grad;
  const auto& c0 = golden_["cases"][0];
  const auto& c2 = golden_["cases"][2];
  std::vector<int64_t> ids = c0["input_ids"].get<std::vector<int64_t>>();
  const int64_t t0 = ids.size();
  for (int64_t id : c2["input_ids"].get<std::vector<int64_t>>())
    ids.push_back(id);
  at::Tensor pix0 =
      HashUniform("pixel_values/case0", 24 * 1176).reshape({24, 1176}) * 2.0;
  at::Tensor pix2 =
      HashUniform("pixel_values/case2", 48 * 1176).reshape({48, 1176}) * 2.0;
  at::Tensor grid =
      at::tensor(std::vector<int64_t>{1, 4, 6, 1, 4, 6, 1, 6, 4}, at::kLong)
          .reshape({3, 3});
  auto out = model->ForwardMultimodal(at::tensor(ids, at::kLong),
                                      {0, t0, static_cast<int64_t>(ids.size())},
                                      at::cat({pix0, pix2}), grid);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_LE(RelErr(out->logits.slice(0, 0, t0),
                   ReadF64(c0["logits"]).reshape({t0, -1})),
            1e-9);
  EXPECT_LE(
      RelErr(out->logits.slice(0, t0), ReadF64(c2["logits"]).reshape({-1, 64})),
      1e-9);
}

// A response that sampled <|image_pad|> (a tiny policy can): with the images
// counted per sequence, pads after the sequence's image are text tokens
// with text positions, which is how the rollout engine embedded them. The
// reference builds that by hand: the prompt's inputs, then the response's
// token embeddings at positions counting on from the prompt's last.
TEST_P(Qwen2VLTest, PadsAfterTheImagesAreTextWhenCounted) {
  auto model = std::make_shared<Qwen2VLForConditionalGeneration>(config_);
  model->to(at::kDouble);
  FillHashWeights(*model);
  torch::NoGradGuard no_grad;
  const int64_t pad = config_.image_token_id;
  std::vector<int64_t> prompt =
      golden_["cases"][0]["input_ids"].get<std::vector<int64_t>>();
  const std::vector<int64_t> response = {7, pad, 9, pad, pad};
  std::vector<int64_t> ids = prompt;
  ids.insert(ids.end(), response.begin(), response.end());
  const int64_t P = prompt.size(), T = ids.size();
  at::Tensor pix =
      HashUniform("pixel_values/case0", 24 * 1176).reshape({24, 1176}) * 2.0;
  at::Tensor grid =
      at::tensor(std::vector<int64_t>{1, 4, 6}, at::kLong).reshape({1, 3});
  auto got = model->PrepareInputs(at::tensor(ids, at::kLong), {0, T}, pix, grid,
                                  /*images_per_sequence=*/{1});
  ASSERT_TRUE(got.ok()) << got.status();
  auto head =
      model->PrepareInputs(at::tensor(prompt, at::kLong), {0, P}, pix, grid);
  ASSERT_TRUE(head.ok()) << head.status();
  const at::Tensor last = head->position_ids.select(1, P - 1).max();
  const at::Tensor tail_pos =
      (last + 1 + at::arange(T - P, at::kLong)).unsqueeze(0).expand({3, -1});
  const at::Tensor want_pos = at::cat({head->position_ids, tail_pos}, 1);
  const at::Tensor want_embeds = at::cat(
      {head->embeds,
       model->model->embed_tokens->Forward(at::tensor(response, at::kLong))});
  EXPECT_TRUE(at::equal(got->position_ids, want_pos));
  EXPECT_TRUE(at::equal(got->embeds, want_embeds));
  // Without the counts the extra pads are an error, not a guess.
  EXPECT_THAT(
      model->PrepareInputs(at::tensor(ids, at::kLong), {0, T}, pix, grid),
      StatusIs(absl::StatusCode::kInvalidArgument, "<|image_pad|>"));
  EXPECT_THAT(
      model->PrepareInputs(at::tensor(ids, at::kLong), {0, T}, pix, grid, {2}),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "names more than the 1 images"));
}

TEST_P(Qwen2VLTest, TextOnlyMatchesOneDimensionalRope) {
  auto model = std::make_shared<Qwen2VLForConditionalGeneration>(config_);
  FillHashWeights(*model);
  torch::NoGradGuard no_grad;
  at::Tensor ids =
      at::tensor(std::vector<int64_t>{3, 9, 27, 17, 5, 44}, at::kLong);
  auto out = model->ForwardMultimodal(ids, {0, 6}, at::Tensor(), at::Tensor());
  ASSERT_TRUE(out.ok()) << out.status();
  ForwardOutput plain =
      model->ForwardPacked(ids, at::arange(6, at::kLong), {0, 6});
  EXPECT_TRUE(out->logits.allclose(plain.logits, 1e-5, 1e-6));
}

TEST_P(Qwen2VLTest, BadInputsAreStatuses) {
  Qwen2VLForConditionalGeneration model(config_);
  const int64_t pad = config_.image_token_id;
  at::Tensor grid =
      at::tensor(std::vector<int64_t>{1, 4, 6}, at::kLong).reshape({1, 3});
  at::Tensor pix = at::zeros({24, 1176});
  std::vector<int64_t> five_pads = {1, 60, pad, pad, pad, pad, pad, 61};
  EXPECT_THAT(model.ForwardMultimodal(at::tensor(five_pads, at::kLong), {0, 8},
                                      pix, grid),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "needs 6 consecutive <|image_pad|> tokens"));
  std::vector<int64_t> no_pads = {1, 2, 3};
  EXPECT_THAT(model.ForwardMultimodal(at::tensor(no_pads, at::kLong), {0, 3},
                                      pix, grid),
              StatusIs(absl::StatusCode::kInvalidArgument, "1 images given"));
  std::vector<int64_t> six_pads = {1, pad, pad, pad, pad, pad, pad, 2};
  EXPECT_THAT(model.ForwardMultimodal(at::tensor(six_pads, at::kLong), {0, 8},
                                      at::zeros({20, 1176}), grid),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "pixel_values must be [24, 1176]"));
  EXPECT_THAT(model.ForwardMultimodal(at::tensor(six_pads, at::kLong), {0, 8},
                                      at::Tensor(), at::Tensor()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "more <|image_pad|> tokens than its 0 images"));
}

INSTANTIATE_TEST_SUITE_P(Towers, Qwen2VLTest,
                         ::testing::Values("qwen2_5_vl", "qwen2_vl"));

TEST(VlmConfigTest, RoundTripAndErrors) {
  auto preset = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(preset.ok());
  auto json = VlmConfigToHfJson(*preset);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["architectures"][0], "Qwen2_5_VLForConditionalGeneration");
  EXPECT_EQ((*json)["rope_scaling"]["mrope_section"],
            nlohmann::json({4, 6, 6}));
  auto back = VlmConfigFromHfJson(*json, "config.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->text.mrope_section, preset->text.mrope_section);
  EXPECT_EQ(back->vision.fullatt_block_indexes,
            preset->vision.fullatt_block_indexes);
  EXPECT_EQ(back->image_token_id, preset->image_token_id);
  EXPECT_EQ(back->text.hidden_size, 128);
  EXPECT_TRUE(back->text.attention_bias);
  auto again = VlmConfigToHfJson(*back, *json);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *json);

  nlohmann::json bad = *json;
  bad["rope_scaling"]["mrope_section"] = {4, 6, 5};
  EXPECT_THAT(VlmConfigFromHfJson(bad, "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "mrope_section': expected 3 integers summing to "
                       "head_dim / 2 = 16"));
  bad = *json;
  bad["vision_config"]["window_size"] = 50;
  EXPECT_THAT(VlmConfigFromHfJson(bad, "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument, "window_size"));
  bad = *json;
  bad["architectures"] = {"LlamaForCausalLM"};
  bad["model_type"] = "llama";
  EXPECT_THAT(VlmConfigFromHfJson(bad, "config.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "not a supported vision-language model"));
  EXPECT_THAT(MakeVlmPreset("tiny-llava"),
              StatusIs(absl::StatusCode::kInvalidArgument, "tiny-qwen2.5-vl"));

  // The quickstart's wider preset: head_dim 64 with Qwen2.5-VL's
  // sum(mrope_section) == head_dim / 2, the merger projecting to its width;
  // its config.json reads back.
  auto wide = MakeVlmPreset("tiny-qwen2.5-vl-wide");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->text.HeadDim(), 64);
  EXPECT_EQ(wide->text.mrope_section, (std::vector<int64_t>{8, 12, 12}));
  EXPECT_EQ(wide->vision.out_hidden_size, 256);
  auto wide_json = VlmConfigToHfJson(*wide);
  ASSERT_TRUE(wide_json.ok()) << wide_json.status();
  auto wide_back = VlmConfigFromHfJson(*wide_json, "config.json");
  ASSERT_TRUE(wide_back.ok()) << wide_back.status();
  EXPECT_EQ(wide_back->text.mrope_section, wide->text.mrope_section);
  EXPECT_EQ(wide_back->text.hidden_size, 256);
}

// Qwen2-VL's config.json: vision_config's embed_dim (tower width),
// hidden_size (the merger's output = the text hidden size) and mlp_ratio;
// unknown keys (top level and inside vision_config) survive a round trip.
TEST(VlmConfigTest, Qwen2VlRoundTripAndErrors) {
  nlohmann::json json = Golden("qwen2_vl")["config"];
  json["vision_config"]["initializer_range"] = 0.02;  // unknown: kept
  auto c = VlmConfigFromHfJson(json, "config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "Qwen2VLForConditionalGeneration");
  EXPECT_EQ(c->model_type, "qwen2_vl");
  EXPECT_TRUE(c->vision.IsQwen2Vl());
  EXPECT_EQ(c->vision.hidden_size, 32);
  EXPECT_EQ(c->vision.out_hidden_size, 64);
  EXPECT_EQ(c->vision.intermediate_size, 48);  // int(32 * 1.5)
  EXPECT_EQ(c->vision.mlp_ratio, 1.5);
  EXPECT_EQ(c->vision.hidden_act, "quick_gelu");
  EXPECT_EQ(c->vision.depth, 3);
  EXPECT_TRUE(c->vision.IsFullAttention(0));
  EXPECT_EQ(c->text.mrope_section, (std::vector<int64_t>{2, 3, 3}));
  auto again = VlmConfigToHfJson(*c, json);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, json);
  // Written from scratch: Qwen2-VL's keys, none of Qwen2.5-VL's.
  auto fresh = VlmConfigToHfJson(*c);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  const nlohmann::json& v = (*fresh)["vision_config"];
  EXPECT_EQ(v["embed_dim"], 32);
  EXPECT_EQ(v["hidden_size"], 64);
  EXPECT_EQ(v["mlp_ratio"], 1.5);
  EXPECT_FALSE(v.contains("window_size"));
  EXPECT_FALSE(v.contains("out_hidden_size"));
  EXPECT_FALSE(v.contains("intermediate_size"));
  EXPECT_EQ((*fresh)["architectures"][0], "Qwen2VLForConditionalGeneration");
  auto fresh_back = VlmConfigFromHfJson(*fresh, "config.json");
  ASSERT_TRUE(fresh_back.ok()) << fresh_back.status();
  EXPECT_EQ(fresh_back->vision.intermediate_size, 48);

  // model_type decides; the architecture alone is enough too.
  nlohmann::json by_arch = json;
  by_arch.erase("model_type");
  auto arch_only = VlmConfigFromHfJson(by_arch, "config.json");
  ASSERT_TRUE(arch_only.ok()) << arch_only.status();
  EXPECT_TRUE(arch_only->vision.IsQwen2Vl());

  struct Bad {
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  for (const Bad& b :
       {Bad{"hidden_act", "relu", "vision_config: key 'hidden_act'"},
        Bad{"hidden_act", 3, "vision_config: key 'hidden_act'"},
        Bad{"embed_dim", 33, "vision_config: key 'embed_dim'"},
        Bad{"embed_dim", 36, "vision_config: key 'embed_dim'"},  // hd 18
        Bad{"mlp_ratio", -1, "vision_config: key 'mlp_ratio'"},
        Bad{"mlp_ratio", "4", "vision_config: key 'mlp_ratio'"},
        Bad{"num_heads", 0, "vision_config: key 'num_heads'"},
        Bad{"hidden_size", 48, "key 'vision_config.hidden_size'"}}) {
    SCOPED_TRACE(b.key);
    nlohmann::json bad = json;
    bad["vision_config"][b.key] = b.value;
    EXPECT_THAT(VlmConfigFromHfJson(bad, "config.json"),
                StatusIs(absl::StatusCode::kInvalidArgument, b.message));
  }

  // The tiny preset: a Qwen2-VL tower on tiny-qwen2.5-vl's language model.
  auto preset = MakeVlmPreset("tiny-qwen2-vl");
  ASSERT_TRUE(preset.ok()) << preset.status();
  EXPECT_TRUE(preset->vision.IsQwen2Vl());
  auto pj = VlmConfigToHfJson(*preset);
  ASSERT_TRUE(pj.ok()) << pj.status();
  EXPECT_EQ((*pj)["model_type"], "qwen2_vl");
  EXPECT_EQ((*pj)["vision_config"]["mlp_ratio"], 4);
  EXPECT_TRUE((*pj)["vision_config"]["mlp_ratio"].is_number_integer());
  EXPECT_EQ((*pj)["vision_config"]["hidden_act"], "quick_gelu");
  auto pback = VlmConfigFromHfJson(*pj, "config.json");
  ASSERT_TRUE(pback.ok()) << pback.status();
  EXPECT_EQ(pback->vision.hidden_size, preset->vision.hidden_size);
  EXPECT_EQ(pback->vision.intermediate_size, preset->vision.intermediate_size);
  EXPECT_EQ(pback->vision.out_hidden_size, 128);
  auto pagain = VlmConfigToHfJson(*pback, *pj);
  ASSERT_TRUE(pagain.ok());
  EXPECT_EQ(*pagain, *pj);
}

// Qwen2-VL's MLP activations against their formulas (HF ACT2FN).
TEST(VlmConfigTest, VisionActivations) {
  at::Tensor x = at::linspace(-6, 6, 97, at::kDouble);
  const double s2 = std::sqrt(2.0), c = std::sqrt(2.0 / M_PI);
  EXPECT_TRUE(VisionActivation("quick_gelu", x)
                  .allclose(x / (1 + at::exp(-1.702 * x)), 1e-14, 1e-14));
  EXPECT_TRUE(VisionActivation("gelu", x).allclose(
      0.5 * x * (1 + at::erf(x / s2)), 1e-14, 1e-14));
  EXPECT_TRUE(
      VisionActivation("gelu_pytorch_tanh", x)
          .allclose(0.5 * x * (1 + at::tanh(c * (x + 0.044715 * x.pow(3)))),
                    1e-14, 1e-14));
  EXPECT_TRUE(VisionActivation("silu", x).allclose(x / (1 + at::exp(-x)), 1e-14,
                                                   1e-14));
}

TEST(VlmConfigTest, TinyPresetRunsAndTrains) {
  for (const std::string& name : VlmPresetNames()) {
    SCOPED_TRACE(name);
    auto config = MakeVlmPreset(name);
    ASSERT_TRUE(config.ok());
    auto model = CreateVlmModel(*config, 7);
    const int64_t pad = config->image_token_id;
    std::vector<int64_t> ids = {
        5,   config->vision_start_token_id, pad, pad, pad,
        pad, config->vision_end_token_id,   9,   10};
    at::Tensor grid =
        at::tensor(std::vector<int64_t>{1, 4, 4}, at::kLong).reshape({1, 3});
    at::Tensor pix = at::randn({16, 1176});
    auto out =
        model->ForwardMultimodal(at::tensor(ids, at::kLong), {0, 9}, pix, grid);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->logits.sizes(), (std::vector<int64_t>{9, 1024}));
    out->logits.sum().backward();
    // Gradients reach both towers.
    EXPECT_TRUE(model->visual->patch_embed->weight.grad().defined());
    EXPECT_GT(
        model->visual->patch_embed->weight.grad().abs().sum().item<double>(),
        0);
    EXPECT_GT(model->model->layers[0]
                  ->self_attn->q_proj->weight.grad()
                  .abs()
                  .sum()
                  .item<double>(),
              0);
  }
}

using ::verl::models::testing::CountGraphNodes;

// Two packed prompts, the first with two images (4x6 and 4x4 patches), the
// second with one 6x6 image (windows padded for Qwen2.5-VL's tower).
struct TwoImageBatch {
  at::Tensor ids;
  std::vector<int64_t> cu;
  at::Tensor pixels, grid;
};

TwoImageBatch MakeTwoImageBatch(const VlmConfig& c) {
  const int64_t pad = c.image_token_id, vs = c.vision_start_token_id,
                ve = c.vision_end_token_id;
  std::vector<int64_t> ids = {5, 6, vs};
  ids.insert(ids.end(), 6, pad);
  for (int64_t t : {ve, int64_t{7}, vs}) ids.push_back(t);
  ids.insert(ids.end(), 4, pad);
  for (int64_t t : {ve, int64_t{8}, int64_t{9}}) ids.push_back(t);
  const int64_t t0 = ids.size();
  for (int64_t t : {int64_t{11}, vs}) ids.push_back(t);
  ids.insert(ids.end(), 9, pad);
  for (int64_t t : {ve, int64_t{12}}) ids.push_back(t);
  TwoImageBatch b;
  b.ids = at::tensor(ids, at::kLong);
  b.cu = {0, t0, static_cast<int64_t>(ids.size())};
  b.grid =
      at::tensor(std::vector<int64_t>{1, 4, 6, 1, 4, 4, 1, 6, 6}, at::kLong)
          .reshape({3, 3});
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(17);
  b.pixels = at::randn({24 + 16 + 36, c.vision.PatchDim()}, gen);
  return b;
}

// Bytes of tracked CPU memory that `fn`'s result keeps alive (its output and
// the activations its autograd graph saved), and the result.
template <typename Fn>
std::pair<int64_t, at::Tensor> KeptBytes(Fn fn) {
  auto& tracker = profiler::MemoryTracker::Global();
  const int64_t before = tracker.Stats().live_bytes;
  at::Tensor out = fn();
  return {tracker.Stats().live_bytes - before, out};
}

// Gradient checkpointing of the vision blocks (with the decoder's): every
// parameter's gradient (tower and language model) equals the plain
// backward's, each block and layer is one recompute node, and the forward
// keeps fewer bytes of activations. Both towers; two prompts, three images.
TEST(VlmCheckpointingTest, SameGradientsFewerActivations) {
  const bool tracked = profiler::ProfilerCompiledIn();
  if (tracked) profiler::MemoryTracker::Global().Enable({0, 0});
  for (const char* name : {"tiny-qwen2.5-vl", "tiny-qwen2-vl"}) {
    SCOPED_TRACE(name);
    auto config = MakeVlmPreset(name);
    ASSERT_TRUE(config.ok());
    auto model = CreateVlmModel(*config, 5, 0.05);
    const TwoImageBatch b = MakeTwoImageBatch(*config);
    const int64_t depth = config->vision.depth;
    const int64_t layers = config->text.num_hidden_layers;
    auto run = [&](bool checkpointing, int* nodes, int64_t* kept) {
      model->enable_gradient_checkpointing(checkpointing);
      model->zero_grad();
      auto [bytes, logits] = KeptBytes([&] {
        auto out = model->ForwardMultimodal(b.ids, b.cu, b.pixels, b.grid);
        CHECK(out.ok()) << out.status();
        return out->logits;
      });
      *kept = bytes;
      *nodes = CountGraphNodes(logits, "CheckpointBackward");
      at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(99);
      (logits * at::randn(logits.sizes(), gen)).sum().backward();
      std::map<std::string, at::Tensor> g;
      for (const auto& it : model->named_parameters()) {
        if (it.value().grad().defined()) {
          g[it.key()] = it.value().grad().clone();
        }
      }
      return g;
    };
    int plain_nodes = 0, ckpt_nodes = 0;
    int64_t plain_kept = 0, ckpt_kept = 0;
    const auto plain = run(false, &plain_nodes, &plain_kept);
    const auto ckpt = run(true, &ckpt_nodes, &ckpt_kept);
    EXPECT_TRUE(model->visual->gradient_checkpointing());
    EXPECT_EQ(plain_nodes, 0);
    EXPECT_EQ(ckpt_nodes, depth + layers);
    ASSERT_EQ(plain.size(), model->parameters().size());
    ASSERT_EQ(ckpt.size(), plain.size());
    double worst = 0;
    int vision = 0;
    for (const auto& [n, g] : plain) {
      const double scale = std::max(1.0, g.abs().max().item<double>());
      const double diff = (g - ckpt.at(n)).abs().max().item<double>() / scale;
      worst = std::max(worst, diff);
      EXPECT_LE(diff, 1e-6) << n;
      EXPECT_GT(g.abs().sum().item<double>(), 0) << n;
      vision += n.rfind("visual.", 0) == 0;
    }
    EXPECT_GT(vision, 4 * depth);

    // The tower alone: each block keeps only its input.
    model->visual->enable_gradient_checkpointing(false);
    const auto grids = GridsFromTensor(b.grid);
    auto tower_plain =
        KeptBytes([&] { return model->visual->Forward(b.pixels, grids); });
    model->visual->enable_gradient_checkpointing(true);
    auto tower_ckpt =
        KeptBytes([&] { return model->visual->Forward(b.pixels, grids); });
    EXPECT_EQ(CountGraphNodes(tower_ckpt.second, "CheckpointBackward"), depth);
    EXPECT_TRUE(tower_ckpt.second.equal(tower_plain.second));
    std::printf(
        "%s: max grad diff %.3g (rel); kept after forward: model %lld -> "
        "%lld bytes, tower %lld -> %lld bytes\n",
        name, worst, static_cast<long long>(plain_kept),
        static_cast<long long>(ckpt_kept),
        static_cast<long long>(tower_plain.first),
        static_cast<long long>(tower_ckpt.first));
    if (tracked) {
      EXPECT_LT(ckpt_kept, plain_kept);
      EXPECT_LT(tower_ckpt.first * 3, tower_plain.first);
    }
  }
  if (tracked) profiler::MemoryTracker::Global().Disable();
}

// verl's freeze_vision_tower: the vision tower (merger included) gets no
// gradients, the language model still does; unfreezing restores them.
TEST(VlmConfigTest, FreezeVisionTower) {
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto model = CreateVlmModel(*config, 7);
  model->FreezeVisionTower();
  const int64_t pad = config->image_token_id;
  std::vector<int64_t> ids = {5,   config->vision_start_token_id, pad, pad, pad,
                              pad, config->vision_end_token_id,   9,   10};
  at::Tensor grid =
      at::tensor(std::vector<int64_t>{1, 4, 4}, at::kLong).reshape({1, 3});
  at::Tensor pix = at::randn({16, 1176});
  auto run = [&] {
    auto out =
        model->ForwardMultimodal(at::tensor(ids, at::kLong), {0, 9}, pix, grid);
    ASSERT_TRUE(out.ok()) << out.status();
    out->logits.sum().backward();
  };
  run();
  int64_t frozen = 0;
  for (const auto& p : model->visual->parameters()) {
    EXPECT_FALSE(p.requires_grad());
    EXPECT_FALSE(p.grad().defined());
    ++frozen;
  }
  EXPECT_GT(frozen, 10);
  EXPECT_GT(model->model->layers[0]
                ->self_attn->q_proj->weight.grad()
                .abs()
                .sum()
                .item<double>(),
            0);
  model->FreezeVisionTower(false);
  run();
  EXPECT_GT(
      model->visual->merger->fc2->weight.grad().abs().sum().item<double>(), 0);
}

// The tiny preset learns an answer that only the image holds (the flat
// colour of a 6x6-patch image, 4 colours) in a few dozen AdamW steps, and
// the answer follows the image: swapping the images between rows changes
// it. Guards the training path of the images (pads spliced in order,
// gradients through the merger and tower): with the image embeddings lost
// or misplaced the loss stays at ln 4.
TEST(VlmConfigTest, TinyPresetLearnsAnAnswerOnlyTheImageHolds) {
  auto config = MakeVlmPreset("tiny-qwen2.5-vl");
  ASSERT_TRUE(config.ok());
  auto model = CreateVlmModel(*config, 3);
  const int64_t pad = config->image_token_id;
  // <text> <vision_start> 9 pads <vision_end> <question>; then the answer.
  std::vector<int64_t> prompt = {40, 41, 42, config->vision_start_token_id};
  prompt.insert(prompt.end(), 9, pad);
  for (int64_t t : {config->vision_end_token_id, 50L, 51L, 52L, 53L}) {
    prompt.push_back(t);
  }
  const int64_t answers[4] = {100, 101, 102, 103};
  // CLIP-normalised flat colours: red, green, blue, yellow.
  const float rgb[4][3] = {{1.2f, -1.2f, -1.1f},
                           {-1.5f, 1.3f, -1.1f},
                           {-1.5f, -1.2f, 1.6f},
                           {1.3f, 1.4f, -1.0f}};
  const int64_t dim = config->vision.PatchDim(), per_channel = dim / 3;
  auto image = [&](int c) {
    at::Tensor row = at::empty({3, per_channel});
    for (int k = 0; k < 3; ++k) row[k].fill_(rgb[c][k]);
    return row.reshape({1, dim}).expand({36, dim});
  };
  // Rows with colours `colours` and images `shown` (their order).
  auto forward = [&](const std::vector<int>& colours,
                     const std::vector<int>& shown) {
    std::vector<int64_t> ids, cu = {0}, at_answer, targets;
    std::vector<at::Tensor> pixels;
    for (size_t b = 0; b < colours.size(); ++b) {
      ids.insert(ids.end(), prompt.begin(), prompt.end());
      at_answer.push_back(ids.size() - 1);
      targets.push_back(answers[colours[b]]);
      ids.push_back(answers[colours[b]]);
      cu.push_back(ids.size());
      pixels.push_back(image(shown[b]));
    }
    at::Tensor grid = at::tensor(std::vector<int64_t>{1, 6, 6}, at::kLong)
                          .reshape({1, 3})
                          .repeat({static_cast<int64_t>(colours.size()), 1});
    auto out = model->ForwardMultimodal(at::tensor(ids, at::kLong), cu,
                                        at::cat(pixels), grid);
    CHECK(out.ok()) << out.status();
    at::Tensor logits =
        out->logits.index_select(0, at::tensor(at_answer, at::kLong));
    return std::make_pair(logits, at::tensor(targets, at::kLong));
  };
  std::mt19937 rng(5);
  torch::optim::AdamW opt(model->parameters(),
                          torch::optim::AdamWOptions(2e-3).weight_decay(0));
  double first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    std::vector<int> colours(8);
    for (int& c : colours) c = rng() % 4;
    auto [logits, targets] = forward(colours, colours);
    at::Tensor loss = at::cross_entropy_loss(logits, targets);
    opt.zero_grad();
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  torch::NoGradGuard no_grad;
  const std::vector<int> colours = {0, 1, 2, 3, 0, 1, 2, 3};
  auto [logits, targets] = forward(colours, colours);
  const double loss = at::cross_entropy_loss(logits, targets).item<double>();
  EXPECT_LT(loss, 0.1) << "first step " << first << ", last " << last;
  EXPECT_TRUE(logits.argmax(-1).equal(targets));
  // Same questions, images rotated by one colour: the answers follow them.
  const std::vector<int> rotated = {1, 2, 3, 0, 1, 2, 3, 0};
  auto [moved, unused] = forward(colours, rotated);
  EXPECT_TRUE(moved.argmax(-1).equal(at::tensor(
      std::vector<int64_t>{101, 102, 103, 100, 101, 102, 103, 100})));
}

}  // namespace
}  // namespace verl::models::vlm
