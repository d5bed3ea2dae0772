// File: verl/models/megatron/megatron_options_test.cc
//
// verl's megatron.* keys -> parallel sizes and model options, and the one-
// line errors for keys this backend does not serve yet.
#include "verl/models/megatron/megatron_options.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::models {
namespace {

using core::testing::StatusIs;
using parallel::megatron::MegatronConfig;

constexpr char kPrefix[] = "actor_rollout_ref.actor.megatron";

// The defaults (verl's, with float32 parameters) are served.
MegatronConfig Served() { return MegatronConfig(); }

TEST(MegatronOptionsTest, ServedKeysMap) {
  absl::StatusOr<MegatronSettings> s =
      MegatronSettingsFromConfig(Served(), kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.tp, 1);
  EXPECT_TRUE(s->model.sequence_parallel);  // verl's default
  EXPECT_EQ(s->model.recompute_granularity, "");
  EXPECT_EQ(s->model.recompute_modules, std::vector<std::string>{"core_attn"});
  EXPECT_EQ(s->model.make_vocab_size_divisible_by, 128);
  EXPECT_EQ(s->seed, 42);
  EXPECT_EQ(s->dtype, "float32");
  EXPECT_TRUE(s->distributed_optimizer);  // verl's default

  MegatronConfig c = Served();
  c.set_tensor_model_parallel_size(4);
  c.set_context_parallel_size(2);
  c.set_pipeline_model_parallel_size(2);
  c.set_expert_tensor_parallel_size(4);
  c.set_sequence_parallel(false);
  c.set_seed(7);
  c.set_dtype("bfloat16");
  c.set_param_offload(true);
  c.set_grad_offload(true);
  c.set_optimizer_offload(true);
  auto* o = c.mutable_override_transformer_config();
  o->set_recompute_granularity("full");
  o->set_recompute_method("block");
  o->set_recompute_num_layers(2);
  o->set_num_layers_in_last_pipeline_stage(3);
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.tp, 4);
  EXPECT_EQ(s->sizes.cp, 2);
  EXPECT_EQ(s->sizes.pp, 2);
  EXPECT_EQ(s->model.num_layers_in_first_pipeline_stage, -1);
  EXPECT_EQ(s->model.num_layers_in_last_pipeline_stage, 3);
  EXPECT_EQ(s->sizes.etp, 4);
  EXPECT_EQ(s->dtype, "bfloat16");
  EXPECT_TRUE(s->param_offload && s->grad_offload && s->optimizer_offload);
  c.set_expert_model_parallel_size(2);
  c.set_expert_tensor_parallel_size(1);
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.ep, 2);
  EXPECT_EQ(s->sizes.etp, 1);
  c.set_expert_tensor_parallel_size(2);  // expert tp other than 1 or tp
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.etp, 2);
  EXPECT_EQ(s->sizes.vpp, 0);
  c.set_virtual_pipeline_model_parallel_size(2);  // pp 2: served
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->sizes.vpp, 2);
  EXPECT_FALSE(s->model.sequence_parallel);
  EXPECT_EQ(s->model.recompute_granularity, "full");
  EXPECT_EQ(s->model.recompute_method, "block");
  EXPECT_EQ(s->model.recompute_num_layers, 2);
  EXPECT_EQ(s->seed, 7);

  o->Clear();
  o->set_recompute_granularity("selective");
  o->add_recompute_modules("mlp");
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.recompute_modules, std::vector<std::string>{"mlp"});
  // MoE keys: null capacity (no dropping) and no bias update by default.
  EXPECT_FALSE(s->model.moe_expert_capacity_factor.has_value());
  EXPECT_EQ(s->model.moe_token_drop_policy, "probs");
  EXPECT_FALSE(s->model.moe_router_enable_expert_bias);
  EXPECT_EQ(s->model.moe_router_bias_update_rate, 1e-3);
  o->set_moe_expert_capacity_factor(1.25);
  o->set_moe_token_drop_policy("position");
  o->set_moe_router_enable_expert_bias(true);
  o->set_moe_router_bias_update_rate(0.01);
  s = MegatronSettingsFromConfig(c, kPrefix);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->model.moe_expert_capacity_factor, 1.25);
  EXPECT_EQ(s->model.moe_token_drop_policy, "position");
  EXPECT_TRUE(s->model.moe_router_enable_expert_bias);
  EXPECT_EQ(s->model.moe_router_bias_update_rate, 0.01);
}

TEST(MegatronOptionsTest, UnservedKeysFailNamingTheKey) {
  struct Row {
    void (*set)(MegatronConfig*);
    absl::StatusCode code;
    const char* message;
  };
  const Row rows[] = {
      {[](MegatronConfig* c) {
         c->mutable_override_transformer_config()
             ->set_num_layers_in_first_pipeline_stage(1);
       },
       absl::StatusCode::kInvalidArgument,
       "actor_rollout_ref.actor.megatron.override_transformer_config.num_"
       "layers_in_first_pipeline_stage=1: needs pipeline_model_parallel_size "
       "> 1"},
      {[](MegatronConfig* c) {
         c->set_virtual_pipeline_model_parallel_size(2);
       },
       absl::StatusCode::kInvalidArgument,
       "actor_rollout_ref.actor.megatron.virtual_pipeline_model_parallel_size"
       "=2: must be >= 1, and > 1 only with pipeline_model_parallel_size > 1"},
      {[](MegatronConfig* c) { c->set_context_parallel_size(0); },
       absl::StatusCode::kInvalidArgument,
       "megatron.context_parallel_size=0: must be >= 1"},
      {[](MegatronConfig* c) { c->set_expert_model_parallel_size(0); },
       absl::StatusCode::kInvalidArgument,
       "megatron.expert_model_parallel_size=0: must be >= 1"},
      {[](MegatronConfig* c) { c->set_expert_tensor_parallel_size(0); },
       absl::StatusCode::kInvalidArgument,
       "actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=0: must "
       "be >= 1"},
      {[](MegatronConfig* c) { c->set_use_dist_checkpointing(true); },
       absl::StatusCode::kUnimplemented, "use_dist_checkpointing=true"},
      {[](MegatronConfig* c) {
         (*c->mutable_override_ddp_config())["grad_reduce_in_fp32"] = "true";
       },
       absl::StatusCode::kUnimplemented, "override_ddp_config"},
      {[](MegatronConfig* c) { c->set_tensor_model_parallel_size(0); },
       absl::StatusCode::kInvalidArgument,
       "megatron.tensor_model_parallel_size=0: must be >= 1"},
      {[](MegatronConfig* c) { c->set_dtype("float16"); },
       absl::StatusCode::kUnimplemented,
       "megatron.dtype=float16: fp16 training (it needs Megatron's dynamic "
       "loss scaling"},
      {[](MegatronConfig* c) { c->set_dtype("fp8"); },
       absl::StatusCode::kInvalidArgument, "megatron.dtype='fp8'"},
      {[](MegatronConfig* c) {
         c->mutable_override_transformer_config()->set_recompute_granularity(
             "full");  // Megatron needs a method with full recompute
       },
       absl::StatusCode::kInvalidArgument,
       "actor_rollout_ref.actor.megatron.override_transformer_config."
       "recompute_method=''"},
      {[](MegatronConfig* c) {
         auto* o = c->mutable_override_transformer_config();
         o->set_recompute_granularity("selective");
         o->add_recompute_modules("moe_act");
       },
       absl::StatusCode::kUnimplemented, "recompute_modules: 'moe_act'"},
      {[](MegatronConfig* c) {
         c->mutable_override_transformer_config()
             ->set_moe_pad_expert_input_to_capacity(true);
       },
       absl::StatusCode::kUnimplemented,
       "actor_rollout_ref.actor.megatron.override_transformer_config.moe_pad_"
       "expert_input_to_capacity=true: padding each expert's input"},
  };
  for (const Row& row : rows) {
    MegatronConfig c = Served();
    row.set(&c);
    EXPECT_THAT(MegatronSettingsFromConfig(c, kPrefix),
                StatusIs(row.code, row.message));
  }
}

}  // namespace
}  // namespace verl::models
