// File: verl/models/lora_test.cc
//
// LoRA on the decoder: B=0 equals base, adapter math against an explicitly
// modified base copy, merged equals unmerged, disabled equals base, frozen
// base, PEFT names and adapter_config.json, save/load round trip.
#include "verl/models/lora.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <string>

#include "nlohmann/json.hpp"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

ModelConfig Tiny(const std::string& name) {
  absl::StatusOr<ModelConfig> c = MakePreset(name);
  CHECK(c.ok()) << c.status();
  c->num_hidden_layers = 2;
  return *c;
}

struct Input {
  at::Tensor ids, pos;
  std::vector<int64_t> cu;
};

Input MakeInput(int64_t vocab) {
  at::manual_seed(3);
  return {at::randint(0, vocab, {12}, at::kLong),
          at::cat({at::arange(5, at::kLong), at::arange(7, at::kLong)}),
          {0, 5, 12}};
}

at::Tensor Logits(CausalLM& m, const Input& in) {
  torch::NoGradGuard ng;
  return m.ForwardPacked(in.ids, in.pos, in.cu).logits;
}

double MaxDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

// Gives every lora_B random values so adapters change the output.
void RandomizeB(CausalLM& m) {
  torch::NoGradGuard ng;
  at::manual_seed(8);
  for (auto& [name, t] : LoraNamedParameters(m)) {
    if (name.find("lora_B") != std::string::npos)
      t.copy_(0.05 * at::randn_like(t));
  }
}

LoraConfig Config(std::vector<std::string> targets, int64_t r = 4,
                  double alpha = 8) {
  LoraConfig c;
  c.rank = r;
  c.alpha = alpha;
  c.target_modules = std::move(targets);
  c.base_model_name_or_path = "tiny-llama3";
  return c;
}

TEST(LoraTest, ZeroBEqualsBaseAndNamesArePeft) {
  ModelConfig c = Tiny("tiny-llama3");
  auto m = CreateModel(c, 1, 0.05);
  Input in = MakeInput(c.vocab_size);
  at::Tensor base = Logits(*m, in);
  ASSERT_TRUE(ApplyLora(*m, Config({"all-linear"}), 42).ok());
  EXPECT_TRUE(at::equal(Logits(*m, in), base));
  // all-linear: 7 projections per layer, not lm_head.
  std::vector<std::string> paths = LoraModulePaths(*m);
  EXPECT_EQ(paths.size(), 14u);
  EXPECT_EQ(std::count(paths.begin(), paths.end(), "lm_head"), 0);
  std::map<std::string, at::Tensor> named;
  for (auto& [n, t] : LoraNamedParameters(*m)) named[n] = t;
  EXPECT_EQ(named.size(), 28u);
  at::Tensor a = named.at(
      "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight");
  at::Tensor b = named.at(
      "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight");
  EXPECT_EQ(a.sizes(), (at::IntArrayRef{4, 128}));
  EXPECT_EQ(b.sizes(), (at::IntArrayRef{128, 4}));
  EXPECT_EQ(b.abs().sum().item<double>(), 0.0);
  // kaiming_uniform(a=sqrt(5)): U(-1/sqrt(in), 1/sqrt(in)), spread over it.
  const double bound = 1.0 / std::sqrt(128.0);
  EXPECT_LE(a.abs().max().item<double>(), bound);
  EXPECT_GT(a.abs().max().item<double>(), 0.9 * bound);
  EXPECT_NEAR(a.std().item<double>(), bound / std::sqrt(3.0), 0.1 * bound);
  // The base HF names are unchanged; adapters sit next to them.
  auto params = m->named_parameters();
  EXPECT_NE(params.find("model.layers.0.self_attn.q_proj.weight"), nullptr);
  EXPECT_NE(params.find("model.layers.0.self_attn.q_proj.lora_A.weight"),
            nullptr);
}

TEST(LoraTest, TargetAndExcludeModules) {
  ModelConfig c = Tiny("tiny-qwen2");
  auto m = CreateModel(c, 1);
  LoraConfig cfg = Config({"q_proj", "v_proj"});
  cfg.exclude_modules = {"model.layers.1.self_attn.v_proj"};
  ASSERT_TRUE(ApplyLora(*m, cfg, 1).ok());
  EXPECT_EQ(LoraModulePaths(*m),
            (std::vector<std::string>{"model.layers.0.self_attn.q_proj",
                                      "model.layers.0.self_attn.v_proj",
                                      "model.layers.1.self_attn.q_proj"}));
  auto fresh = CreateModel(c, 1);
  EXPECT_EQ(ApplyLora(*fresh, Config({"qq_proj"}), 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyLora(*fresh, Config({"q_proj"}, 0), 1).code(),
            absl::StatusCode::kInvalidArgument);
  // MoE all-linear also adapts experts and routers, PEFT-style.
  auto moe = CreateModel(Tiny("tiny-qwen2-moe"), 1);
  ASSERT_TRUE(ApplyLora(*moe, Config({"all-linear"}), 1).ok());
  std::vector<std::string> p = LoraModulePaths(*moe);
  EXPECT_NE(
      std::find(p.begin(), p.end(), "model.layers.0.mlp.experts.2.up_proj"),
      p.end());
  EXPECT_NE(std::find(p.begin(), p.end(), "model.layers.0.mlp.gate"), p.end());
}

TEST(LoraTest, AdapterMathMergeUnmergeDisable) {
  ModelConfig c = Tiny("tiny-qwen2");
  auto m = CreateModel(c, 2, 0.05);
  auto ref = CreateModel(c, 2, 0.05);  // same weights, modified by hand below
  Input in = MakeInput(c.vocab_size);
  at::Tensor base = Logits(*m, in);
  ASSERT_TRUE(ApplyLora(*m, Config({"q_proj", "down_proj"}, 4, 8), 5).ok());
  RandomizeB(*m);
  at::Tensor lora = Logits(*m, in);
  EXPECT_GT(MaxDiff(lora, base), 1e-4);
  // Independent: W' = W + (alpha/r) B A written into the reference model.
  {
    torch::NoGradGuard ng;
    auto ref_params = ref->named_parameters();
    std::map<std::string, at::Tensor> named;
    for (auto& [n, t] : LoraNamedParameters(*m)) named[n] = t;
    for (const std::string& path : LoraModulePaths(*m)) {
      at::Tensor A =
          named.at(std::string(kPeftPrefix) + path + ".lora_A.weight");
      at::Tensor B =
          named.at(std::string(kPeftPrefix) + path + ".lora_B.weight");
      ref_params[path + ".weight"].add_(at::matmul(B, A) * 2.0);
    }
  }
  EXPECT_LT(MaxDiff(lora, Logits(*ref, in)), 1e-5);
  // Disabled adapters == base model (the reference policy).
  {
    ScopedLoraDisabled off(*m);
    EXPECT_TRUE(at::equal(Logits(*m, in), base));
  }
  EXPECT_TRUE(at::equal(Logits(*m, in), lora));
  // Merge / unmerge.
  at::Tensor w0 = m->model->layers[0]->self_attn->q_proj->weight.clone();
  ASSERT_TRUE(MergeLora(*m).ok());
  EXPECT_THAT(
      MergeLora(*m),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               "LoRA adapter of model.layers.0.self_attn.q_proj is already"));
  EXPECT_GT(MaxDiff(m->model->layers[0]->self_attn->q_proj->weight, w0), 1e-4);
  EXPECT_LT(MaxDiff(Logits(*m, in), lora), 1e-5);
  ASSERT_TRUE(UnmergeLora(*m).ok());
  EXPECT_LT(MaxDiff(m->model->layers[0]->self_attn->q_proj->weight, w0), 1e-6);
  EXPECT_LT(MaxDiff(Logits(*m, in), lora), 1e-5);
}

TEST(LoraTest, BaseFrozenOnlyAdaptersTrain) {
  ModelConfig c = Tiny("tiny-qwen2");
  auto m = CreateModel(c, 3, 0.05);
  ASSERT_TRUE(ApplyLora(*m, Config({"all-linear"}), 5).ok());
  Input in = MakeInput(c.vocab_size);
  m->ForwardPacked(in.ids, in.pos, in.cu).logits.pow(2).sum().backward();
  int lora_params = 0;
  for (const auto& it : m->named_parameters()) {
    const bool is_lora = it.key().find(".lora_") != std::string::npos;
    EXPECT_EQ(it.value().requires_grad(), is_lora) << it.key();
    if (!is_lora) {
      EXPECT_FALSE(it.value().grad().defined()) << it.key();
    } else {
      ++lora_params;
      ASSERT_TRUE(it.value().grad().defined()) << it.key();
      // With B = 0, dL/dA = 0 and dL/dB != 0 (PEFT's starting point).
      const double g = it.value().grad().abs().sum().item<double>();
      if (it.key().find("lora_B") != std::string::npos) {
        EXPECT_GT(g, 0) << it.key();
      } else {
        EXPECT_EQ(g, 0) << it.key();
      }
    }
  }
  EXPECT_EQ(lora_params, 28);
}

TEST(LoraTest, GradientCheckpointingWithFrozenBase) {
  // The first layer's input does not require grad (frozen embeddings); the
  // checkpointed backward must still reach the adapters.
  ModelConfig c = Tiny("tiny-qwen2");
  auto m = CreateModel(c, 6, 0.05);
  ASSERT_TRUE(ApplyLora(*m, Config({"all-linear"}), 2).ok());
  RandomizeB(*m);
  Input in = MakeInput(c.vocab_size);
  auto grads = [&]() {
    m->zero_grad();
    m->ForwardPacked(in.ids, in.pos, in.cu).logits.pow(2).sum().backward();
    std::map<std::string, at::Tensor> g;
    for (auto& [n, t] : LoraNamedParameters(*m)) g[n] = t.grad().clone();
    return g;
  };
  auto plain = grads();
  m->enable_gradient_checkpointing();
  auto ckpt = grads();
  ASSERT_EQ(plain.size(), 28u);
  for (const auto& [n, g] : plain) {
    EXPECT_GT(g.abs().sum().item<double>(), 0) << n;
    EXPECT_TRUE(at::allclose(g, ckpt.at(n), 1e-5, 1e-7)) << n;
  }
}

TEST(LoraTest, SaveLoadRoundTripAndConfigJson) {
  ModelConfig c = Tiny("tiny-qwen2");
  auto m = CreateModel(c, 4, 0.05);
  LoraConfig cfg = Config({"q_proj", "k_proj", "gate_proj"}, 8, 16);
  ASSERT_TRUE(ApplyLora(*m, cfg, 9).ok());
  RandomizeB(*m);
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/adapter";
  ASSERT_TRUE(SaveLoraAdapter(*m, cfg, dir).ok());

  nlohmann::json j = nlohmann::json::parse(AdapterConfigJson(cfg, *m));
  EXPECT_EQ(j["r"], 8);
  EXPECT_EQ(j["lora_alpha"], 16);
  EXPECT_EQ(j["peft_type"], "LORA");
  EXPECT_EQ(j["task_type"], "CAUSAL_LM");
  EXPECT_EQ(j["base_model_name_or_path"], "tiny-llama3");
  EXPECT_EQ(j["target_modules"],
            nlohmann::json({"gate_proj", "k_proj", "q_proj"}));

  auto loaded = CreateModel(c, 4, 0.05);
  absl::StatusOr<LoraConfig> got = LoadLoraAdapter(*loaded, dir);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->rank, 8);
  EXPECT_EQ(got->alpha, 16);
  Input in = MakeInput(c.vocab_size);
  EXPECT_TRUE(at::equal(Logits(*loaded, in), Logits(*m, in)));

  // A folder whose adapter does not fit the model is a clear error.
  auto other = CreateModel(c, 4);
  ASSERT_TRUE(ApplyLora(*other, Config({"q_proj"}, 8, 16), 1).ok());
  EXPECT_THAT(LoadLoraAdapter(*other, dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "has 12 tensors, model has 4 LoRA parameters"));
  EXPECT_THAT(ParseAdapterConfigJson("{\"peft_type\": \"LORA\"}", "x.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "x.json: missing integer key 'r'"));
}

}  // namespace
}  // namespace verl::models
