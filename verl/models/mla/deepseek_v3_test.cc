// File: verl/models/mla/deepseek_v3_test.cc
//
// DeepSeek-V3 (MLA + sigmoid-routed MoE) against the float64 reference of
// gen_deepseek_v3_golden.py, written from HF modeling_deepseek_v3's
// equations: HF folders (config.json + bf16 weights under HF names) load
// into the decoder; packed logits, next-token log-probs and gradients of
// their mean equal the reference's; gradient checkpointing, save -> load
// round trip, the tiny-deepseek-v3 preset and config refusals.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>
#include <string>
#include <vector>

#include "verl/ckpt/safetensors.h"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/hf_config.h"
#include "verl/models/logprob.h"
#include "verl/models/presets.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

constexpr char kTestdata[] = "verl/models/mla/testdata/";

double RelErr(const at::Tensor& got, const at::Tensor& want) {
  return (got.to(at::kDouble) - want).abs().max().item<double>() /
         want.abs().max().item<double>();
}

std::map<std::string, at::Tensor> Params(torch::nn::Module& m) {
  std::map<std::string, at::Tensor> out;
  for (const auto& it : m.named_parameters()) out[it.key()] = it.value();
  return out;
}

// The variant's HF folder loaded into a float64 model.
std::shared_ptr<CausalLM> LoadModel(const std::string& dir) {
  absl::StatusOr<ModelConfig> config = ReadHfConfig(dir + "/config.json");
  CHECK(config.ok()) << config.status();
  auto model = CreateModel(*config, /*seed=*/7);
  std::map<std::string, at::Tensor> params = Params(*model);
  absl::Status st = LoadHfWeightsInto(dir, &params);
  CHECK(st.ok()) << st;
  model->to(at::kDouble);
  return model;
}

std::vector<int64_t> CuSeqlens(const at::Tensor& t) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < t.numel(); ++i) out.push_back(t[i].item<int64_t>());
  return out;
}

// Next-token labels within each packed sequence (last position: token 0).
at::Tensor Labels(const at::Tensor& ids, const std::vector<int64_t>& cu) {
  at::Tensor labels = at::zeros_like(ids);
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    const int64_t n = cu[s + 1] - cu[s];
    labels.narrow(0, cu[s], n - 1).copy_(ids.narrow(0, cu[s] + 1, n - 1));
  }
  return labels;
}

class DeepseekV3GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DeepseekV3GoldenTest, LogitsLogProbsAndGradientsMatchReference) {
  const std::string dir = kTestdata + GetParam();
  auto golden = ckpt::LoadSafetensors(std::string(kTestdata) + GetParam() +
                                      "_golden.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const at::Tensor ids = golden->at("input_ids");
  const std::vector<int64_t> cu = CuSeqlens(golden->at("cu_seqlens"));
  for (bool checkpointing : {false, true}) {
    SCOPED_TRACE(checkpointing ? "gradient checkpointing" : "plain");
    auto model = LoadModel(dir);
    model->enable_gradient_checkpointing(checkpointing);
    ForwardOutput out =
        model->ForwardPacked(ids, golden->at("position_ids"), cu);
    EXPECT_FALSE(out.aux_loss.defined());  // the sigmoid router has none
    EXPECT_LT(RelErr(out.logits, golden->at("logits")), 1e-10);
    at::Tensor logp = LogProbsFromLogits(out.logits, Labels(ids, cu));
    EXPECT_LT(RelErr(logp, golden->at("log_probs")), 1e-10);
    logp.mean().backward();
    std::map<std::string, at::Tensor> params = Params(*model);
    for (const auto& [name, want] : *golden) {
      if (name.rfind("grad.", 0) != 0) continue;
      const at::Tensor& p = params.at(name.substr(5));
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_LT(RelErr(p.grad(), want), 1e-9) << name;
    }
    // The selection bias gets no gradient; every other parameter that saw
    // tokens does (experts no token chose may stay without).
    for (const auto& [name, p] : params) {
      if (name.find("e_score_correction_bias") != std::string::npos) {
        EXPECT_FALSE(p.requires_grad()) << name;
        EXPECT_FALSE(p.grad().defined()) << name;
      } else if (name.find(".experts.") == std::string::npos) {
        ASSERT_TRUE(p.grad().defined()) << name;
        EXPECT_GT(p.grad().abs().max().item<double>(), 0) << name;
      }
    }
  }
}

TEST_P(DeepseekV3GoldenTest, SaveLoadRoundTrip) {
  const std::string dir = kTestdata + GetParam();
  absl::StatusOr<HfCheckpoint> ckpt = LoadHfCheckpoint(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const std::string out =
      core::testing::FreshTestDir("deepseek_roundtrip_" + GetParam());
  ASSERT_TRUE(SaveHfCheckpoint(out, *ckpt).ok());
  absl::StatusOr<HfCheckpoint> again = LoadHfCheckpoint(out);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->config_json, ckpt->config_json);
  ASSERT_EQ(again->tensors.size(), ckpt->tensors.size());
  for (const auto& [name, t] : ckpt->tensors) {
    EXPECT_TRUE(at::equal(again->tensors.at(name), t)) << name;
  }
  // The config written from the parsed ModelConfig alone (no base JSON)
  // parses back to the same model.
  absl::StatusOr<nlohmann::json> fresh = ModelConfigToHfJson(ckpt->config);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  absl::StatusOr<ModelConfig> back = ModelConfigFromHfJson(*fresh, "fresh");
  ASSERT_TRUE(back.ok()) << back.status();
  auto a = CreateModel(ckpt->config, 3), b = CreateModel(*back, 3);
  auto pa = Params(*a), pb = Params(*b);
  ASSERT_EQ(pa.size(), pb.size());
  for (const auto& [name, t] : pa) {
    EXPECT_TRUE(at::equal(pb.at(name), t)) << name;
  }
  EXPECT_EQ(back->rope_scaling.rope_type, ckpt->config.rope_scaling.rope_type);
  EXPECT_EQ(back->rope_scaling.mscale, ckpt->config.rope_scaling.mscale);
}

// A latent cache of one sequence that grows by concatenation, attended with
// the absorbed projections (the rollout engine's math without paging).
class ContiguousLatentCache : public AttentionBackend,
                              public LatentAttentionBackend {
 public:
  at::Tensor Attend(int64_t, const at::Tensor&, const at::Tensor&,
                    const at::Tensor&) override {
    ADD_FAILURE() << "MLA layers must call AttendLatent";
    return at::Tensor();
  }
  at::Tensor AttendLatent(const MlaAttention& attn, const at::Tensor& q,
                          const MlaAttention::Latent& latent) override {
    auto grow = [](std::vector<at::Tensor>& v, int64_t l, const at::Tensor& x) {
      if (static_cast<int64_t>(v.size()) <= l) v.resize(l + 1);
      v[l] = v[l].defined() ? at::cat({v[l], x}) : x;
      return v[l];
    };
    return attn.AttendAbsorbed(q, grow(c_, attn.layer, latent.c_kv),
                               grow(k_, attn.layer, latent.k_rope));
  }

 private:
  std::vector<at::Tensor> c_, k_;
};

TEST_P(DeepseekV3GoldenTest, AbsorbedLatentDecodeEqualsTrainingForward) {
  auto golden = ckpt::LoadSafetensors(std::string(kTestdata) + GetParam() +
                                      "_golden.safetensors");
  ASSERT_TRUE(golden.ok()) << golden.status();
  auto model = LoadModel(kTestdata + GetParam());
  const std::vector<int64_t> cu = CuSeqlens(golden->at("cu_seqlens"));
  at::NoGradGuard no_grad;
  // The first sequence: a 4-token prefill chunk, then one token at a time.
  const int64_t n = cu[1];
  at::Tensor ids = golden->at("input_ids").narrow(0, 0, n);
  ContiguousLatentCache cache;
  std::vector<at::Tensor> logits;
  for (int64_t start = 0; start < n;) {
    const int64_t len = start == 0 ? 4 : 1;
    at::Tensor h = model->Forward(ids.narrow(0, start, len),
                                  at::arange(start, start + len), cache);
    logits.push_back(model->Logits(h));
    start += len;
  }
  EXPECT_LT(RelErr(at::cat(logits), golden->at("logits").narrow(0, 0, n)),
            1e-10);
}

INSTANTIATE_TEST_SUITE_P(Variants, DeepseekV3GoldenTest,
                         ::testing::Values("deepseek_v3_tiny",
                                           "deepseek_v3_plain"));

TEST(DeepseekV3Test, ConfigFieldsAndHfNames) {
  absl::StatusOr<ModelConfig> c =
      ReadHfConfig(std::string(kTestdata) + "deepseek_v3_tiny/config.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->architecture, "DeepseekV3ForCausalLM");
  EXPECT_TRUE(c->IsMla());
  EXPECT_EQ(c->q_lora_rank, 12);
  EXPECT_EQ(c->kv_lora_rank, 16);
  EXPECT_EQ(c->head_dim, 8);  // qk_rope_head_dim
  EXPECT_EQ(c->num_experts, 8);
  EXPECT_EQ(c->n_shared_experts, 2);
  EXPECT_EQ(c->n_group, 4);
  EXPECT_EQ(c->topk_group, 2);
  EXPECT_EQ(c->routed_scaling_factor, 2.5);
  EXPECT_EQ(c->rope_scaling.rope_type, "yarn");
  EXPECT_EQ(c->rope_scaling.mscale, 0.707);
  EXPECT_FALSE(c->LayerIsMoe(0));
  EXPECT_TRUE(c->LayerIsMoe(1));
  auto model = CreateModel(*c, 1);
  auto p = Params(*model);
  for (const char* name : {
           "model.layers.0.self_attn.q_a_proj.weight",
           "model.layers.0.self_attn.q_a_layernorm.weight",
           "model.layers.0.self_attn.q_b_proj.weight",
           "model.layers.0.self_attn.kv_a_proj_with_mqa.weight",
           "model.layers.0.self_attn.kv_a_layernorm.weight",
           "model.layers.0.self_attn.kv_b_proj.weight",
           "model.layers.0.self_attn.o_proj.weight",
           "model.layers.0.mlp.gate_proj.weight",
           "model.layers.1.mlp.gate.weight",
           "model.layers.1.mlp.gate.e_score_correction_bias",
           "model.layers.1.mlp.experts.7.down_proj.weight",
           "model.layers.1.mlp.shared_experts.up_proj.weight",
       }) {
    EXPECT_EQ(p.count(name), 1u) << name;
  }
  EXPECT_EQ(p.at("model.layers.1.mlp.shared_experts.up_proj.weight").size(0),
            16);
  // HF initialises the selection bias to zeros.
  EXPECT_EQ(p.at("model.layers.1.mlp.gate.e_score_correction_bias")
                .abs()
                .sum()
                .item<double>(),
            0.0);
}

TEST(DeepseekV3Test, RefusesWhatTransformersDoesNotRun) {
  absl::StatusOr<HfCheckpoint> ckpt =
      LoadHfConfigs(std::string(kTestdata) + "deepseek_v3_tiny");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"topk_method", "greedy",
       "topk_method 'greedy' is not supported for deepseek_v3 (only "
       "'noaux_tc')"},
      {"scoring_func", "softmax", "scoring_func 'softmax' is not supported"},
      {"moe_layer_freq", 2, "moe_layer_freq 2 is not supported"},
      {"n_group", 3, "invalid MoE settings: n_routed_experts=8 n_group=3"},
      {"qk_rope_head_dim", 7, "invalid MLA shape"},
      {"max_position_embeddings", 128,
       "yarn factor 4 must equal max_position_embeddings / "
       "original_max_position_embeddings = 8"},
      {"rope_scaling",
       {{"type", "dynamic"}, {"factor", 2.0}},
       "rope type 'dynamic' is not supported (supported: default, llama3, "
       "yarn)"},
  };
  for (const Case& c : cases) {
    nlohmann::json j = ckpt->config_json;
    j[c.key] = c.value;
    EXPECT_THAT(ModelConfigFromHfJson(j, "cfg.json"),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message))
        << c.key;
  }
  // yarn stays DeepSeek-only.
  nlohmann::json qwen = {{"architectures", {"Qwen2ForCausalLM"}},
                         {"vocab_size", 8},
                         {"hidden_size", 8},
                         {"intermediate_size", 8},
                         {"num_hidden_layers", 1},
                         {"num_attention_heads", 2},
                         {"rope_scaling",
                          {{"type", "yarn"},
                           {"factor", 2.0},
                           {"original_max_position_embeddings", 16}}}};
  EXPECT_THAT(ModelConfigFromHfJson(qwen, "q.json"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "rope type 'yarn' is not supported (supported: "
                       "default, llama3)"));
}

TEST(DeepseekV3Test, TinyPresetTrainsAndWritesHfConfig) {
  absl::StatusOr<ModelConfig> c = MakePreset("tiny-deepseek-v3");
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<nlohmann::json> json = ModelConfigToHfJson(*c);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["architectures"][0], "DeepseekV3ForCausalLM");
  EXPECT_EQ((*json)["rope_scaling"]["rope_type"], "yarn");
  EXPECT_FALSE(json->contains("head_dim"));
  absl::StatusOr<ModelConfig> back = ModelConfigFromHfJson(*json, "preset");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kv_lora_rank, c->kv_lora_rank);
  EXPECT_EQ(back->first_k_dense_replace, 1);

  auto model = CreateModel(*c, 1);
  const std::vector<int64_t> cu = {0, 5, 12};
  at::Tensor ids = at::randint(0, c->vocab_size, {12}, at::kLong);
  at::Tensor pos = at::cat({at::arange(5), at::arange(7)});
  ForwardOutput out = model->ForwardPacked(ids, pos, cu);
  ASSERT_EQ(out.logits.sizes(), (at::IntArrayRef{12, c->vocab_size}));
  EXPECT_TRUE(at::isfinite(out.logits).all().item<bool>());
  LogProbsFromLogits(out.logits, ids).mean().backward();
  EXPECT_TRUE(
      model->model->layers[3]->mla_attn->kv_b_proj->weight.grad().defined());
  EXPECT_TRUE(
      model->model->layers[3]->deepseek_moe->gate->weight.grad().defined());
}

}  // namespace
}  // namespace verl::models
