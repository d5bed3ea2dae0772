// File: verl/models/megatron/megatron_gpt_test.cc
//
// The tensor-parallel decoder against the single-process one: runs
// :megatron_gpt_worker as tp = 2 and tp = 4 processes over loopback (and
// context parallel: cp = 2, tp = 2 x cp = 2), each
// with a few cases (Qwen2 q/k/v bias, Qwen3 q/k norm, Llama; KV heads
// >= tp and < tp; sequence parallel on/off; no, full (uniform/block) and
// selective recompute; tied embeddings; value heads). The worker checks
// logits, log-probs, entropy (values for the critic cases) and every
// parameter gradient to 1e-5 relative and
// exits non-zero on a mismatch. Option validation is checked in-process.
#include "verl/models/megatron/megatron_gpt.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/parallel/test_worker.h"

namespace verl::models {
namespace {

using core::testing::StatusIs;

int RunWorker(int nproc, const std::vector<std::string>& args) {
  return parallel::RunTestWorker("verl/models/megatron/megatron_gpt_worker",
                                 nproc, args);
}

TEST(MegatronGptTest, Tp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--cases=qwen2,qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,qwen2_value_sp_selective"}),
            0);
}

TEST(MegatronGptTest, Tp4WithFewerKvHeadsMatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--cases=qwen2_kv2_sp_core_attn,"
                          "qwen3_kv4_full_block_tied,qwen3_kv1_sp_full,"
                          "llama_kv2_value_full"}),
            0);
}

// Context parallelism: every sequence of the packed batch (lengths 5, 7, 5)
// split over cp ranks in the load-balanced order, attention over the ring;
// logits, log-probs, entropy, values and every gradient equal cp = 1.
TEST(MegatronGptTest, Cp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(2, {"--cp=2",
                          "--cases=qwen2,qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,llama_kv2_value_full"}),
            0);
}

TEST(MegatronGptTest, Tp2Cp2MatchesSingleProcess) {
  EXPECT_EQ(RunWorker(4, {"--cp=2",
                          "--cases=qwen2,qwen3_sp_full_uniform_tied,"
                          "llama_kv1_sp_selective,"
                          "qwen2_value_sp_selective"}),
            0);
}

parallel::megatron::ModelParallelSizes Tp(int tp, int pp = 1, int cp = 1) {
  parallel::megatron::ModelParallelSizes sizes;
  sizes.tp = tp;
  sizes.pp = pp;
  sizes.cp = cp;
  return sizes;
}

ModelConfig Config() {
  ModelConfig c;
  c.vocab_size = 10;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  return c;
}

TEST(MegatronGptTest, ValidationNamesTheKey) {
  MegatronModelOptions o;
  EXPECT_TRUE(ValidateMegatronModel(Config(), o, Tp(4)).ok());
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(3)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.tensor_model_parallel_size=3: does not "
                       "divide num_attention_heads 4"));
  ModelConfig c = Config();
  c.num_attention_heads = 12;  // 6 KV groups over tp 4
  c.num_key_value_heads = 6;
  EXPECT_THAT(
      ValidateMegatronModel(c, o, Tp(4)),
      StatusIs(absl::StatusCode::kInvalidArgument, "num_key_value_heads 6"));
  c = Config();
  c.intermediate_size = 22;
  EXPECT_THAT(
      ValidateMegatronModel(c, o, Tp(4)),
      StatusIs(absl::StatusCode::kInvalidArgument, "intermediate_size"));
  c = Config();
  c.num_experts = 4;
  EXPECT_THAT(ValidateMegatronModel(c, o, Tp(2)),
              StatusIs(absl::StatusCode::kUnimplemented, "MoE"));
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2, 2)),
              StatusIs(absl::StatusCode::kUnimplemented,
                       "megatron.pipeline_model_parallel_size=2"));
  EXPECT_TRUE(ValidateMegatronModel(Config(), o, Tp(2, 1, 2)).ok());
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2, 1, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "megatron.context_parallel_size=0"));
  o.recompute_granularity = "partial";
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "override_transformer_config.recompute_granularity"));
  o.recompute_granularity = "selective";
  o.recompute_modules = {"moe_act"};
  EXPECT_THAT(ValidateMegatronModel(Config(), o, Tp(2)),
              StatusIs(absl::StatusCode::kUnimplemented, "moe_act"));
}

// tp = 4 over 4 heads and 2 KV groups: one query head per rank, each pair
// of ranks shares a group (Megatron's ng < tp layout).
TEST(MegatronGptTest, HeadLayout) {
  TpHeadLayout h = MakeTpHeadLayout(Config(), 4);
  EXPECT_EQ(h.heads_per_rank, 1);
  EXPECT_TRUE(h.gather_groups);
  EXPECT_EQ(h.groups_per_rank, 1);
  // head_dim 4: 2 groups x (2 q + k + v) x 4 / 4 ranks.
  EXPECT_EQ(h.fused_per_rank, 8);
  h = MakeTpHeadLayout(Config(), 2);
  EXPECT_FALSE(h.gather_groups);
  EXPECT_EQ(h.groups_per_rank, 1);
  EXPECT_EQ(h.heads_per_rank, 2);
}

}  // namespace
}  // namespace verl::models
