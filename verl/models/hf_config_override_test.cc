// File: verl/models/hf_config_override_test.cc
//
// verl's model.override_config applied to the HF config: served keys change
// the built config (nested and Megatron-form keys too), no-effect keys
// change nothing, anything else is refused naming the key.
#include "verl/models/hf_config_override.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

constexpr char kKey[] = "actor_rollout_ref.model.override_config";

ModelConfig Base() {
  absl::StatusOr<ModelConfig> c = MakePreset("tiny-qwen2");
  EXPECT_TRUE(c.ok());
  return *c;
}

TEST(HfConfigOverrideTest, AppliesServedKeys) {
  const ModelConfig base = Base();
  ASSERT_GT(base.num_hidden_layers, 1);
  absl::StatusOr<ModelConfig> c = ApplyHfConfigOverrides(
      base,
      {{"num_hidden_layers", "1"},
       {"model_config.max_position_embeddings", "4096"},
       {"rope_theta", "5e5"},
       {"rope_scaling.rope_type", "llama3"},
       {"rope_scaling.factor", "2.0"},
       {"rope_scaling.original_max_position_embeddings", "1024"},
       {"rope_scaling.low_freq_factor", "1.0"},
       {"rope_scaling.high_freq_factor", "4.0"},
       {"rms_norm_eps", "1e-5"},
       {"attn_implementation", "eager"},
       {"attention_dropout", "0."}},
      kKey);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 1);
  EXPECT_EQ(c->max_position_embeddings, 4096);
  EXPECT_EQ(c->rope_theta, 5e5);
  EXPECT_EQ(c->rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c->rope_scaling.factor, 2.0);
  EXPECT_EQ(c->rope_scaling.original_max_position_embeddings, 1024);
  EXPECT_EQ(c->rms_norm_eps, 1e-5);
  // Untouched fields keep the base's values.
  EXPECT_EQ(c->hidden_size, base.hidden_size);
  EXPECT_EQ(c->vocab_size, base.vocab_size);
  // Nothing to apply: the base unchanged.
  absl::StatusOr<ModelConfig> same = ApplyHfConfigOverrides(
      base, {{"attn_implementation", "flash_attention_2"}}, kKey);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->num_hidden_layers, base.num_hidden_layers);
  EXPECT_EQ(same->rope_theta, base.rope_theta);
}

TEST(HfConfigOverrideTest, RefusesWhatIsNotApplied) {
  const ModelConfig base = Base();
  EXPECT_THAT(ApplyHfConfigOverrides(base, {{"hidden_size", "64"}}, kKey),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'actor_rollout_ref.model.override_config.hidden_size' "
                       "is not applied here"));
  EXPECT_THAT(
      ApplyHfConfigOverrides(base, {{"attention_dropout", "0.1"}}, kKey),
      StatusIs(absl::StatusCode::kInvalidArgument, "have no dropout"));
  EXPECT_THAT(
      ApplyHfConfigOverrides(
          base,
          {{"num_hidden_layers", std::to_string(base.num_hidden_layers + 1)}},
          kKey),
      StatusIs(absl::StatusCode::kInvalidArgument, "more than the model's"));
  EXPECT_TRUE(ApplyHfConfigOverrides(
                  base, {{"moe_config.freeze_moe_router", "True"}}, kKey)
                  .ok());
  EXPECT_TRUE(
      FreezeMoeRouterOverride({{"moe_config.freeze_moe_router", "True"}}));
  EXPECT_FALSE(
      FreezeMoeRouterOverride({{"moe_config.freeze_moe_router", "False"}}));
  EXPECT_FALSE(FreezeMoeRouterOverride({}));
  EXPECT_THAT(ApplyHfConfigOverrides(
                  base, {{"moe_config.freeze_moe_router", "maybe"}}, kKey),
              StatusIs(absl::StatusCode::kInvalidArgument, "True or False"));
  EXPECT_THAT(ApplyHfConfigOverrides(base, {{"rope_theta", "abc"}}, kKey),
              StatusIs(absl::StatusCode::kInvalidArgument, "rope_theta"));
}

}  // namespace
}  // namespace verl::models
