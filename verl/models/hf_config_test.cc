#include "verl/models/hf_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

// Real configs as published on the Hub (written from the model cards).
const char kQwen25_05B[] = R"({
  "architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "eos_token_id": 151643, "hidden_act": "silu",
  "hidden_size": 896, "initializer_range": 0.02, "intermediate_size": 4864,
  "max_position_embeddings": 32768, "max_window_layers": 24,
  "model_type": "qwen2", "num_attention_heads": 14, "num_hidden_layers": 24,
  "num_key_value_heads": 2, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
  "sliding_window": 32768, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.40.1",
  "use_cache": true, "use_mrope": false, "use_sliding_window": false,
  "vocab_size": 151936})";

const char kQwen3_06B[] = R"({
  "architectures": ["Qwen3ForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151645,
  "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
  "initializer_range": 0.02, "intermediate_size": 3072,
  "max_position_embeddings": 40960, "max_window_layers": 28,
  "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-06, "rope_scaling": null,
  "rope_theta": 1000000, "sliding_window": null, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
  "use_cache": true, "use_sliding_window": false, "vocab_size": 151936})";

const char kLlama32_1B_Instruct[] = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "head_dim": 64,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 8192, "max_position_embeddings": 131072,
  "mlp_bias": false, "model_type": "llama", "num_attention_heads": 32,
  "num_hidden_layers": 16, "num_key_value_heads": 8, "pretraining_tp": 1,
  "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 32.0, "high_freq_factor": 4.0,
                   "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192,
                   "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": true,
  "torch_dtype": "bfloat16", "transformers_version": "4.45.0.dev0",
  "use_cache": true, "vocab_size": 128256})";

const char kMistral7B[] = R"({
  "architectures": ["MistralForCausalLM"], "bos_token_id": 1,
  "eos_token_id": 2, "hidden_act": "silu", "hidden_size": 4096,
  "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 32768, "model_type": "mistral",
  "num_attention_heads": 32, "num_hidden_layers": 32,
  "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 10000.0,
  "sliding_window": 4096, "tie_word_embeddings": false,
  "torch_dtype": "bfloat16", "transformers_version": "4.34.0.dev0",
  "use_cache": true, "vocab_size": 32000})";

const char kQwen15MoeA27B[] = R"({
  "architectures": ["Qwen2MoeForCausalLM"], "attention_dropout": 0.0,
  "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151643,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 5632, "max_position_embeddings": 8192,
  "max_window_layers": 21, "model_type": "qwen2_moe",
  "moe_intermediate_size": 1408, "norm_topk_prob": false,
  "num_attention_heads": 16, "num_experts": 60, "num_experts_per_tok": 4,
  "num_hidden_layers": 24, "num_key_value_heads": 16,
  "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001,
  "shared_expert_intermediate_size": 5632, "sliding_window": 32768,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.39.0.dev0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

const char kQwen3_30B_A3B[] = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": false,
  "attention_dropout": 0.0, "bos_token_id": 151643,
  "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": 128,
  "hidden_act": "silu", "hidden_size": 2048, "initializer_range": 0.02,
  "intermediate_size": 6144, "max_position_embeddings": 40960,
  "max_window_layers": 48, "mlp_only_layers": [], "model_type": "qwen3_moe",
  "moe_intermediate_size": 768, "norm_topk_prob": true,
  "num_attention_heads": 32, "num_experts": 128, "num_experts_per_tok": 8,
  "num_hidden_layers": 48, "num_key_value_heads": 4,
  "output_router_logits": false, "rms_norm_eps": 1e-06,
  "rope_scaling": null, "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001, "sliding_window": null,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0", "use_cache": true,
  "use_sliding_window": false, "vocab_size": 151936})";

// A verl critic saved from Qwen2.5-0.5B (AutoModelForTokenClassification,
// num_labels=1).
std::string Qwen25Critic() {
  Json j = Json::parse(kQwen25_05B);
  j["architectures"] = {"Qwen2ForTokenClassification"};
  j["id2label"] = {{"0", "LABEL_0"}};
  j["label2id"] = {{"LABEL_0", 0}};
  return j.dump();
}

ModelConfig Parse(const std::string& text) {
  auto c = ModelConfigFromHfJson(Json::parse(text), "config.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : ModelConfig();
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.model_type, b.model_type);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.hidden_size, b.hidden_size);
  EXPECT_EQ(a.intermediate_size, b.intermediate_size);
  EXPECT_EQ(a.num_hidden_layers, b.num_hidden_layers);
  EXPECT_EQ(a.num_attention_heads, b.num_attention_heads);
  EXPECT_EQ(a.num_key_value_heads, b.num_key_value_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.max_position_embeddings, b.max_position_embeddings);
  EXPECT_EQ(a.rms_norm_eps, b.rms_norm_eps);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.rope_scaling.rope_type, b.rope_scaling.rope_type);
  EXPECT_EQ(a.rope_scaling.factor, b.rope_scaling.factor);
  EXPECT_EQ(a.rope_scaling.low_freq_factor, b.rope_scaling.low_freq_factor);
  EXPECT_EQ(a.rope_scaling.high_freq_factor, b.rope_scaling.high_freq_factor);
  EXPECT_EQ(a.rope_scaling.original_max_position_embeddings,
            b.rope_scaling.original_max_position_embeddings);
  EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
  EXPECT_EQ(a.attention_bias, b.attention_bias);
  EXPECT_EQ(a.qk_norm, b.qk_norm);
  EXPECT_EQ(a.hidden_act, b.hidden_act);
  EXPECT_EQ(a.torch_dtype, b.torch_dtype);
  EXPECT_EQ(a.use_sliding_window, b.use_sliding_window);
  EXPECT_EQ(a.sliding_window, b.sliding_window);
  EXPECT_EQ(a.max_window_layers, b.max_window_layers);
  EXPECT_EQ(a.num_experts, b.num_experts);
  EXPECT_EQ(a.num_experts_per_tok, b.num_experts_per_tok);
  EXPECT_EQ(a.moe_intermediate_size, b.moe_intermediate_size);
  EXPECT_EQ(a.shared_expert_intermediate_size,
            b.shared_expert_intermediate_size);
  EXPECT_EQ(a.norm_topk_prob, b.norm_topk_prob);
  EXPECT_EQ(a.decoder_sparse_step, b.decoder_sparse_step);
  EXPECT_EQ(a.mlp_only_layers, b.mlp_only_layers);
  EXPECT_EQ(a.router_aux_loss_coef, b.router_aux_loss_coef);
  EXPECT_EQ(a.bos_token_id, b.bos_token_id);
  EXPECT_EQ(a.eos_token_ids, b.eos_token_ids);
  EXPECT_EQ(a.pad_token_id, b.pad_token_id);
  EXPECT_EQ(a.is_value_model, b.is_value_model);
}

TEST(HfConfigTest, Qwen25) {
  ModelConfig c = Parse(kQwen25_05B);
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.hidden_size, 896);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.HeadDim(), 64);
  EXPECT_TRUE(c.attention_bias);  // implied by Qwen2
  EXPECT_FALSE(c.qk_norm);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_scaling.rope_type, "default");
  EXPECT_FALSE(c.use_sliding_window);
  EXPECT_EQ(c.sliding_window, 32768);
  EXPECT_EQ(c.max_window_layers, 24);
  EXPECT_EQ(c.LayerSlidingWindow(23), 0);  // window off
  EXPECT_THAT(c.eos_token_ids, ElementsAre(151643));
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_FALSE(c.is_value_model);
}

TEST(HfConfigTest, Qwen3) {
  ModelConfig c = Parse(kQwen3_06B);
  EXPECT_EQ(c.head_dim, 128);  // != 1024 / 16
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.sliding_window, 0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  // head_dim absent: Qwen3Config's default 128.
  Json j = Json::parse(kQwen3_06B);
  j.erase("head_dim");
  EXPECT_EQ(ModelConfigFromHfJson(j, "c")->head_dim, 128);
}

TEST(HfConfigTest, Llama32WithLlama3RopeAndEosList) {
  ModelConfig c = Parse(kLlama32_1B_Instruct);
  EXPECT_EQ(c.rope_scaling.rope_type, "llama3");
  EXPECT_EQ(c.rope_scaling.factor, 32.0);
  EXPECT_EQ(c.rope_scaling.low_freq_factor, 1.0);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.rms_norm_eps, 1e-5);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_THAT(c.eos_token_ids, ElementsAre(128001, 128008, 128009));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.pad_token_id, -1);
  // Older files spell the rope type "type"; attention_bias is a Llama key.
  Json j = Json::parse(kLlama32_1B_Instruct);
  j["rope_scaling"].erase("rope_type");
  j["rope_scaling"]["type"] = "llama3";
  j["attention_bias"] = true;
  j.erase("num_key_value_heads");
  auto c2 = ModelConfigFromHfJson(j, "c");
  ASSERT_TRUE(c2.ok()) << c2.status();
  EXPECT_EQ(c2->rope_scaling.rope_type, "llama3");
  EXPECT_TRUE(c2->attention_bias);
  EXPECT_EQ(c2->num_key_value_heads, 32);  // absent => MHA
}

TEST(HfConfigTest, MistralSlidingWindow) {
  ModelConfig c = Parse(kMistral7B);
  EXPECT_EQ(c.model_type, "mistral");
  EXPECT_EQ(c.sliding_window, 4096);
  EXPECT_EQ(c.LayerSlidingWindow(0), 4096);
  EXPECT_EQ(c.LayerSlidingWindow(31), 4096);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.HeadDim(), 128);
  Json j = Json::parse(kMistral7B);
  j["sliding_window"] = nullptr;  // Mistral-7B-v0.2+
  EXPECT_EQ(ModelConfigFromHfJson(j, "c")->LayerSlidingWindow(0), 0);
}

TEST(HfConfigTest, Qwen2Moe) {
  ModelConfig c = Parse(kQwen15MoeA27B);
  EXPECT_TRUE(c.IsMoe());
  EXPECT_EQ(c.num_experts, 60);
  EXPECT_EQ(c.num_experts_per_tok, 4);
  EXPECT_EQ(c.moe_intermediate_size, 1408);
  EXPECT_EQ(c.shared_expert_intermediate_size, 5632);
  EXPECT_FALSE(c.norm_topk_prob);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_TRUE(c.LayerIsMoe(0));
  EXPECT_EQ(c.router_aux_loss_coef, 0.001);
}

TEST(HfConfigTest, Qwen3Moe) {
  ModelConfig c = Parse(kQwen3_30B_A3B);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_EQ(c.shared_expert_intermediate_size, 0);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.mlp_only_layers.empty());
  Json j = Json::parse(kQwen3_30B_A3B);
  j["mlp_only_layers"] = {0, 47};
  auto c2 = ModelConfigFromHfJson(j, "c");
  ASSERT_TRUE(c2.ok());
  EXPECT_FALSE(c2->LayerIsMoe(0));
  EXPECT_TRUE(c2->LayerIsMoe(1));
  EXPECT_FALSE(c2->LayerIsMoe(47));
}

TEST(HfConfigTest, ValueModelVariants) {
  ModelConfig c = Parse(Qwen25Critic());
  EXPECT_TRUE(c.is_value_model);
  EXPECT_EQ(c.architecture, "Qwen2ForTokenClassification");
  EXPECT_EQ(c.model_type, "qwen2");
  for (const char* arch :
       {"LlamaForTokenClassification", "Qwen3ForTokenClassification",
        "MistralForTokenClassification", "Qwen2MoeForTokenClassification",
        "Qwen3MoeForTokenClassification"}) {
    EXPECT_THAT(SupportedHfArchitectures(), ::testing::Contains(arch));
  }
  // Turning the actor config into a critic config.
  ModelConfig actor = Parse(kQwen25_05B);
  actor.is_value_model = true;
  auto json = ModelConfigToHfJson(actor, Json::parse(kQwen25_05B));
  ASSERT_TRUE(json.ok());
  EXPECT_EQ((*json)["architectures"], Json({"Qwen2ForTokenClassification"}));
  EXPECT_EQ((*json)["id2label"], Json({{"0", "LABEL_0"}}));
  EXPECT_TRUE(ModelConfigFromHfJson(*json, "c")->is_value_model);
}

TEST(HfConfigTest, EveryRealConfigRoundTripsVerbatimAndFromScratch) {
  for (const std::string& text :
       {std::string(kQwen25_05B), std::string(kQwen3_06B),
        std::string(kLlama32_1B_Instruct), std::string(kMistral7B),
        std::string(kQwen15MoeA27B), std::string(kQwen3_30B_A3B),
        Qwen25Critic()}) {
    const Json raw = Json::parse(text);
    ModelConfig c = Parse(text);
    auto same = ModelConfigToHfJson(c, raw);
    ASSERT_TRUE(same.ok()) << same.status();
    // Unchanged config on its own base: the file is reproduced exactly
    // (unknown keys such as use_mrope / transformers_version included).
    EXPECT_EQ(same->dump(2), raw.dump(2)) << raw["architectures"];
    // Without a base, the written keys alone describe the same model.
    auto fresh = ModelConfigToHfJson(c);
    ASSERT_TRUE(fresh.ok());
    ExpectSameConfig(c, Parse(fresh->dump()));
  }
}

TEST(HfConfigTest, ChangedFieldsReplaceOnlyTheirKeys) {
  const Json raw = Json::parse(kLlama32_1B_Instruct);
  ModelConfig c = Parse(kLlama32_1B_Instruct);
  c.rope_theta = 10000.0;
  c.rope_scaling = RopeScaling();
  c.eos_token_ids = {128009};
  c.tie_word_embeddings = false;
  auto json = ModelConfigToHfJson(c, raw);
  ASSERT_TRUE(json.ok());
  Json expected = raw;
  expected["rope_theta"] = 10000.0;
  expected["rope_scaling"] = nullptr;
  expected["eos_token_id"] = {128009};  // the source used a list
  expected["tie_word_embeddings"] = false;
  EXPECT_EQ(*json, expected);
  ExpectSameConfig(c, Parse(json->dump()));
}

TEST(HfConfigTest, TransformersV5RopeParametersAndDtype) {
  Json j = Json::parse(kLlama32_1B_Instruct);
  j["rope_parameters"] = j["rope_scaling"];
  j["rope_parameters"]["rope_theta"] = 500000.0;
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["dtype"] = j["torch_dtype"];
  j.erase("torch_dtype");
  auto c = ModelConfigFromHfJson(j, "c");
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectSameConfig(*c, Parse(kLlama32_1B_Instruct));
  auto same = ModelConfigToHfJson(*c, j);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, j);  // stays in v5 layout
  c->rope_theta = 1e6;
  auto changed = ModelConfigToHfJson(*c, j);
  EXPECT_EQ((*changed)["rope_parameters"]["rope_theta"], 1e6);
  EXPECT_EQ((*changed)["rope_parameters"]["rope_type"], "llama3");
  EXPECT_FALSE(changed->contains("rope_theta"));
}

TEST(HfConfigTest, ClearErrors) {
  struct Case {
    std::function<void(Json&)> edit;
    std::string error;
  };
  const std::vector<Case> cases = {
      {[](Json& j) { j["architectures"] = {"GPT2LMHeadModel"}; },
       "unsupported architecture 'GPT2LMHeadModel' (supported: "
       "LlamaForCausalLM, Qwen2ForCausalLM"},
      {[](Json& j) {
         j.erase("architectures");
         j["model_type"] = "gemma";
       },
       "unsupported architecture 'model_type=gemma'"},
      {[](Json& j) { j["model_type"] = "llama"; },
       "model_type 'llama' does not match Qwen2ForCausalLM"},
      {[](Json& j) { j["hidden_size"] = "896"; },
       "'hidden_size' must be an integer, got \"896\""},
      {[](Json& j) { j.erase("vocab_size"); },
       "missing required key 'vocab_size'"},
      {[](Json& j) {
         j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}};
       },
       "rope type 'yarn' is not supported"},
      {[](Json& j) {
         j["rope_scaling"] = {{"rope_type", "llama3"}};
       },
       "llama3 rope scaling needs 'factor'"},
      {[](Json& j) { j["num_key_value_heads"] = 3; },
       "must be a multiple of num_key_value_heads (3)"},
      {[](Json& j) {
         j["eos_token_id"] = {1, "x"};
       },
       "'eos_token_id' must be a list of integers"},
      {[](Json& j) { j["tie_word_embeddings"] = 1; },
       "'tie_word_embeddings' must be true or false"},
      {[](Json& j) {
         j["architectures"] = {"Qwen2ForTokenClassification"};
         j["id2label"] = {{"0", "a"}, {"1", "b"}};
       },
       "needs 1 label, id2label has 2"},
      {[](Json& j) { j["architectures"] = "Qwen2ForCausalLM"; },
       "'architectures' must be a non-empty list"},
  };
  for (const Case& c : cases) {
    Json j = Json::parse(kQwen25_05B);
    c.edit(j);
    auto r = ModelConfigFromHfJson(j, "m/config.json");
    ASSERT_THAT(r,
                StatusIs(absl::StatusCode::kInvalidArgument, "m/config.json"))
        << c.error;
    EXPECT_THAT(Msg(r.status()), HasSubstr("m/config.json: ")) << c.error;
    EXPECT_THAT(Msg(r.status()), HasSubstr(c.error));
  }
  Json llama = Json::parse(kLlama32_1B_Instruct);
  llama["mlp_bias"] = true;
  EXPECT_THAT(Msg(ModelConfigFromHfJson(llama, "c").status()),
              HasSubstr("mlp_bias=true is not supported"));
  Json moe = Json::parse(kQwen3_30B_A3B);
  moe["num_experts_per_tok"] = 200;
  EXPECT_THAT(Msg(ModelConfigFromHfJson(moe, "c").status()),
              HasSubstr("invalid MoE settings"));
  EXPECT_THAT(Msg(ModelConfigFromHfJson(Json::array(), "c").status()),
              HasSubstr("not a JSON object"));
  // Writer-side invariants.
  ModelConfig q2 = Parse(kQwen25_05B);
  q2.attention_bias = false;
  EXPECT_THAT(Msg(ModelConfigToHfJson(q2).status()),
              HasSubstr("always have bias"));
  ModelConfig unknown = q2;
  unknown.model_type = "gpt2";
  EXPECT_THAT(Msg(ModelConfigToHfJson(unknown).status()),
              HasSubstr("model_type 'gpt2'"));
}

const char kQwen3Generation[] = R"({
  "bos_token_id": 151643, "do_sample": true,
  "eos_token_id": [151645, 151643], "pad_token_id": 151643,
  "temperature": 0.6, "top_k": 20, "top_p": 0.95,
  "transformers_version": "4.51.0"})";

TEST(HfConfigTest, GenerationConfigEosListAndSampling) {
  const Json raw = Json::parse(kQwen3Generation);
  auto g = GenerationConfigFromJson(raw, "generation_config.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->eos_token_ids, ElementsAre(151645, 151643));
  EXPECT_EQ(g->bos_token_id, 151643);
  EXPECT_EQ(g->pad_token_id, 151643);
  EXPECT_EQ(g->do_sample, true);
  EXPECT_EQ(g->temperature, 0.6);
  EXPECT_EQ(g->top_k, 20);
  EXPECT_EQ(g->top_p, 0.95);
  EXPECT_FALSE(g->repetition_penalty.has_value());
  EXPECT_EQ(GenerationConfigToJson(*g, raw), raw);
  // Both eos ids stop generation; config.json's (151645) is not repeated.
  ModelConfig model = Parse(kQwen3_06B);
  EXPECT_THAT(StopTokenIds(model, &*g), ElementsAre(151645, 151643));
  EXPECT_THAT(StopTokenIds(model, nullptr), ElementsAre(151645));

  g->temperature = 1.0;
  g->top_k.reset();
  g->eos_token_ids = {7};
  Json changed = GenerationConfigToJson(*g, raw);
  EXPECT_EQ(changed["temperature"], 1.0);
  EXPECT_FALSE(changed.contains("top_k"));
  EXPECT_EQ(changed["eos_token_id"], Json::array({7}));
  EXPECT_EQ(changed["transformers_version"], "4.51.0");
  EXPECT_EQ(GenerationConfigToJson(*g)["eos_token_id"], 7);  // int by default

  Json bad = raw;
  bad["temperature"] = "hot";
  EXPECT_THAT(Msg(GenerationConfigFromJson(bad, "g.json").status()),
              HasSubstr("g.json: 'temperature' must be a number"));
}

TEST(HfConfigTest, FilesAreWrittenAsTransformersDoes) {
  const std::string dir =
      (std::filesystem::path(::testing::TempDir()) / "hf_config").string();
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/config.json";
  std::ofstream(path) << kQwen3_06B;
  Json raw;
  auto c = ReadHfConfig(path, &raw);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(raw["transformers_version"], "4.51.0");
  const std::string out = dir + "/out.json";
  ASSERT_TRUE(WriteHfConfig(out, *c, raw).ok());
  std::stringstream ss;
  ss << std::ifstream(out).rdbuf();
  // json.dumps(config, indent=2, sort_keys=True) + "\n"
  EXPECT_EQ(ss.str(), raw.dump(2) + "\n");
  EXPECT_EQ(ss.str().substr(0, 40),
            "{\n  \"architectures\": [\n    \"Qwen3ForCaus");
  auto again = ReadHfConfig(out);
  ASSERT_TRUE(again.ok());
  ExpectSameConfig(*c, *again);

  std::ofstream(dir + "/bad.json") << "{\"a\": ";
  EXPECT_THAT(Msg(ReadHfConfig(dir + "/bad.json").status()),
              HasSubstr("bad.json"));
  EXPECT_EQ(ReadHfConfig(dir + "/none.json").status().code(),
            absl::StatusCode::kNotFound);
  const std::string gpath = dir + "/generation_config.json";
  std::ofstream(gpath) << kQwen3Generation;
  Json graw;
  auto g = ReadGenerationConfig(gpath, &graw);
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE(WriteGenerationConfig(dir + "/g2.json", *g, graw).ok());
  auto g2 = ReadGenerationConfig(dir + "/g2.json");
  ASSERT_TRUE(g2.ok());
  EXPECT_EQ(g2->eos_token_ids, g->eos_token_ids);
  EXPECT_EQ(g2->top_p, g->top_p);
}

}  // namespace
}  // namespace verl::models
