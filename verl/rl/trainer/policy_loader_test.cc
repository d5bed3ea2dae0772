// Tests of the PPO trainer's policy loading: tokenizer choice, preset and HF
// folder policies (weights and stop ids), clones, the train-state choice, and
// the errors a wrong path or preset gives.
#include "verl/rl/trainer/policy_loader.h"

#include <ATen/ops/abs.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/zeros_like.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/megatron/moe_layer.h"
#include "verl/models/moe/router.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/parallel/megatron/megatron_config.pb.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/workers/fsdp_train_state.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;
using ::testing::Contains;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::map<std::string, at::Tensor> Params(const models::CausalLM& model) {
  std::map<std::string, at::Tensor> out;
  for (const auto& item : model.named_parameters())
    out[item.key()] = item.value();
  return out;
}

models::ModelSettings Preset(const std::string& name) {
  models::ModelSettings m;
  m.set_preset(name);
  return m;
}

TEST(LoadTokenizerTest, NoPathIsTheBuiltinTokenizer) {
  auto tok = LoadTokenizer(models::ModelSettings());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const models::Tokenizer builtin = models::MakeBuiltinTokenizer();
  EXPECT_EQ(tok->vocab_size(), builtin.vocab_size());
  EXPECT_EQ(tok->eos_token_id(), builtin.eos_token_id());
  EXPECT_EQ(tok->Encode("hello world"), builtin.Encode("hello world"));
}

TEST(LoadTokenizerTest, TokenizerPathWinsOverModelPath) {
  const std::string dir = TempDir("tok");
  ASSERT_TRUE(models::MakeBuiltinTokenizer().SaveToDirectory(dir).ok());
  models::ModelSettings m;
  m.set_path("/nonexistent/model");
  m.set_tokenizer_path(dir);
  auto tok = LoadTokenizer(m);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), models::MakeBuiltinTokenizer().vocab_size());
}

TEST(LoadTokenizerTest, MissingFolderNamesThePath) {
  models::ModelSettings m;
  m.set_path("/nonexistent/model_dir");
  EXPECT_THAT(LoadTokenizer(m),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/model_dir"));
}

TEST(LoadPolicyTest, PresetSizedToTheTokenizerWithItsStopIds) {
  const models::Tokenizer tok = models::MakeBuiltinTokenizer();
  auto p = LoadPolicy(Preset("tiny-qwen2"), tok, /*seed=*/1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config.vocab_size, tok.vocab_size());
  EXPECT_THAT(p->config.eos_token_ids, Contains(tok.eos_token_id()));
  EXPECT_EQ(p->config.pad_token_id, tok.pad_token_id());
  EXPECT_TRUE(p->hf_dir.empty());
  // The model holds the same config (it was rebuilt with the stop ids).
  EXPECT_EQ(p->model->config().eos_token_ids, p->config.eos_token_ids);
  EXPECT_EQ(p->model->config().pad_token_id, p->config.pad_token_id);

  // Same seed, same weights; another seed, other weights.
  auto again = LoadPolicy(Preset("tiny-qwen2"), tok, 1);
  auto other = LoadPolicy(Preset("tiny-qwen2"), tok, 2);
  ASSERT_TRUE(again.ok() && other.ok());
  const auto a = Params(*p->model), b = Params(*again->model),
             c = Params(*other->model);
  ASSERT_EQ(a.size(), b.size());
  bool any_differs = false;
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(at::equal(t, b.at(name))) << name;
    any_differs |= !at::equal(t, c.at(name));
  }
  EXPECT_TRUE(any_differs);
}

TEST(LoadPolicyTest, UnknownPresetIsInvalidArgument) {
  EXPECT_THAT(
      LoadPolicy(Preset("no-such-preset"), models::MakeBuiltinTokenizer(), 1),
      StatusIs(absl::StatusCode::kInvalidArgument, "no-such-preset"));
}

TEST(LoadPolicyTest, HfFolderWeightsAndGenerationEosIds) {
  const models::Tokenizer tok = models::MakeBuiltinTokenizer();
  auto src = LoadPolicy(Preset("tiny-qwen2"), tok, /*seed=*/7);
  ASSERT_TRUE(src.ok()) << src.status();
  models::HfCheckpoint ckpt;
  ckpt.config = src->config;
  ckpt.config.eos_token_ids.clear();
  ckpt.tensors = Params(*src->model);
  models::GenerationConfig gen;
  gen.eos_token_ids = {3, 5};
  ckpt.generation = gen;
  const std::string dir = TempDir("hf") + "/model";
  ASSERT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());

  models::ModelSettings m;
  m.set_path(dir);
  auto p = LoadPolicy(m, tok, /*seed=*/99);  // the seed must not matter
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->hf_dir, dir);
  EXPECT_THAT(p->config.eos_token_ids, Contains(3));
  EXPECT_THAT(p->config.eos_token_ids, Contains(5));
  EXPECT_THAT(p->config.eos_token_ids, Contains(tok.eos_token_id()));
  const auto want = Params(*src->model), got = Params(*p->model);
  ASSERT_EQ(want.size(), got.size());
  for (const auto& [name, t] : want) {
    ASSERT_TRUE(got.count(name)) << name;
    EXPECT_TRUE(at::equal(t, got.at(name))) << name;
  }
}

// model.override_config (verl's update_model_config before the model is
// built): fewer layers load the checkpoint's first layers (the rest is left
// out, as transformers does); rope_theta reaches the config; keys that
// would change weight shapes are refused naming the key.
TEST(LoadPolicyTest, OverrideConfigIsAppliedBeforeTheModelIsBuilt) {
  const models::Tokenizer tok = models::MakeBuiltinTokenizer();
  auto src = LoadPolicy(Preset("tiny-qwen2"), tok, /*seed=*/7);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_GT(src->config.num_hidden_layers, 1);
  models::HfCheckpoint ckpt;
  ckpt.config = src->config;
  ckpt.tensors = Params(*src->model);
  const std::string dir = TempDir("hf_override") + "/model";
  ASSERT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());

  models::ModelSettings m;
  m.set_path(dir);
  (*m.mutable_override_config())["num_hidden_layers"] = "1";
  (*m.mutable_override_config())["rope_theta"] = "5e5";
  (*m.mutable_override_config())["attn_implementation"] = "eager";
  auto p = LoadPolicy(m, tok, /*seed=*/99);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->config.num_hidden_layers, 1);
  EXPECT_EQ(p->model->config().num_hidden_layers, 1);
  EXPECT_EQ(p->config.rope_theta, 5e5);
  const auto want = Params(*src->model), got = Params(*p->model);
  EXPECT_LT(got.size(), want.size());
  for (const auto& [name, t] : got) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(at::equal(t, want.at(name))) << name;
  }
  // The preset path too.
  models::ModelSettings preset = Preset("tiny-qwen2");
  (*preset.mutable_override_config())["num_hidden_layers"] = "1";
  auto small = LoadPolicy(preset, tok, 1);
  ASSERT_TRUE(small.ok()) << small.status();
  EXPECT_EQ(small->model->config().num_hidden_layers, 1);

  (*m.mutable_override_config())["hidden_size"] = "32";
  EXPECT_THAT(LoadPolicy(m, tok, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "'actor_rollout_ref.model.override_config.hidden_size' "
                       "is not applied here"));
}

TEST(LoadPolicyTest, MissingModelFolderNamesThePath) {
  models::ModelSettings m;
  m.set_path("/nonexistent/policy_dir");
  EXPECT_THAT(LoadPolicy(m, models::MakeBuiltinTokenizer(), 1),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/policy_dir"));
}

TEST(LoadPolicyTest, FolderWithoutWeightsNamesTheFolder) {
  const models::Tokenizer tok = models::MakeBuiltinTokenizer();
  auto src = LoadPolicy(Preset("tiny-qwen2"), tok, 1);
  ASSERT_TRUE(src.ok());
  models::HfCheckpoint ckpt;
  ckpt.config = src->config;
  ckpt.tensors = Params(*src->model);
  const std::string dir = TempDir("noweights") + "/model";
  ASSERT_TRUE(models::SaveHfCheckpoint(dir, ckpt).ok());
  std::filesystem::remove(dir + "/model.safetensors");
  models::ModelSettings m;
  m.set_path(dir);
  auto p = LoadPolicy(m, tok, 1);
  ASSERT_THAT(p,
              StatusIs(absl::StatusCode::kNotFound,
                       "no model.safetensors or model.safetensors.index.json"));
  EXPECT_THAT(p.status().message(), HasSubstr(dir));
}

TEST(CloneModelTest, SameWeightsOwnStorage) {
  auto p = LoadPolicy(Preset("tiny-qwen2"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok());
  auto clone = CloneModel(*p->model, /*value_head=*/false, /*seed=*/4);
  const auto a = Params(*p->model), b = Params(*clone);
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    EXPECT_TRUE(at::equal(t, b.at(name))) << name;
    EXPECT_NE(t.data_ptr(), b.at(name).data_ptr()) << name;
  }
  EXPECT_FALSE(clone->config().is_value_model);
}

TEST(CloneModelTest, ValueHeadReplacesTheLmHead) {
  auto p = LoadPolicy(Preset("tiny-qwen2"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok());
  auto critic = CloneModel(*p->model, /*value_head=*/true, /*seed=*/4);
  EXPECT_TRUE(critic->config().is_value_model);
  const auto a = Params(*p->model), b = Params(*critic);
  EXPECT_FALSE(b.count("lm_head.weight"));
  int shared = 0;
  for (const auto& [name, t] : b) {
    if (!a.count(name)) continue;  // the value head
    EXPECT_TRUE(at::equal(t, a.at(name))) << name;
    ++shared;
  }
  EXPECT_GT(shared, 0);
  EXPECT_LT(shared, static_cast<int>(b.size()));  // there is a head of its own
}

TEST(MakeTrainStateTest, OneRankIsReplicatedEvenForFsdp) {
  auto p = LoadPolicy(Preset("tiny-qwen2"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok());
  for (Strategy::Value s : {Strategy::fsdp, Strategy::fsdp2}) {
    auto state =
        MakeTrainState(*p->model, s, parallel::FsdpConfig(), OptimizerOptions(),
                       parallel::SingleProcessCommunicator());
    ASSERT_TRUE(state.ok()) << state.status();
    EXPECT_NE(dynamic_cast<ReplicatedTrainState*>(state->get()), nullptr);
    EXPECT_EQ(dynamic_cast<FsdpTrainState*>(state->get()), nullptr);
  }
}

// The Megatron parallel state of one process (every group the process).
absl::StatusOr<std::shared_ptr<parallel::megatron::ParallelState>>
OneProcessMpu() {
  parallel::megatron::ModelParallelSizes sizes;
  sizes.etp = 1;
  return parallel::megatron::ParallelState::Initialize(
      parallel::SingleProcessCommunicator(), sizes);
}

// A user's override_transformer_config MoE keys reach the Megatron model
// (its options and every MoE layer); the expert bias on a softmax-router
// model is refused naming the key.
TEST(MakeMegatronModelTest, MoeKeysReachTheModel) {
  auto p =
      LoadPolicy(Preset("tiny-qwen3-moe"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok()) << p.status();
  auto mpu = OneProcessMpu();
  ASSERT_TRUE(mpu.ok()) << mpu.status();
  parallel::megatron::MegatronConfig config;
  auto* o = config.mutable_override_transformer_config();
  o->set_moe_expert_capacity_factor(1.25);
  o->set_moe_token_drop_policy("position");
  auto model = MakeMegatronModel(*p->model, config,
                                 "actor_rollout_ref.actor.megatron", *mpu);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->options().moe_expert_capacity_factor, 1.25);
  int moe_layers = 0;
  for (const auto& layer : (*model)->layers) {
    if (!layer->moe) continue;
    ++moe_layers;
    EXPECT_EQ(layer->moe->capacity_factor, 1.25);
    EXPECT_EQ(layer->moe->drop_policy, models::TokenDropPolicy::kPosition);
  }
  EXPECT_GT(moe_layers, 0);
  o->set_moe_router_enable_expert_bias(true);
  EXPECT_THAT(MakeMegatronModel(*p->model, config,
                                "actor_rollout_ref.actor.megatron", *mpu)
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "moe_router_enable_expert_bias=true"));
}

// A sigmoid-router MoE model (DeepSeek-V3's router on standard attention)
// under megatron.dtype bfloat16 with the expert-bias update: the weights
// are bf16, the router's expert_bias stays fp32 (as Megatron's buffer), and
// one training forward-backward + FinalizeGrads moves every bias by exactly
// +-rate or 0 (1e-3 steps would vanish in bf16 around the bias values).
TEST(MakeMegatronModelTest, ExpertBiasStaysFp32UnderBf16) {
  auto p =
      LoadPolicy(Preset("tiny-qwen3-moe"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok()) << p.status();
  models::ModelConfig c = p->model->config();
  c.model_type = "deepseek_v3";
  c.architecture = "DeepseekV3ForCausalLM";
  c.scoring_func = "sigmoid";
  c.n_group = 4;
  c.topk_group = 2;
  c.routed_scaling_factor = 2.5;
  std::shared_ptr<models::CausalLM> source = models::CreateModel(c, 5, 0.1);
  {
    at::NoGradGuard no_grad;  // biases away from zero: bf16 would lose 1e-3
    for (const auto& item : source->named_parameters()) {
      if (absl::EndsWith(item.key(), "e_score_correction_bias")) {
        item.value().fill_(3.0);
      }
    }
  }
  auto mpu = OneProcessMpu();
  ASSERT_TRUE(mpu.ok()) << mpu.status();
  parallel::megatron::MegatronConfig config;
  config.set_dtype("bfloat16");
  config.mutable_override_transformer_config()
      ->set_moe_router_enable_expert_bias(true);
  auto model = MakeMegatronModel(*source, config,
                                 "actor_rollout_ref.actor.megatron", *mpu);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto& moe = (*model)->layers.at(0)->moe;
  ASSERT_NE(moe, nullptr);
  EXPECT_EQ(moe->router->weight.scalar_type(), at::kBFloat16);
  EXPECT_EQ(moe->router->expert_bias.scalar_type(), at::kFloat);
  const at::Tensor ids = at::arange(24, at::kLong) % c.vocab_size;
  const at::Tensor pos = at::arange(24, at::kLong);
  (*model)->Forward(ids, pos, {0, 24}).to(at::kFloat).sum().backward();
  (*model)->FinalizeGrads();
  at::Tensor moved = (moe->router->expert_bias - 3.0).abs();
  EXPECT_GT(moved.max().item<double>(), 0.0);
  EXPECT_TRUE(
      at::allclose(moved * (moved - 1e-3), at::zeros_like(moved), 0.0, 1e-9))
      << moved;
}

// The tiny DeepSeek-V3 preset (multi-head latent attention with q
// compression and YaRN, a dense first layer, sigmoid-routed experts with a
// shared expert) through the trainer's Megatron builder, with the expert
// bias on: the Megatron model on one process gives the HF model's logits.
TEST(MakeMegatronModelTest, DeepSeekV3PresetMatchesTheHfModel) {
  auto p =
      LoadPolicy(Preset("tiny-deepseek-v3"), models::MakeBuiltinTokenizer(), 3);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_TRUE(p->model->config().IsMla());
  auto mpu = OneProcessMpu();
  ASSERT_TRUE(mpu.ok()) << mpu.status();
  parallel::megatron::MegatronConfig config;
  config.mutable_override_transformer_config()
      ->set_moe_router_enable_expert_bias(true);
  auto model = MakeMegatronModel(*p->model, config,
                                 "actor_rollout_ref.actor.megatron", *mpu);
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_NE((*model)->layers.at(0)->mla_attention, nullptr);
  const std::vector<int64_t> cu = {0, 9, 20};
  const at::Tensor ids = at::arange(20, at::kLong) * 7 % 97;
  const at::Tensor pos =
      at::cat({at::arange(9, at::kLong), at::arange(11, at::kLong)});
  at::NoGradGuard no_grad;
  const at::Tensor want = p->model->ForwardPacked(ids, pos, cu).logits;
  const at::Tensor got = (*model)
                             ->Forward(ids, pos, cu)
                             .narrow(-1, 0, p->model->config().vocab_size);
  EXPECT_LE((got - want).abs().max().item<double>(),
            1e-5 * want.abs().max().item<double>());
}

}  // namespace
}  // namespace verl::rl
