#include "verl/models/flops_dims.h"

#include <set>

#include "gtest/gtest.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

TEST(FlopsDimsTest, CountEveryMatmulWeight) {
  auto config = MakePreset("tiny-qwen2", 300);
  ASSERT_TRUE(config.ok()) << config.status();
  auto model = CreateModel(*config, 1);
  // Independent count: the 2-D weights (embedding, projections, head).
  std::set<const void*> seen;
  double weights = 0;
  for (const auto& p : model->parameters()) {
    if (p.dim() == 2 && seen.insert(p.data_ptr()).second) weights += p.numel();
  }
  if (config->tie_word_embeddings)  // verl counts embedding and head
    weights += config->vocab_size * config->hidden_size;
  const profiler::FlopsModelDims d = FlopsDims(*config);
  const double attn_one_token = 6.0 * d.head_dim * d.num_attention_heads *
                                d.num_hidden_layers;  // L_i^2 = 1
  EXPECT_DOUBLE_EQ(profiler::TrainingFlops(d, {1}) - attn_one_token,
                   6.0 * weights);
}

}  // namespace
}  // namespace verl::models
