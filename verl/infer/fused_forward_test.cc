// File: verl/infer/fused_forward_test.cc
//
// FusedForward against the model's own Forward/Logits (the training path):
// dense with q/k/v bias (Qwen2), q/k-norm with head_dim != hidden/heads
// (Qwen3), llama3 RoPE scaling, MoE layers; fused weight copies following
// in-place parameter updates; the LM head at 1-8 rows (whole and in
// vocabulary chunks) against the training head; fallback for bf16 models.
#include "verl/infer/fused_forward.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "verl/models/presets.h"

namespace verl::infer {
namespace {

std::shared_ptr<models::CausalLM> Model(const std::string& preset) {
  auto cfg = models::MakePreset(preset);
  CHECK(cfg.ok()) << cfg.status();
  return models::CreateModel(*cfg, /*seed=*/3, /*init_std=*/0.1);
}

// Two packed sequences (lengths 5 and 3, the second starting at position 4).
struct Batch {
  at::Tensor ids, pos;
  std::vector<int64_t> cu = {0, 5, 8};
};
Batch MakeBatch(int64_t vocab) {
  Batch b;
  b.ids = at::randint(vocab, {8}, at::kLong);
  b.pos = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 4, 5, 6}, at::kLong);
  return b;
}

void ExpectSameAsModel(models::CausalLM& model, FusedForward& fused,
                       const Batch& b) {
  c10::InferenceMode guard;
  models::VarlenCausalAttention a1(b.cu, model.LayerWindows());
  models::VarlenCausalAttention a2(b.cu, model.LayerWindows());
  at::Tensor want = model.Forward(b.ids, b.pos, a1);
  at::Tensor got = fused.Forward(b.ids, b.pos, a2);
  ASSERT_EQ(got.sizes(), want.sizes());
  EXPECT_TRUE(at::allclose(got, want, 1e-4, 1e-5))
      << "max diff " << (got - want).abs().max().item<float>();
  at::Tensor lw = model.Logits(want), lg = fused.Logits(got);
  EXPECT_TRUE(at::allclose(lg, lw, 1e-4, 1e-4))
      << "max logit diff " << (lg - lw).abs().max().item<float>();
}

TEST(FusedForwardTest, MatchesModelForward) {
  for (const char* preset :
       {"tiny-qwen2", "tiny-qwen3", "tiny-llama3", "tiny-qwen2-moe"}) {
    SCOPED_TRACE(preset);
    at::manual_seed(1);
    auto model = Model(preset);
    FusedForward fused(model.get(), model->config().max_position_embeddings);
    ASSERT_TRUE(fused.Applies());
    ExpectSameAsModel(*model, fused, MakeBatch(model->config().vocab_size));
    // One token: every projection on the row-streaming kernel over the
    // model's own weights (SmallGemmSources).
    Batch one;
    one.ids = at::randint(model->config().vocab_size, {1}, at::kLong);
    one.pos = at::tensor(std::vector<int64_t>{3}, at::kLong);
    one.cu = {0, 1};
    ExpectSameAsModel(*model, fused, one);
    EXPECT_GT(fused.WeightBytes(), 0);
    EXPECT_GT(fused.stats().gemm_flops, 0);
  }
}

TEST(FusedForwardTest, FollowsInPlaceParameterUpdates) {
  at::manual_seed(2);
  auto model = Model("tiny-qwen2");
  FusedForward fused(model.get(), model->config().max_position_embeddings);
  const Batch b = MakeBatch(model->config().vocab_size);
  ExpectSameAsModel(*model, fused, b);
  at::Tensor before;
  {
    c10::InferenceMode guard;
    models::VarlenCausalAttention a(b.cu);
    before = fused.Forward(b.ids, b.pos, a);
  }
  {
    at::NoGradGuard no_grad;
    auto params = model->named_parameters();
    params["model.layers.1.self_attn.k_proj.weight"].add_(0.05);
    params["model.layers.0.mlp.up_proj.weight"].mul_(1.5);
    params["model.layers.1.self_attn.q_proj.bias"].add_(0.1);
  }
  ExpectSameAsModel(*model, fused, b);
  c10::InferenceMode guard;
  models::VarlenCausalAttention a(b.cu);
  EXPECT_FALSE(at::allclose(fused.Forward(b.ids, b.pos, a), before));
}

// The LM head at 1, 5 and 8 rows runs on the row-streaming kernel
// (small_gemm_nt: 1-4 rows in one group, 5-8 in one pass on AVX-512), whole
// (Logits) and in the sampler's vocabulary chunks (HeadChunk): the chunks
// bit-equal to the whole head, both against the training head
// (CausalLM::Logits, BLIS): logits within 1e-4, log-softmax within 1e-5.
// A vocabulary of 5003 leaves chunk, block and vector tails.
TEST(FusedForwardTest, HeadAtOneToEightRowsMatchesTrainingHead) {
  at::manual_seed(4);
  auto cfg = models::MakePreset("tiny-qwen2");
  ASSERT_TRUE(cfg.ok());
  cfg->vocab_size = 5003;
  auto model = models::CreateModel(*cfg, /*seed=*/4, /*init_std=*/0.1);
  FusedForward fused(model.get(), cfg->max_position_embeddings);
  c10::InferenceMode guard;
  for (int64_t rows : {1, 5, 8}) {
    SCOPED_TRACE(rows);
    const at::Tensor hidden = at::randn({rows, cfg->hidden_size});
    const at::Tensor want = model->Logits(hidden);
    const at::Tensor whole = fused.Logits(hidden);
    const int64_t vocab = fused.HeadVocab();
    ASSERT_EQ(vocab, cfg->vocab_size);
    const RowsView x{hidden.data_ptr<float>(), rows, cfg->hidden_size,
                     cfg->hidden_size};
    at::Tensor chunked = at::empty({rows, vocab});
    std::vector<float> buf;
    for (int64_t v0 = 0; v0 < vocab; v0 += 1024) {
      const int64_t n = std::min<int64_t>(1024, vocab - v0);
      buf.assign(rows * n, 0.f);
      fused.HeadChunk(x, v0, v0 + n, buf.data());
      chunked.narrow(1, v0, n).copy_(at::from_blob(buf.data(), {rows, n}));
    }
    EXPECT_TRUE(at::equal(chunked, whole));
    EXPECT_TRUE(at::allclose(whole, want, 1e-4, 1e-4))
        << "max logit diff " << (whole - want).abs().max().item<float>();
    const float lp_diff =
        (at::log_softmax(whole, -1) - at::log_softmax(want, -1))
            .abs()
            .max()
            .item<float>();
    EXPECT_LE(lp_diff, 1e-5);
  }
}

TEST(FusedForwardTest, FallsBackForBf16Models) {
  at::manual_seed(3);
  auto model = Model("tiny-qwen2");
  model->to(at::kBFloat16);
  FusedForward fused(model.get(), model->config().max_position_embeddings);
  EXPECT_FALSE(fused.Applies());
  const Batch b = MakeBatch(model->config().vocab_size);
  c10::InferenceMode guard;
  models::VarlenCausalAttention a1(b.cu), a2(b.cu);
  EXPECT_TRUE(at::equal(fused.Forward(b.ids, b.pos, a1),
                        model->Forward(b.ids, b.pos, a2)));
}

}  // namespace
}  // namespace verl::infer
