// File: verl/infer/rollout_options_test.cc
#include "verl/infer/rollout_options.h"

#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::infer {
namespace {

using ::verl::core::testing::StatusIs;

TEST(RolloutOptionsTest, DefaultsMapToVerlDefaults) {
  RolloutConfig c;
  auto o = EngineOptionsFromRolloutConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_DOUBLE_EQ(o->gpu_memory_utilization, 0.5);
  EXPECT_EQ(o->max_num_seqs, 256);
  EXPECT_EQ(o->max_num_batched_tokens, 8192);
  EXPECT_TRUE(o->enable_chunked_prefill);
  EXPECT_TRUE(o->enable_prefix_caching);
  EXPECT_EQ(o->max_model_len, 0);
  EXPECT_EQ(o->block_size, 16);
  EXPECT_EQ(o->dtype, "bfloat16");  // verl's default

  auto train = SamplingParamsFromRolloutConfig(c, false);
  ASSERT_TRUE(train.ok());
  EXPECT_EQ(train->n, 1);
  EXPECT_DOUBLE_EQ(train->temperature, 1.0);
  EXPECT_FALSE(train->greedy());
  auto val = SamplingParamsFromRolloutConfig(c, true);
  ASSERT_TRUE(val.ok());
  EXPECT_TRUE(val->greedy());  // val_kwargs: temperature 0, do_sample false
}

TEST(RolloutOptionsTest, OverridesAndEngineKwargs) {
  RolloutConfig c;
  c.set_n(8);
  c.set_top_p(0.9);
  c.set_top_k(20);
  c.set_response_length(512);
  c.set_max_model_len(2048);
  c.set_enable_prefix_caching(false);
  (*c.mutable_engine_kwargs()->mutable_vllm())["block_size"] = "32";
  (*c.mutable_engine_kwargs()->mutable_vllm())["seed"] = "9";
  auto o = EngineOptionsFromRolloutConfig(c);
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->block_size, 32);
  EXPECT_EQ(o->seed, 9u);
  EXPECT_EQ(o->max_model_len, 2048);
  EXPECT_FALSE(o->enable_prefix_caching);
  auto p = SamplingParamsFromRolloutConfig(c, false);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n, 8);
  EXPECT_EQ(p->top_k, 20);
  EXPECT_DOUBLE_EQ(p->top_p, 0.9);
  EXPECT_EQ(p->max_tokens, 512);
}

TEST(RolloutOptionsTest, ErrorsNameTheKey) {
  RolloutConfig c;
  c.set_scheduling_policy("priority");
  EXPECT_NE(EngineOptionsFromRolloutConfig(c).status().message().find(
                "rollout.scheduling_policy"),
            std::string::npos);
  c = RolloutConfig();
  c.set_gpu_memory_utilization(1.5);
  EXPECT_NE(EngineOptionsFromRolloutConfig(c).status().message().find(
                "gpu_memory_utilization"),
            std::string::npos);
  c = RolloutConfig();
  (*c.mutable_engine_kwargs()->mutable_vllm())["block_size"] = "x";
  EXPECT_THAT(
      EngineOptionsFromRolloutConfig(c),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "actor_rollout_ref.rollout.engine_kwargs.vllm.block_size"));
  c = RolloutConfig();
  c.set_top_p(0);
  auto p = SamplingParamsFromRolloutConfig(c, false);
  ASSERT_THAT(
      p, StatusIs(absl::StatusCode::kInvalidArgument,
                  "actor_rollout_ref.rollout: top_p must be in (0, 1], got 0"));
  EXPECT_NE(p.status().message().find("top_p"), std::string::npos);
}

TEST(RolloutOptionsTest, DtypeAndRepetitionPenalty) {
  RolloutConfig c;
  c.set_dtype("float32");
  c.set_repetition_penalty(1.2);
  auto o = EngineOptionsFromRolloutConfig(c);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->dtype, "float32");
  auto p = SamplingParamsFromRolloutConfig(c, false);
  ASSERT_TRUE(p.ok());
  EXPECT_DOUBLE_EQ(p->repetition_penalty, 1.2);
  c.set_dtype("float16");
  auto bad = EngineOptionsFromRolloutConfig(c);
  ASSERT_THAT(
      bad,
      StatusIs(absl::StatusCode::kInvalidArgument,
               "actor_rollout_ref.rollout.dtype: 'float16' is not supported"));
  EXPECT_NE(bad.status().message().find("actor_rollout_ref.rollout.dtype"),
            std::string::npos);
  c.set_dtype("float32");
  c.set_repetition_penalty(0.0);
  EXPECT_THAT(
      SamplingParamsFromRolloutConfig(c, false),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "actor_rollout_ref.rollout: repetition_penalty must be > 0"));
}

}  // namespace
}  // namespace verl::infer
