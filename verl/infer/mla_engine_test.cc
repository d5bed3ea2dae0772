// File: verl/infer/mla_engine_test.cc
//
// The engine serving a DeepSeek-V3 model (multi-head latent attention) from
// its latent paged cache: greedy output for 64 prompts (with a shared
// prefix, chunked prefill, several blocks per sequence) equals the greedy
// continuation of the training forward (full sequence each step, expanded
// K/V), and the cache holds exactly the latent per token.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "verl/infer/engine.h"
#include "verl/models/presets.h"

namespace verl::infer {
namespace {

std::shared_ptr<models::CausalLM> TinyDeepseek() {
  auto cfg = models::MakePreset("tiny-deepseek-v3");
  CHECK(cfg.ok()) << cfg.status();
  return models::CreateModel(*cfg, /*seed=*/5, /*init_std=*/0.1);
}

// Greedy continuation by the training forward over the whole sequence.
std::vector<int64_t> TrainingGreedy(models::CausalLM& model,
                                    std::vector<int64_t> tokens,
                                    int64_t max_tokens) {
  c10::InferenceMode guard;
  const auto& eos = model.config().eos_token_ids;
  std::vector<int64_t> out;
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    const int64_t n = static_cast<int64_t>(tokens.size());
    at::Tensor logits =
        model
            .ForwardPacked(at::tensor(tokens, at::kLong), at::arange(n), {0, n})
            .logits;
    const int64_t next = logits[n - 1].argmax().item<int64_t>();
    out.push_back(next);
    tokens.push_back(next);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
  }
  return out;
}

TEST(MlaEngineTest, GreedyEqualsTrainingForwardFromLatentCache) {
  auto model = TinyDeepseek();
  const models::ModelConfig& c = model->config();
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> tok(0, c.vocab_size - 2);
  std::vector<int64_t> system(11);
  for (auto& t : system) t = tok(rng);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < 64; ++i) {
    std::vector<int64_t> p;
    if (i % 2 == 0) p = system;
    for (int64_t j = 0; j < 1 + (i * 7) % 13; ++j) p.push_back(tok(rng));
    prompts.push_back(p);
  }
  constexpr int64_t kMaxTokens = 6;

  EngineOptions o;
  o.block_size = 4;
  o.max_model_len = 64;
  o.num_kv_blocks = 512;
  o.max_num_seqs = 16;
  o.max_num_batched_tokens = 64;
  auto engine = LLMEngine::Create(model, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  // KV bytes per token: the latent and rope key of every layer, no values.
  const int64_t latent_bytes = c.num_hidden_layers *
                               (c.kv_lora_rank + c.qk_rope_head_dim) *
                               static_cast<int64_t>(sizeof(float));
  EXPECT_EQ((*engine)->kv_cache_bytes(), 512 * o.block_size * latent_bytes);
  EXPECT_EQ(latent_bytes, 4 * (32 + 16) * 4);

  SamplingParams greedy;
  greedy.temperature = 0.0;
  greedy.max_tokens = kMaxTokens;
  auto results = (*engine)->Generate(prompts, greedy);
  int64_t tokens = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    const std::vector<int64_t>& got = results[i]->outputs[0].token_ids;
    EXPECT_EQ(got, TrainingGreedy(*model, prompts[i], kMaxTokens))
        << "prompt " << i;
    tokens += static_cast<int64_t>(got.size());
  }
  EXPECT_GT(tokens, 64 * 3);
  EXPECT_GT((*engine)->stats().prefix_cache_hit_rate, 0.0);
}

}  // namespace
}  // namespace verl::infer
