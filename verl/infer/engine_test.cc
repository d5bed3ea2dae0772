// File: verl/infer/engine_test.cc
//
// End-to-end engine checks against a plain reference generation loop (one
// sequence at a time, contiguous K/V cache, no paging or batching) and the
// model's full-sequence forward (log-probs).
#include "verl/infer/engine.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>

#include "verl/core/test_util.h"
#include "verl/infer/tensor_parallel.h"
#include "verl/models/presets.h"
#include "verl/parallel/test_worker.h"

namespace verl::infer {
namespace {

using ::verl::core::testing::StatusIs;

using models::CausalLM;

std::shared_ptr<CausalLM> TinyModel(uint64_t seed) {
  auto cfg = models::MakePreset("tiny-qwen2");
  CHECK(cfg.ok()) << cfg.status();
  cfg->max_position_embeddings = 256;
  return models::CreateModel(*cfg, seed, /*init_std=*/0.1);
}

// Full-sequence logits [L, V] of `tokens`.
at::Tensor FullLogits(CausalLM& model, const std::vector<int64_t>& tokens) {
  c10::InferenceMode guard;
  const int64_t n = static_cast<int64_t>(tokens.size());
  return model
      .ForwardPacked(at::tensor(tokens, at::kLong), at::arange(n, at::kLong),
                     {0, n})
      .logits;
}

// Reference attention: one sequence, a contiguous K/V cache per layer that
// grows by concatenation, dense causal attention over it.
class ContiguousCache : public models::AttentionBackend {
 public:
  at::Tensor Attend(int64_t layer, const at::Tensor& q, const at::Tensor& k,
                    const at::Tensor& v) override {
    if (static_cast<int64_t>(k_.size()) <= layer) {
      k_.push_back(k);
      v_.push_back(v);
    } else {
      k_[layer] = at::cat({k_[layer], k});
      v_[layer] = at::cat({v_[layer], v});
    }
    return models::CausalAttention(q, k_[layer], v_[layer], 0);
  }

 private:
  std::vector<at::Tensor> k_, v_;
};

// Plain greedy loop: prefill the prompt, then one token per forward.
std::vector<int64_t> ReferenceGreedy(CausalLM& model,
                                     const std::vector<int64_t>& prompt,
                                     int64_t max_tokens) {
  c10::InferenceMode guard;
  const auto& eos = model.config().eos_token_ids;
  ContiguousCache cache;
  at::Tensor ids = at::tensor(prompt, at::kLong);
  int64_t pos = 0;
  std::vector<int64_t> out;
  while (static_cast<int64_t>(out.size()) < max_tokens) {
    const int64_t n = ids.size(0);
    at::Tensor hidden =
        model.Forward(ids, at::arange(pos, pos + n, at::kLong), cache);
    pos += n;
    const int64_t next = model.Logits(hidden[-1]).argmax().item<int64_t>();
    out.push_back(next);
    ids = at::tensor({next}, at::kLong);
    if (std::find(eos.begin(), eos.end(), next) != eos.end()) break;
  }
  return out;
}

// 64 prompts of lengths 1..90; every other one starts with a shared
// 37-token "system prompt" so prefix caching has something to find.
std::vector<std::vector<int64_t>> Prompts(int64_t count, int64_t vocab) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<int64_t> tok(0, vocab - 2);
  std::vector<int64_t> system(37);
  for (auto& t : system) t = tok(rng);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < count; ++i) {
    std::vector<int64_t> p;
    if (i % 2 == 0) p = system;
    const int64_t extra = 1 + (i * 37) % 53;
    for (int64_t j = 0; j < extra; ++j) p.push_back(tok(rng));
    prompts.push_back(p);
  }
  return prompts;
}

constexpr int64_t kMaxTokens = 12;

// Shared across tests: the model, the prompts and their reference outputs.
struct Fixture {
  std::shared_ptr<CausalLM> model = TinyModel(7);
  std::vector<std::vector<int64_t>> prompts =
      Prompts(64, model->config().vocab_size);
  std::vector<std::vector<int64_t>> reference;
  Fixture() {
    for (const auto& p : prompts) {
      reference.push_back(ReferenceGreedy(*model, p, kMaxTokens));
    }
  }
};

Fixture& Shared() {
  static Fixture* f = new Fixture();
  return *f;
}

EngineOptions SmallOptions() {
  EngineOptions o;
  o.block_size = 8;
  o.max_model_len = 128;
  o.num_kv_blocks = 256;
  o.max_num_seqs = 32;
  o.max_num_batched_tokens = 256;
  return o;
}

SamplingParams Greedy(int64_t n = 1) {
  SamplingParams p;
  p.do_sample = false;
  p.n = n;
  p.max_tokens = kMaxTokens;
  return p;
}

std::unique_ptr<LLMEngine> MakeEngine(std::shared_ptr<CausalLM> model,
                                      const EngineOptions& o) {
  auto engine = LLMEngine::Create(std::move(model), o);
  CHECK(engine.ok()) << engine.status();
  return std::move(engine).value();
}

void ExpectGreedyMatchesReference(const EngineOptions& o, int64_t n,
                                  EngineStats* stats) {
  Fixture& f = Shared();
  auto engine = MakeEngine(f.model, o);
  auto results = engine->Generate(f.prompts, Greedy(n));
  ASSERT_EQ(results.size(), f.prompts.size());
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok()) << results[i].status();
    ASSERT_EQ(results[i]->outputs.size(), static_cast<size_t>(n));
    for (const CompletionOutput& c : results[i]->outputs) {
      EXPECT_EQ(c.token_ids, f.reference[i])
          << "prompt " << i << " sample " << c.index;
      EXPECT_EQ(c.logprobs.size(), c.token_ids.size());
      EXPECT_EQ(c.finish_reason,
                static_cast<int64_t>(c.token_ids.size()) == kMaxTokens &&
                        c.token_ids.back() != f.model->config().eos_token_ids[0]
                    ? "length"
                    : "stop");
    }
  }
  *stats = engine->stats();
  EXPECT_EQ(stats->requests_finished, 64);
  EXPECT_EQ(engine->num_kv_blocks(), o.num_kv_blocks);
}

TEST(EngineTest, ReferenceOutputsAreNonTrivial) {
  // Guards the comparisons below against a degenerate model.
  std::set<int64_t> distinct;
  std::set<std::vector<int64_t>> distinct_outputs;
  for (const auto& r : Shared().reference) {
    distinct.insert(r.begin(), r.end());
    distinct_outputs.insert(r);
  }
  EXPECT_GT(distinct.size(), 50u);
  EXPECT_GT(distinct_outputs.size(), 48u);
}

TEST(EngineTest, GreedyMatchesReferenceWithPrefixCaching) {
  EngineStats s;
  ExpectGreedyMatchesReference(SmallOptions(), 1, &s);
  EXPECT_GT(s.prefix_cache_hit_rate, 0.2);
  EXPECT_EQ(s.preemptions, 0);
}

TEST(EngineTest, GreedyMatchesReferenceWithoutPrefixCaching) {
  EngineOptions o = SmallOptions();
  o.enable_prefix_caching = false;
  o.enable_chunked_prefill = false;
  EngineStats s;
  ExpectGreedyMatchesReference(o, 1, &s);
  EXPECT_EQ(s.prefix_cache_hit_rate, 0.0);
}

TEST(EngineTest, GreedyMatchesReferenceUnderPreemptionWithForkedSamples) {
  // 20 blocks of 8 tokens for up to 32 sequences: constant preemption; a
  // 24-token budget chunks every longer prompt; n = 3 forks share blocks.
  EngineOptions o = SmallOptions();
  o.num_kv_blocks = 20;
  o.max_num_batched_tokens = 24;
  EngineStats s;
  ExpectGreedyMatchesReference(o, 3, &s);
  EXPECT_GT(s.preemptions, 0);
}

TEST(EngineTest, SampledLogProbsMatchFullForward) {
  Fixture& f = Shared();
  auto engine = MakeEngine(f.model, SmallOptions());
  SamplingParams p;
  p.temperature = 0.8;
  p.n = 4;
  p.max_tokens = 10;
  p.seed = 11;
  p.ignore_eos = true;
  std::vector<std::vector<int64_t>> prompts(f.prompts.begin(),
                                            f.prompts.begin() + 6);
  auto results = engine->Generate(prompts, p);
  for (size_t i = 0; i < results.size(); ++i) {
    ASSERT_TRUE(results[i].ok());
    for (const CompletionOutput& c : results[i]->outputs) {
      ASSERT_EQ(c.token_ids.size(), 10u);
      EXPECT_EQ(c.finish_reason, "length");
      std::vector<int64_t> full = prompts[i];
      full.insert(full.end(), c.token_ids.begin(), c.token_ids.end());
      at::Tensor lp = at::log_softmax(FullLogits(*f.model, full) / 0.8, -1);
      const int64_t start = static_cast<int64_t>(prompts[i].size()) - 1;
      for (size_t t = 0; t < c.token_ids.size(); ++t) {
        EXPECT_NEAR(c.logprobs[t], lp[start + t][c.token_ids[t]].item<float>(),
                    1e-4)
            << "prompt " << i << " sample " << c.index << " token " << t;
      }
    }
  }
}

std::vector<std::vector<int64_t>> SampleAll(LLMEngine& engine,
                                            const SamplingParams& p,
                                            int64_t num_prompts) {
  const auto& prompts = Shared().prompts;
  std::vector<std::vector<int64_t>> out;
  for (auto& r :
       engine.Generate({prompts.begin(), prompts.begin() + num_prompts}, p)) {
    CHECK(r.ok());
    for (auto& c : r->outputs) out.push_back(c.token_ids);
  }
  return out;
}

TEST(EngineTest, SeedsReproduceAndDiffer) {
  Fixture& f = Shared();
  auto engine = MakeEngine(f.model, SmallOptions());
  SamplingParams p;
  p.n = 4;
  p.max_tokens = 8;
  p.seed = 5;
  p.ignore_eos = true;
  auto a = SampleAll(*engine, p, 4);
  // Same seed on a differently loaded engine (tiny KV -> preemption).
  EngineOptions tight = SmallOptions();
  tight.num_kv_blocks = 18;
  auto other = MakeEngine(f.model, tight);
  EXPECT_EQ(SampleAll(*other, p, 4), a);
  // The n samples of one prompt differ from each other.
  EXPECT_NE(a[0], a[1]);
  p.seed = 6;
  EXPECT_NE(SampleAll(*engine, p, 4), a);
  // top_k = 1 is greedy.
  SamplingParams top1 = p;
  top1.top_k = 1;
  top1.n = 1;
  top1.max_tokens = kMaxTokens;
  top1.ignore_eos = false;
  auto g = SampleAll(*engine, top1, 8);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], f.reference[i]);
}

// The LM head in vocabulary chunks (the default) against the full logits
// (chunked_lm_head = false): every token and log-prob equal, greedy with
// forked samples and seeded sampling with temperature, top-k, top-k +
// top-p, repetition penalty and top-p alone (the streaming nucleus; these
// random-weight rows are flat, so its buffer holds most of the vocabulary),
// at batches above and below the weight-streaming kernels' 8 rows; every
// step of the chunked engine takes the chunked head, none of the other's.
TEST(EngineTest, ChunkedLmHeadGivesTheFullLogitsTokens) {
  Fixture& f = Shared();
  EngineOptions full = SmallOptions();
  full.chunked_lm_head = false;
  auto chunked_engine = MakeEngine(f.model, SmallOptions());
  auto full_engine = MakeEngine(f.model, full);
  std::vector<SamplingParams> cases(7);
  cases[0].do_sample = false;
  cases[0].n = 3;
  cases[1].temperature = 0.8;
  cases[1].n = 4;
  cases[2].top_k = 20;
  cases[2].temperature = 1.2;
  cases[3].top_k = 40;
  cases[3].top_p = 0.8;
  cases[4].temperature = 0.9;
  cases[4].repetition_penalty = 1.3;
  cases[5].top_p = 0.9;
  cases[5].n = 2;
  cases[6].top_p = 0.5;
  cases[6].temperature = 0.7;
  cases[6].repetition_penalty = 1.2;
  for (size_t c = 0; c < cases.size(); ++c) {
    SamplingParams& p = cases[c];
    p.max_tokens = 8;
    p.seed = 17;
    p.ignore_eos = true;
    for (int64_t prompts : {2, 24}) {
      std::vector<std::vector<int64_t>> in(f.prompts.begin(),
                                           f.prompts.begin() + prompts);
      const EngineStats a0 = chunked_engine->stats();
      auto a = chunked_engine->Generate(in, p);
      auto b = full_engine->Generate(in, p);
      const EngineStats a1 = chunked_engine->stats();
      EXPECT_GT(a1.chunked_head_steps, a0.chunked_head_steps) << "case " << c;
      EXPECT_EQ(full_engine->stats().chunked_head_steps, 0);
      for (int64_t i = 0; i < prompts; ++i) {
        ASSERT_TRUE(a[i].ok() && b[i].ok());
        ASSERT_EQ(a[i]->outputs.size(), b[i]->outputs.size());
        for (size_t s = 0; s < a[i]->outputs.size(); ++s) {
          EXPECT_EQ(a[i]->outputs[s].token_ids, b[i]->outputs[s].token_ids)
              << "case " << c << " prompt " << i << " sample " << s;
          EXPECT_EQ(a[i]->outputs[s].logprobs, b[i]->outputs[s].logprobs)
              << "case " << c << " prompt " << i << " sample " << s;
        }
      }
    }
  }
  // (The GreedyMatchesReference tests run the chunked head: the default.)
}

TEST(EngineTest, TokenCallbackStreamsEveryTokenInOrder) {
  // Under preemption (tiny KV) and forked samples, the callback sees exactly
  // the tokens and log-probs the finished outputs hold, in order.
  Fixture& f = Shared();
  EngineOptions tight = SmallOptions();
  tight.num_kv_blocks = 18;
  auto engine = MakeEngine(f.model, tight);
  std::map<std::pair<int64_t, int64_t>, std::vector<int64_t>> tokens;
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> logprobs;
  engine->SetTokenCallback(
      [&](int64_t request, int64_t sample, int64_t token, float logprob) {
        tokens[{request, sample}].push_back(token);
        logprobs[{request, sample}].push_back(logprob);
      });
  SamplingParams p;
  p.n = 2;
  p.max_tokens = 8;
  p.seed = 3;
  const std::vector<std::vector<int64_t>> prompts(f.prompts.begin(),
                                                  f.prompts.begin() + 8);
  size_t checked = 0;
  for (auto& r : engine->Generate(prompts, p)) {
    ASSERT_TRUE(r.ok()) << r.status();
    for (const CompletionOutput& c : r->outputs) {
      const std::pair<int64_t, int64_t> key(r->request_id, c.index);
      EXPECT_EQ(tokens[key], c.token_ids);
      EXPECT_EQ(logprobs[key], c.logprobs);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 16u);
  EXPECT_EQ(tokens.size(), 16u);
  EXPECT_GT(engine->stats().preemptions, 0);
}

TEST(EngineTest, BadRequestsFailAloneAndOthersAreServed) {
  Fixture& f = Shared();
  auto engine = MakeEngine(f.model, SmallOptions());
  std::vector<std::vector<int64_t>> prompts = {f.prompts[0],
                                               {},
                                               std::vector<int64_t>(128, 1),
                                               {1, 2, 999999},
                                               f.prompts[1]};
  auto results = engine->Generate(prompts, Greedy());
  ASSERT_TRUE(results[0].ok());
  EXPECT_EQ(results[0]->outputs[0].token_ids, f.reference[0]);
  EXPECT_NE(results[1].status().message().find("empty prompt"),
            std::string::npos);
  EXPECT_NE(results[2].status().message().find("max_model_len"),
            std::string::npos);
  EXPECT_NE(results[3].status().message().find("vocabulary"),
            std::string::npos);
  ASSERT_TRUE(results[4].ok());
  EXPECT_EQ(results[4]->outputs[0].token_ids, f.reference[1]);
  SamplingParams bad = Greedy();
  bad.n = 0;
  EXPECT_THAT(
      engine->AddRequest(f.prompts[0], bad),
      StatusIs(absl::StatusCode::kInvalidArgument, "n must be >= 1, got 0"));
  bad = Greedy();
  bad.temperature = -1;
  EXPECT_THAT(engine->AddRequest(f.prompts[0], bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "temperature must be >= 0, got -1"));
  bad = Greedy();
  bad.top_p = 1.5;
  EXPECT_THAT(engine->AddRequest(f.prompts[0], bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "top_p must be in (0, 1], got 1.5"));
  EXPECT_FALSE(engine->HasUnfinished());
}

TEST(EngineTest, SleepFreesCacheAndWakeUpResumes) {
  Fixture& f = Shared();
  auto engine = MakeEngine(f.model, SmallOptions());
  const int64_t bytes = engine->kv_cache_bytes();
  EXPECT_GT(bytes, 0);
  for (int i = 0; i < 8; ++i) {
    ASSERT_TRUE(engine->AddRequest(f.prompts[i], Greedy()).ok());
  }
  for (int i = 0; i < 3; ++i) engine->Step();  // mid-generation
  engine->Sleep();
  EXPECT_TRUE(engine->sleeping());
  EXPECT_EQ(engine->kv_cache_bytes(), 0);
  engine->WakeUp();
  EXPECT_EQ(engine->kv_cache_bytes(), bytes);
  auto out = engine->RunUntilDone();
  ASSERT_EQ(out.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out[i].outputs[0].token_ids, f.reference[i]) << i;
  }
}

TEST(EngineTest, UpdateWeightsEqualsFreshEngine) {
  Fixture& f = Shared();
  auto old_model = TinyModel(99);
  auto engine = MakeEngine(old_model, SmallOptions());
  SampleAll(*engine, Greedy(), 4);  // warm the prefix cache with old K/V
  std::vector<std::pair<std::string, at::Tensor>> weights;
  for (const auto& item : f.model->named_parameters()) {
    weights.emplace_back(item.key(), item.value().detach());
  }
  std::map<std::string, const void*> storage_before;
  for (const auto& item : engine->model().named_parameters()) {
    storage_before[item.key()] = item.value().data_ptr();
  }
  ASSERT_EQ(storage_before.size(), weights.size());
  ASSERT_TRUE(engine->UpdateWeights(weights).ok());
  // Same storage: the update was in place, not a reload; and it holds the
  // new values.
  for (const auto& [name, w] : weights) {
    const at::Tensor* p = engine->model().named_parameters().find(name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(p->data_ptr(), storage_before.at(name)) << name;
    EXPECT_TRUE(p->equal(w)) << name;
  }
  auto g = SampleAll(*engine, Greedy(), 16);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_EQ(g[i], f.reference[i]) << i;
  EXPECT_THAT(engine->UpdateWeights({{"no.such.weight", at::zeros({1})}}),
              StatusIs(absl::StatusCode::kNotFound,
                       "UpdateWeights: no parameter named 'no.such.weight'"));
  EXPECT_THAT(engine->UpdateWeights({{weights[0].first, at::zeros({3, 3})}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "UpdateWeights: 'model.embed_tokens.weight' has shape"));
}

TEST(EngineTest, ConfigErrors) {
  Fixture& f = Shared();
  EngineOptions o = SmallOptions();
  o.num_kv_blocks = 4;  // < one max_model_len sequence
  EXPECT_THAT(LLMEngine::Create(f.model, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "KV cache too small: 4 blocks of 8 tokens"));
  o = SmallOptions();
  o.max_model_len = 100000;
  EXPECT_THAT(LLMEngine::Create(f.model, o),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "max_model_len 100000 exceeds the model's"));
  o = SmallOptions();
  o.enable_chunked_prefill = false;
  o.max_num_batched_tokens = 64;
  EXPECT_THAT(
      LLMEngine::Create(f.model, o),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "max_num_batched_tokens (64) must be >= max_model_len (128)"));
  // Budget from memory: a fraction of MemAvailable, capped by the seats.
  o = SmallOptions();
  o.num_kv_blocks = 0;
  o.gpu_memory_utilization = 0.01;
  auto e = LLMEngine::Create(f.model, o);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->num_kv_blocks(), 32 * 16 + 1);
  o = SmallOptions();
  o.dtype = "float16";
  auto bad = LLMEngine::Create(f.model, o);
  ASSERT_THAT(
      bad, StatusIs(absl::StatusCode::kInvalidArgument,
                    "dtype must be float32 or bfloat16 for this engine, got"));
  EXPECT_NE(bad.status().message().find("dtype"), std::string::npos);
}

TEST(EngineTest, Bf16DtypeConvertsWeightsAndKvCache) {
  auto model = TinyModel(/*seed=*/5);
  EngineOptions o = SmallOptions();
  o.dtype = "bfloat16";
  auto engine = LLMEngine::Create(model, o);
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ(model->parameters().front().scalar_type(), at::kBFloat16);
  EngineOptions f32 = SmallOptions();
  f32.dtype = "float32";
  auto fp32_engine = LLMEngine::Create(TinyModel(5), f32);
  ASSERT_TRUE(fp32_engine.ok());
  EXPECT_EQ((*engine)->kv_cache_bytes() * 2, (*fp32_engine)->kv_cache_bytes());
  SamplingParams p;
  p.do_sample = false;
  p.max_tokens = 6;
  p.ignore_eos = true;
  auto out = (*engine)->Generate({Shared().prompts[0]}, p);
  ASSERT_TRUE(out[0].ok());
  EXPECT_EQ(out[0]->outputs[0].token_ids.size(), 6u);
}

// Tensor-parallel rollout over 2 processes (tp_engine_worker: greedy tokens
// of tp=2 equal tp=1's, also with kv_heads=1 < tp, for Qwen3, for
// Qwen2/3-MoE and DeepSeek-V3 (MLA, sigmoid router); sampled
// tokens equal on both ranks; KV bytes per block halved; weight sync).
TEST(EngineTest, TensorParallelMatchesOneProcess) {
  EXPECT_EQ(parallel::RunTestWorker("verl/infer/tp_engine_worker", 2, {}), 0);
}

// tp that does not split the model: one line naming the key.
TEST(EngineTest, TensorParallelRefusesModelsItCannotSplit) {
  models::ModelConfig c = Shared().model->config();  // 4 heads, 2 KV heads
  EXPECT_TRUE(ValidateTensorParallel(c, 4).ok());
  EXPECT_THAT(ValidateTensorParallel(c, 3),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "actor_rollout_ref.rollout.tensor_model_parallel_size="
                       "3: does not divide num_attention_heads (4)"));
  c.num_attention_heads = 6;
  c.num_key_value_heads = 3;
  EXPECT_THAT(ValidateTensorParallel(c, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "num_key_value_heads (3) must divide one another"));
  c = Shared().model->config();
  c.num_experts = 4;
  c.num_experts_per_tok = 2;
  c.moe_intermediate_size = 90;
  EXPECT_TRUE(ValidateTensorParallel(c, 2).ok());
  EXPECT_THAT(ValidateTensorParallel(c, 4),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "does not divide moe_intermediate_size (90)"));
  // Experts are split along moe_intermediate_size, the router replicated.
  const at::Tensor up = at::arange(90 * 128, at::kFloat).view({90, 128});
  EXPECT_TRUE(
      ShardOf("model.layers.1.mlp.experts.3.up_proj.weight", up, c, 1, 2)
          .equal(up.narrow(0, 45, 45)));
  EXPECT_TRUE(
      ShardOf("model.layers.1.mlp.experts.3.down_proj.weight", up.t(), c, 1, 2)
          .equal(up.t().narrow(1, 45, 45)));
  const at::Tensor router = at::ones({4, 128});
  EXPECT_TRUE(
      ShardOf("model.layers.1.mlp.gate.weight", router, c, 1, 2).equal(router));
  // DeepSeek-V3: MLA's up projections and o_proj split by heads, the
  // down projections replicated; shared experts by their own width.
  c.scoring_func = "sigmoid";
  c.n_shared_experts = 2;
  c.kv_lora_rank = 16;
  c.qk_nope_head_dim = 8;
  c.qk_rope_head_dim = 4;
  c.v_head_dim = 6;
  c.attention_bias = false;  // tiny-qwen2 has q/k/v biases
  EXPECT_TRUE(ValidateTensorParallel(c, 2).ok());
  const at::Tensor kv_b = at::arange(4 * 14 * 16, at::kFloat).view({56, 16});
  EXPECT_TRUE(
      ShardOf("model.layers.0.self_attn.kv_b_proj.weight", kv_b, c, 1, 2)
          .equal(kv_b.narrow(0, 28, 28)));
  const at::Tensor o = at::ones({128, 24});
  EXPECT_TRUE(ShardOf("model.layers.0.self_attn.o_proj.weight", o, c, 1, 2)
                  .equal(o.narrow(1, 12, 12)));
  const at::Tensor kv_a = at::ones({20, 128});
  EXPECT_TRUE(ShardOf("model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
                      kv_a, c, 1, 2)
                  .equal(kv_a));
  const at::Tensor shared_up =
      at::arange(180 * 128, at::kFloat).view({180, 128});
  EXPECT_TRUE(ShardOf("model.layers.1.mlp.shared_experts.up_proj.weight",
                      shared_up, c, 1, 2)
                  .equal(shared_up.narrow(0, 90, 90)));
  c.attention_bias = true;
  EXPECT_THAT(ValidateTensorParallel(c, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "multi-head latent attention with attention_bias"));
  // The sharded config keeps head_dim and splits heads and the MLP.
  const models::ModelConfig s = ShardConfig(Shared().model->config(), 2);
  EXPECT_EQ(s.num_attention_heads, 2);
  EXPECT_EQ(s.num_key_value_heads, 1);
  EXPECT_EQ(s.intermediate_size, 176);
  EXPECT_EQ(s.HeadDim(), 32);
  // ShardOf: rank 1's heads (rows) of q_proj, columns of o_proj; a tensor
  // that is not the full one is undefined (UpdateWeights reports it).
  const models::ModelConfig& full = Shared().model->config();
  const at::Tensor q = at::arange(128 * 128, at::kFloat).view({128, 128});
  EXPECT_TRUE(ShardOf("model.layers.0.self_attn.q_proj.weight", q, full, 1, 2)
                  .equal(q.narrow(0, 64, 64)));
  EXPECT_TRUE(ShardOf("model.layers.0.self_attn.o_proj.weight", q, full, 1, 2)
                  .equal(q.narrow(1, 64, 64)));
  EXPECT_FALSE(ShardOf("model.layers.0.self_attn.q_proj.weight",
                       q.narrow(0, 0, 64), full, 1, 2)
                   .defined());
  EXPECT_TRUE(ShardOf("model.norm.weight", q, full, 1, 2).equal(q));
}

}  // namespace
}  // namespace verl::infer
