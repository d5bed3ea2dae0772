// File: verl/infer/decode_alloc_test.cc
//
// The decode loop's allocation-freedom (issue #20): once warm, a decode
// step of the fused fp32 path allocates nothing on the heap — counted
// process-wide by HeapCounter (malloc, posix_memalign, operator new, and
// so LibTorch's CPU allocator and TensorImpl creation too).
#include <ATen/ops/empty.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <vector>

#include "verl/core/heap_counter.h"
#include "verl/infer/engine.h"
#include "verl/infer/fused_forward.h"
#include "verl/infer/kv_cache.h"
#include "verl/infer/paged_attention.h"
#include "verl/models/presets.h"

namespace verl::infer {
namespace {

using core::testing::HeapCounter;

std::shared_ptr<models::CausalLM> Model(const std::string& preset) {
  auto cfg = models::MakePreset(preset);
  CHECK(cfg.ok()) << cfg.status();
  cfg->max_position_embeddings = 256;
  return models::CreateModel(*cfg, /*seed=*/1, /*init_std=*/0.1);
}

// FusedForward::ForwardRows over PagedAttention, then the LM head in
// chunks: 4 sequences decoding one token a step, crossing block
// boundaries. Every step after the first allocates nothing.
void ExpectForwardDoesNotAllocate(const std::string& preset) {
  SCOPED_TRACE(preset);
  auto model = Model(preset);
  const models::ModelConfig& c = model->config();
  KvCacheSpec spec;
  spec.num_layers = c.num_hidden_layers;
  spec.num_kv_heads = c.num_key_value_heads;
  spec.head_dim = c.HeadDim();
  spec.block_size = 4;
  constexpr int64_t kSeqs = 4, kBlocksPerSeq = 8;
  KvCache cache(spec, kSeqs * kBlocksPerSeq);
  cache.Allocate();
  PagedAttention attention(&cache, model->LayerWindows());
  attention.Reserve(kSeqs, kBlocksPerSeq);
  FusedForward forward(model.get(), c.max_position_embeddings);
  forward.Prepack();
  ASSERT_TRUE(forward.Applies());
  const int64_t vocab = forward.HeadVocab();
  ASSERT_EQ(vocab, c.vocab_size);

  std::vector<std::vector<BlockId>> tables(kSeqs);
  for (int64_t s = 0; s < kSeqs; ++s) {
    for (int64_t b = 0; b < kBlocksPerSeq; ++b) {
      tables[s].push_back(static_cast<BlockId>(s * kBlocksPerSeq + b));
    }
  }
  std::vector<AttentionSequence> meta(kSeqs);
  std::vector<int64_t> ids(kSeqs), pos(kSeqs);
  std::vector<float> logits(kSeqs * 256);
  for (int64_t step = 0; step < 20; ++step) {
    HeapCounter counter;
    for (int64_t s = 0; s < kSeqs; ++s) {
      meta[s] = {s, 1, step + 1, &tables[s]};
      ids[s] = (7 * s + step) % c.vocab_size;
      pos[s] = step;
    }
    attention.Prepare(meta, kSeqs);
    const RowsView h =
        forward.ForwardRows(ids.data(), pos.data(), kSeqs, attention);
    for (int64_t v0 = 0; v0 < vocab; v0 += 256) {
      forward.HeadChunk(h, v0, std::min<int64_t>(vocab, v0 + 256),
                        logits.data());
    }
    if (step > 0) {
      EXPECT_EQ(counter.allocations(), 0) << "step " << step;
    }
  }
}

TEST(DecodeAllocTest, FusedForwardAndPagedAttentionDoNotAllocate) {
  if (!core::testing::HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  ExpectForwardDoesNotAllocate("tiny-qwen2");  // q/k/v biases
  ExpectForwardDoesNotAllocate("tiny-qwen3");  // q/k-norm
}

// LLMEngine::Step on the fused fp32 path with the chunked LM head: 6
// sequences (greedy, top-k, top-k + top-p, top-p, unfiltered with a
// repetition penalty; one request forked into 2 samples) decoding across
// block boundaries. Once every sequence decodes (prefill, forks and the
// first steps done) no step allocates until the first one finishes.
TEST(DecodeAllocTest, EngineDecodeStepsDoNotAllocate) {
  if (!core::testing::HeapCounter::Available()) {
    GTEST_SKIP() << "no allocation counting under this sanitizer";
  }

  EngineOptions opt;
  opt.num_kv_blocks = 64;
  opt.block_size = 8;
  opt.num_threads = 1;
  auto engine = LLMEngine::Create(Model("tiny-qwen2"), opt);
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<SamplingParams> params(5);
  params[0].temperature = 0;
  params[1].top_k = 5;
  params[2].top_k = 20;
  params[2].top_p = 0.8;
  params[3].top_p = 0.9;
  params[3].n = 2;
  params[4].repetition_penalty = 1.3;
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].max_tokens = 30;
    params[i].ignore_eos = true;
    params[i].seed = i;
    ASSERT_TRUE(
        (*engine)
            ->AddRequest({1, 2, 3, 4, 5 + static_cast<int64_t>(i)}, params[i])
            .ok());
  }
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE((*engine)->Step().empty());
  }
  ASSERT_GT((*engine)->stats().chunked_head_steps, 0);
  int steps = 0;
  while (true) {
    HeapCounter counter;
    const bool finished = !(*engine)->Step().empty();
    if (finished) break;
    EXPECT_EQ(counter.allocations(), 0) << "decode step " << steps;
    ++steps;
  }
  EXPECT_EQ(steps, 30 - 4);  // crosses the blocks at 8, 16, 24 and 32
}

}  // namespace
}  // namespace verl::infer
