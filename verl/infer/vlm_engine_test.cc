// File: verl/infer/vlm_engine_test.cc
//
// The engine with image inputs on the tiny-qwen2.5-vl preset: greedy
// output and log-probs equal the training forward's (ForwardMultimodal over
// prompt + generated tokens, no KV cache) continuation, for one image, two
// images in one prompt, a larger image and a text prompt batched together
// with chunked prefill cutting through the image tokens; prefix caching
// keyed on image content (same image: blocks and the vision encoding
// reused; same-size different image: no reuse past the first pad).
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "verl/core/test_util.h"
#include "verl/infer/engine.h"
#include "verl/models/presets.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::infer {
namespace {

using models::vlm::Image;
using models::vlm::Qwen2VLForConditionalGeneration;
using ::verl::core::testing::StatusIs;

models::vlm::VlmConfig TinyConfig() {
  auto c = models::vlm::MakeVlmPreset("tiny-qwen2.5-vl");
  CHECK(c.ok()) << c.status();
  c->text.max_position_embeddings = 512;
  return *c;
}

Image MakeImage(int64_t w, int64_t h, int seed) {
  Image im;
  im.width = w;
  im.height = h;
  im.rgb.resize(w * h * 3);
  uint64_t x = 0x9E3779B97F4A7C15ULL * (seed + 1);
  for (auto& v : im.rgb) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v = static_cast<uint8_t>(x >> 56);
  }
  return im;
}

struct Prompt {
  std::vector<int64_t> ids;
  MultiModalInput mm;
};

Prompt MakePrompt(const std::string& content,
                  const std::vector<Image>& images) {
  const models::vlm::VlmConfig config = TinyConfig();
  auto tok = models::vlm::MakeVlmTokenizer(config);
  CHECK(tok.ok()) << tok.status();
  models::vlm::ImageProcessorConfig ic;
  ic.min_pixels = 28 * 28;
  ic.max_pixels = 28 * 28 * 20;
  models::vlm::VlmProcessor proc(*tok, ic);
  auto out = proc.ProcessMessages(
      nlohmann::json::array({{{"role", "user"}, {"content", content}}}),
      images);
  CHECK(out.ok()) << out.status();
  return {out->input_ids, {out->pixel_values, out->image_grid_thw}};
}

struct Greedy {
  std::vector<int64_t> tokens;
  std::vector<float> logprobs;
};

// The training forward's greedy continuation: the whole sequence through
// ForwardMultimodal at every step (vision tower included, no cache).
Greedy ReferenceGreedy(Qwen2VLForConditionalGeneration& model, const Prompt& p,
                       int64_t max_tokens) {
  c10::InferenceMode guard;
  Greedy g;
  std::vector<int64_t> seq = p.ids;
  for (int64_t i = 0; i < max_tokens; ++i) {
    const int64_t n = static_cast<int64_t>(seq.size());
    auto out = model.ForwardMultimodal(at::tensor(seq, at::kLong), {0, n},
                                       p.mm.pixel_values, p.mm.image_grid_thw);
    CHECK(out.ok()) << out.status();
    at::Tensor last = out->logits[n - 1].to(at::kDouble);
    const int64_t tok = last.argmax().item<int64_t>();
    g.tokens.push_back(tok);
    g.logprobs.push_back(
        static_cast<float>(at::log_softmax(last, 0)[tok].item<double>()));
    seq.push_back(tok);
  }
  return g;
}

SamplingParams GreedyParams(int64_t max_tokens, int64_t n = 1) {
  SamplingParams sp;
  sp.n = n;
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

std::shared_ptr<Qwen2VLForConditionalGeneration> TinyModel() {
  return models::vlm::CreateVlmModel(TinyConfig(), /*seed=*/7,
                                     /*init_std=*/0.1);
}

TEST(VlmEngineTest, GreedyEqualsTrainingForwardWithImages) {
  const std::vector<Prompt> prompts = {
      MakePrompt("<image>Which landmark is north of the lake?",
                 {MakeImage(84, 56, 1)}),
      MakePrompt("Compare <image> and <image>: which is larger?",
                 {MakeImage(56, 56, 2), MakeImage(40, 90, 3)}),
      MakePrompt("<image>Name the quadrant.", {MakeImage(140, 112, 4)}),
      MakePrompt("No image: 12+7=", {}),
  };
  int64_t pads = 0;
  for (const Prompt& p : prompts) {
    pads += std::count(p.ids.begin(), p.ids.end(), TinyConfig().image_token_id);
  }
  // 84x56 -> grid 4x6; 56x56 -> 4x4 and 40x90 -> 84x28 px -> 6x2;
  // 140x112 -> 8x10.
  EXPECT_EQ(pads, 6 + (4 + 3) + 20);
  constexpr int64_t kMaxTokens = 6;
  auto model = TinyModel();
  std::vector<Greedy> want;
  for (const Prompt& p : prompts)
    want.push_back(ReferenceGreedy(*model, p, kMaxTokens));

  for (bool fused : {true, false}) {
    EngineOptions o;
    o.block_size = 4;
    o.num_kv_blocks = 256;
    o.max_num_batched_tokens = 24;  // prefill chunks cut through images
    o.fused_forward = fused;
    auto engine = LLMEngine::Create(TinyModel(), o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    for (const Prompt& p : prompts) {
      ASSERT_TRUE(
          (*engine)->AddRequest(p.ids, GreedyParams(kMaxTokens), p.mm).ok());
    }
    std::vector<RequestOutput> outs = (*engine)->RunUntilDone();
    ASSERT_EQ(outs.size(), prompts.size());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const CompletionOutput& c = outs[i].outputs[0];
      EXPECT_EQ(c.token_ids, want[i].tokens)
          << "prompt " << i << " fused=" << fused;
      ASSERT_EQ(c.logprobs.size(), want[i].logprobs.size());
      for (size_t k = 0; k < c.logprobs.size(); ++k) {
        EXPECT_NEAR(c.logprobs[k], want[i].logprobs[k], 2e-5)
            << "prompt " << i << " token " << k << " fused=" << fused;
      }
    }
    // The batch API gives the same tokens.
    std::vector<std::vector<int64_t>> ids;
    std::vector<MultiModalInput> images;
    for (const Prompt& p : prompts) {
      ids.push_back(p.ids);
      images.push_back(p.mm);
    }
    auto gen = (*engine)->Generate(ids, GreedyParams(kMaxTokens), images);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_TRUE(gen[i].ok()) << gen[i].status();
      EXPECT_EQ(gen[i]->outputs[0].token_ids, want[i].tokens) << i;
    }
    EXPECT_FALSE(
        (*engine)->Generate(ids, GreedyParams(2), {images[0]})[0].ok());
    const EngineStats st = (*engine)->stats();
    // Once per image request; the Generate() round found every image's
    // blocks in the prefix cache and ran no vision tower.
    EXPECT_EQ(st.vision_encodings, 3);
    EXPECT_EQ(st.images_encoded, 4);
    EXPECT_GT(st.vision_s, 0.0);
  }
}

TEST(VlmEngineTest, PrefixCacheIsKeyedOnImageContent) {
  const Prompt x =
      MakePrompt("<image>Which road is longest?", {MakeImage(84, 56, 11)});
  const Prompt y =
      MakePrompt("<image>Which road is longest?", {MakeImage(84, 56, 12)});
  ASSERT_EQ(x.ids, y.ids);  // same tokens, different pixels
  const int64_t P = static_cast<int64_t>(x.ids.size());
  const int64_t first_pad =
      std::find(x.ids.begin(), x.ids.end(), TinyConfig().image_token_id) -
      x.ids.begin();
  auto model = TinyModel();
  const Greedy want_x = ReferenceGreedy(*model, x, 5);
  const Greedy want_y = ReferenceGreedy(*model, y, 5);

  EngineOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 256;
  auto engine = LLMEngine::Create(TinyModel(), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;

  // n = 4 samples: the prompt (image included) is computed once and shared.
  ASSERT_TRUE(e.AddRequest(x.ids, GreedyParams(5, 4), x.mm).ok());
  std::vector<RequestOutput> a = e.RunUntilDone();
  ASSERT_EQ(a.size(), 1u);
  for (const CompletionOutput& c : a[0].outputs)
    EXPECT_EQ(c.token_ids, want_x.tokens);
  EngineStats st = e.stats();
  EXPECT_EQ(st.prefill_tokens, P);
  EXPECT_EQ(st.vision_encodings, 1);

  // The same image again: every full prompt block comes from the cache,
  // the image's pads included, so the vision tower does not run again.
  ASSERT_TRUE(e.AddRequest(x.ids, GreedyParams(5), x.mm).ok());
  std::vector<RequestOutput> b = e.RunUntilDone();
  EXPECT_EQ(b[0].outputs[0].token_ids, want_x.tokens);
  const EngineStats st2 = e.stats();
  const int64_t full_blocks = (P - 1) / o.block_size;
  EXPECT_EQ(st2.prefix_cache_hit_blocks - st.prefix_cache_hit_blocks,
            full_blocks);
  EXPECT_EQ(st2.vision_encodings, 1);
  EXPECT_EQ(st2.prefill_tokens - st.prefill_tokens, P - full_blocks * 4);

  // A different image of the same size: only the blocks before its first
  // pad are shared; the output is the reference's for that image.
  ASSERT_TRUE(e.AddRequest(y.ids, GreedyParams(5), y.mm).ok());
  std::vector<RequestOutput> c = e.RunUntilDone();
  EXPECT_EQ(c[0].outputs[0].token_ids, want_y.tokens);
  const EngineStats st3 = e.stats();
  EXPECT_EQ(st3.prefix_cache_hit_blocks - st2.prefix_cache_hit_blocks,
            first_pad / o.block_size);
  EXPECT_EQ(st3.vision_encodings, 2);
  std::printf(
      "prompt %ld tokens (first pad at %ld), block 4: 4 samples prefilled "
      "%ld tokens once; same image: %ld of %ld full blocks reused, vision "
      "runs %ld; other image: %ld blocks reused, vision runs %ld\n",
      static_cast<long>(P), static_cast<long>(first_pad),
      static_cast<long>(st.prefill_tokens),
      static_cast<long>(st2.prefix_cache_hit_blocks -
                        st.prefix_cache_hit_blocks),
      static_cast<long>(full_blocks), static_cast<long>(st2.vision_encodings),
      static_cast<long>(st3.prefix_cache_hit_blocks -
                        st2.prefix_cache_hit_blocks),
      static_cast<long>(st3.vision_encodings));
}

// Sleep() mid-generation preempts every sequence and clears the prefix
// cache; after WakeUp() the prompts (image pads included) are recomputed
// from the request's kept embeddings: same output, no second vision run.
TEST(VlmEngineTest, RecomputeAfterPreemptionReusesImageEmbeddings) {
  const std::vector<Prompt> prompts = {
      MakePrompt("<image>Which landmark is nearest?", {MakeImage(84, 56, 21)}),
      MakePrompt("<image> vs <image>?",
                 {MakeImage(56, 56, 22), MakeImage(56, 84, 23)})};
  auto model = TinyModel();
  EngineOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 256;
  auto engine = LLMEngine::Create(TinyModel(), o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  LLMEngine& e = **engine;
  for (const Prompt& p : prompts)
    ASSERT_TRUE(e.AddRequest(p.ids, GreedyParams(8), p.mm).ok());
  for (int i = 0; i < 3; ++i) e.Step();  // prefill + a couple of decodes
  e.Sleep();
  e.WakeUp();
  std::vector<RequestOutput> outs = e.RunUntilDone();
  ASSERT_EQ(outs.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(outs[i].outputs[0].token_ids,
              ReferenceGreedy(*model, prompts[i], 8).tokens)
        << "prompt " << i;
    EXPECT_GT(outs[i].outputs[0].num_preemptions, 0);
  }
  EXPECT_EQ(e.stats().vision_encodings, 2);
}

TEST(VlmEngineTest, BadImageRequestsAreRefused) {
  const Prompt x = MakePrompt("<image>?", {MakeImage(56, 56, 1)});
  EngineOptions o;
  o.num_kv_blocks = 64;
  auto engine = LLMEngine::Create(TinyModel(), o);
  ASSERT_TRUE(engine.ok());
  LLMEngine& e = **engine;
  // Pads without images.
  EXPECT_THAT(e.AddRequest(x.ids, GreedyParams(2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "4 <|image_pad|> tokens but no images"));
  // pixel_values that do not match the grid.
  MultiModalInput bad = x.mm;
  bad.pixel_values = bad.pixel_values.narrow(0, 0, 8);
  EXPECT_THAT(e.AddRequest(x.ids, GreedyParams(2), bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "pixel_values must be [16, 1176]"));
  // Fewer pads than the grid needs (RopeIndex's check).
  std::vector<int64_t> short_ids = x.ids;
  short_ids.erase(std::find(short_ids.begin(), short_ids.end(),
                            TinyConfig().image_token_id));
  EXPECT_FALSE(e.AddRequest(short_ids, GreedyParams(2), x.mm).ok());
  // Images for a text-only model.
  auto cfg = models::MakePreset("tiny-qwen2");
  ASSERT_TRUE(cfg.ok());
  o.max_model_len = 256;
  auto text = LLMEngine::Create(models::CreateModel(*cfg, 1), o);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT((*text)->AddRequest({1, 2, 3}, GreedyParams(2), x.mm),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "not a vision-language model"));
  EXPECT_FALSE(e.HasUnfinished());
}

}  // namespace
}  // namespace verl::infer
