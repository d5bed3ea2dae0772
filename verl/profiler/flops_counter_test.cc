#include "verl/profiler/flops_counter.h"

#include "gtest/gtest.h"

namespace verl::profiler {
namespace {

// Qwen2.5-7B (verl's tests/utils/test_flops_counter.py config).
FlopsModelDims Qwen25_7B() {
  FlopsModelDims d;
  d.vocab_size = 152064;
  d.hidden_size = 3584;
  d.intermediate_size = 18944;
  d.num_hidden_layers = 28;
  d.num_attention_heads = 28;
  d.num_key_value_heads = 4;
  d.head_dim = 128;
  return d;
}

TEST(FlopsCounterTest, DenseMatchesHandCount) {
  const FlopsModelDims d = Qwen25_7B();
  // N_dense = 28*(3*3584*18944 + 3584*(3584+512+512+3584)) + 2*152064*3584.
  const double n_dense =
      28.0 * (3.0 * 3584 * 18944 + 3584.0 * (3584 + 512 + 512 + 3584)) +
      2.0 * 152064 * 3584;
  EXPECT_NEAR(n_dense, 7.615e9, 0.001e9);  // ANCHORS.md: N_dense = 7.615e9
  const std::vector<int64_t> lens = {4096};
  const double expected =
      6 * n_dense * 4096 + 6.0 * 4096 * 4096 * 128 * 28 * 28;
  EXPECT_DOUBLE_EQ(TrainingFlops(d, lens), expected);
  // ANCHORS.md: one 4K-context update token costs 6N + attn = 48.2 GFLOP.
  EXPECT_NEAR(TrainingFlops(d, lens) / 4096 / 1e9, 48.2, 0.1);
  EXPECT_DOUBLE_EQ(ForwardFlops(d, lens) * 3, TrainingFlops(d, lens));
}

TEST(FlopsCounterTest, AttentionTermUsesSquaredLengths) {
  FlopsModelDims d = Qwen25_7B();
  const double two_short = TrainingFlops(d, {1024, 1024});
  const double one_long = TrainingFlops(d, {2048});
  // Same tokens, attention sum(L^2) halves: difference = 6*(2048^2 -
  // 2*1024^2)*hd*nh*L.
  EXPECT_DOUBLE_EQ(one_long - two_short,
                   6.0 * (2048.0 * 2048 - 2.0 * 1024 * 1024) * 128 * 28 * 28);
}

TEST(FlopsCounterTest, MoeCountsActiveExpertsOnly) {
  FlopsModelDims d;
  d.vocab_size = 100;
  d.hidden_size = 8;
  d.num_hidden_layers = 2;
  d.num_attention_heads = 2;
  d.num_key_value_heads = 1;
  d.head_dim = 4;
  d.num_experts = 4;
  d.num_experts_per_tok = 2;
  d.moe_intermediate_size = 6;
  d.shared_expert_intermediate_size = 10;
  d.moe_layers = 2;
  const double attn_linear = 8.0 * (8 + 4 + 4 + 8);
  const double moe = 3.0 * 8 * 2 * 6 + 3.0 * 8 * 10 + 8 * 4;
  const double n = 2 * (attn_linear + moe) + 2.0 * 100 * 8;
  EXPECT_DOUBLE_EQ(TrainingFlops(d, {3}), 6 * n * 3 + 6.0 * 9 * 4 * 2 * 2);
}

TEST(FlopsCounterTest, PeakTableAndMfu) {
  EXPECT_DOUBLE_EQ(PromisedFlops("NVIDIA H100 80GB HBM3"), 989e12);
  EXPECT_DOUBLE_EQ(PromisedFlops("NVIDIA L40S"), 362.05e12);
  EXPECT_DOUBLE_EQ(PromisedFlops("NVIDIA GB200"), 2.5e15);
  EXPECT_DOUBLE_EQ(PromisedFlops("CPU"), 448e9);
  EXPECT_DOUBLE_EQ(PromisedFlops("mystery"), 0);
  // A known matmul workload: 2*M*N*K flops in 0.5 s on 2 devices of 1e12.
  const double flops = 2.0 * 1024 * 1024 * 1024;
  EXPECT_DOUBLE_EQ(Mfu(flops, 0.5, 1e12, 2), flops / 0.5 / 2e12);
  EXPECT_EQ(Mfu(flops, 0, 1e12, 1), 0);
  EXPECT_EQ(Mfu(flops, 1, 0, 1), 0);
}

}  // namespace
}  // namespace verl::profiler
