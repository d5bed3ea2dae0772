#include "verl/models/hf_checkpoint.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace verl::models {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using TensorMap = std::map<std::string, at::Tensor>;

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

std::string TempDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / "hf_ckpt" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.nbytes()) == 0;
}

// A tiny Qwen2-shaped config (with keys verl-cpp does not model).
std::string TinyConfig(bool tied) {
  return std::string(R"({"architectures": ["Qwen2ForCausalLM"],
    "model_type": "qwen2", "vocab_size": 32, "hidden_size": 16,
    "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "max_position_embeddings": 128,
    "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 128,
    "use_sliding_window": false, "max_window_layers": 2,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32",
    "use_mrope": false, "transformers_version": "4.43.1",
    "tie_word_embeddings": )") +
         (tied ? "true" : "false") + "}";
}

// HF tensor names and shapes of TinyConfig, random values.
TensorMap TinyWeights(at::ScalarType dtype, bool tied) {
  at::manual_seed(7);
  TensorMap m;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    m[name] = at::randn(shape).to(dtype);
  };
  add("model.embed_tokens.weight", {32, 16});
  for (int l = 0; l < 2; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", {16, 16});
    add(p + "self_attn.q_proj.bias", {16});
    add(p + "self_attn.k_proj.weight", {8, 16});
    add(p + "self_attn.k_proj.bias", {8});
    add(p + "self_attn.v_proj.weight", {8, 16});
    add(p + "self_attn.v_proj.bias", {8});
    add(p + "self_attn.o_proj.weight", {16, 16});
    add(p + "mlp.gate_proj.weight", {24, 16});
    add(p + "mlp.up_proj.weight", {24, 16});
    add(p + "mlp.down_proj.weight", {16, 24});
    add(p + "input_layernorm.weight", {16});
    add(p + "post_attention_layernorm.weight", {16});
  }
  add("model.norm.weight", {16});
  if (!tied) add("lm_head.weight", {32, 16});
  return m;
}

const char kGeneration[] =
    R"({"bos_token_id": 1, "eos_token_id": [2, 3], "do_sample": true,
        "temperature": 0.7, "top_p": 0.8, "top_k": 20,
        "repetition_penalty": 1.05, "transformers_version": "4.43.1"})";

// Writes a source HF folder as the Hub would ship it.
void MakeHfFolder(const std::string& dir, const TensorMap& weights, bool tied,
                  uint64_t max_shard_size) {
  WriteText(dir + "/config.json", TinyConfig(tied));
  WriteText(dir + "/generation_config.json", kGeneration);
  WriteText(dir + "/tokenizer.json", R"({"version": "1.0", "model": {}})");
  WriteText(dir + "/tokenizer_config.json", R"({"model_max_length": 128})");
  WriteText(dir + "/merges.txt", "#version: 0.2\nh e\n");
  WriteText(dir + "/chat_template.jinja", "{{ messages }}");
  WriteText(dir + "/README.md", "not copied");
  ASSERT_TRUE(ckpt::SaveSafetensorsFolder(dir, weights, max_shard_size).ok());
}

void ExpectSameTensors(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(SameBytes(t, b.at(name))) << name;
  }
}

class HfRoundTrip
    : public ::testing::TestWithParam<std::tuple<at::ScalarType, bool>> {};

TEST_P(HfRoundTrip, LoadSaveLoadIsBitIdentical) {
  const auto [dtype, sharded] = GetParam();
  const uint64_t shard = sharded ? 2000 : ckpt::kDefaultMaxShardSize;
  const std::string root = TempDir(absl::StrCat(
      "rt_", c10::toString(dtype), sharded ? "_sharded" : "_single"));
  const std::string src = root + "/src";
  fs::create_directories(src);
  const TensorMap weights = TinyWeights(dtype, /*tied=*/false);
  MakeHfFolder(src, weights, false, shard);

  auto a = LoadHfCheckpoint(src);
  ASSERT_TRUE(a.ok()) << a.status();
  ExpectSameTensors(weights, a->tensors);
  EXPECT_EQ(a->config.hidden_size, 16);
  EXPECT_TRUE(a->config.attention_bias);
  ASSERT_TRUE(a->generation.has_value());
  EXPECT_EQ(a->generation->eos_token_ids, (std::vector<int64_t>{2, 3}));

  HfSaveOptions options;
  options.max_shard_size = shard;
  options.tokenizer_source_dir = src;
  const std::string out1 = root + "/out1";
  ASSERT_TRUE(SaveHfCheckpoint(out1, *a, options).ok());
  std::set<std::string> files = Listing(out1);
  for (const char* f :
       {"config.json", "generation_config.json", "tokenizer.json",
        "tokenizer_config.json", "merges.txt", "chat_template.jinja"}) {
    EXPECT_TRUE(files.count(f)) << f;
    if (std::string(f).find("config.json") == std::string::npos) {
      EXPECT_EQ(ReadAll(out1 + "/" + f), ReadAll(src + "/" + f)) << f;
    }
  }
  EXPECT_FALSE(files.count("README.md"));
  EXPECT_EQ(files.count(ckpt::kSafetensorsIndexFile), sharded ? 1u : 0u);
  EXPECT_EQ(files.count(ckpt::kSafetensorsSingleFile), sharded ? 0u : 1u);
  // Same shard layout and bytes as the source folder (same writer rules).
  for (const std::string& f : Listing(src)) {
    if (f.find(".safetensors") != std::string::npos) {
      EXPECT_EQ(ReadAll(out1 + "/" + f), ReadAll(src + "/" + f)) << f;
    }
  }
  // config.json keeps unknown keys; written as transformers does.
  // (keys the source lacked, e.g. hidden_act, are written with their values)
  auto expected_config = ModelConfigToHfJson(a->config, a->config_json);
  ASSERT_TRUE(expected_config.ok());
  EXPECT_TRUE(expected_config->contains("hidden_act"));
  EXPECT_EQ(ReadAll(out1 + "/config.json"), expected_config->dump(2) + "\n");
  EXPECT_THAT(ReadAll(out1 + "/config.json"), HasSubstr("\"use_mrope\""));

  auto b = LoadHfCheckpoint(out1);
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameTensors(weights, b->tensors);
  EXPECT_EQ(b->config_json, *expected_config);
  EXPECT_EQ(b->generation_json, a->generation_json);

  const std::string out2 = root + "/out2";
  options.tokenizer_source_dir = out1;
  ASSERT_TRUE(SaveHfCheckpoint(out2, *b, options).ok());
  EXPECT_EQ(Listing(out2), Listing(out1));
  for (const std::string& f : Listing(out1)) {
    EXPECT_EQ(ReadAll(out2 + "/" + f), ReadAll(out1 + "/" + f)) << f;
  }
  // Nothing but the three folders: no temporary siblings left behind.
  EXPECT_EQ(Listing(root), (std::set<std::string>{"src", "out1", "out2"}));
}

INSTANTIATE_TEST_SUITE_P(DtypesAndLayouts, HfRoundTrip,
                         ::testing::Combine(::testing::Values(at::kFloat,
                                                              at::kBFloat16),
                                            ::testing::Bool()));

TEST(HfCheckpointTest, TiedHeadIsNotStoredAndIsFilledOnLoadInto) {
  const std::string root = TempDir("tied");
  TensorMap weights = TinyWeights(at::kFloat, /*tied=*/true);
  weights["lm_head.weight"] = weights["model.embed_tokens.weight"];
  HfCheckpoint ckpt;
  auto config =
      ModelConfigFromHfJson(nlohmann::json::parse(TinyConfig(true)), "c");
  ASSERT_TRUE(config.ok());
  ckpt.config = *config;
  ckpt.tensors = weights;
  ASSERT_TRUE(SaveHfCheckpoint(root + "/m", ckpt).ok());
  auto loaded = LoadHfCheckpoint(root + "/m");
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_FALSE(loaded->tensors.count("lm_head.weight"));
  EXPECT_FALSE(loaded->generation.has_value());
  EXPECT_FALSE(fs::exists(root + "/m/generation_config.json"));

  TensorMap dst;
  for (const auto& [name, t] : weights) dst[name] = at::zeros_like(t);
  ASSERT_TRUE(LoadHfWeightsInto(root + "/m", &dst).ok());
  EXPECT_TRUE(
      at::equal(dst["lm_head.weight"], weights["model.embed_tokens.weight"]));
  // Untied configs store the head even when equal.
  ckpt.config.tie_word_embeddings = false;
  ASSERT_TRUE(SaveHfCheckpoint(root + "/u", ckpt).ok());
  EXPECT_TRUE(LoadHfCheckpoint(root + "/u")->tensors.count("lm_head.weight"));
}

TEST(HfCheckpointTest, LoadIntoCopiesConvertsAndChecksNames) {
  const std::string dir = TempDir("into");
  const TensorMap weights = TinyWeights(at::kFloat, false);
  MakeHfFolder(dir, weights, false, 2000);

  TensorMap dst;
  for (const auto& [name, t] : weights) {
    dst[name] = at::zeros(t.sizes(), at::kBFloat16).requires_grad_(true);
  }
  const void* before = dst["model.norm.weight"].data_ptr();
  ASSERT_TRUE(LoadHfWeightsInto(dir, &dst).ok());
  EXPECT_EQ(dst["model.norm.weight"].data_ptr(), before);  // in place
  for (const auto& [name, t] : weights) {
    EXPECT_TRUE(at::equal(dst[name].detach(), t.to(at::kBFloat16))) << name;
  }

  TensorMap wrong = {{"model.norm.weight", at::zeros({17})}};
  EXPECT_THAT(Msg(LoadHfWeightsInto(dir, &wrong,
                                    {/*allow_missing=*/false,
                                     /*allow_unexpected=*/true})),
              HasSubstr("tensor 'model.norm.weight' has shape [16], expected "
                        "[17]"));
  TensorMap partial = {{"model.norm.weight", at::zeros({16})}};
  EXPECT_THAT(Msg(LoadHfWeightsInto(dir, &partial)),
              HasSubstr("unexpected tensors: lm_head.weight"));
  EXPECT_TRUE(LoadHfWeightsInto(dir, &partial, {false, true}).ok());
  EXPECT_TRUE(
      at::equal(partial["model.norm.weight"], weights.at("model.norm.weight")));
  TensorMap extra = dst;
  extra["value_head.weight"] = at::zeros({1, 16});
  EXPECT_THAT(Msg(LoadHfWeightsInto(dir, &extra)),
              HasSubstr("missing tensors: value_head.weight"));
  EXPECT_TRUE(LoadHfWeightsInto(dir, &extra, {true, false}).ok());
}

TEST(HfCheckpointTest, SaveReplacesExistingFolderOrRefuses) {
  const std::string root = TempDir("replace");
  HfCheckpoint ckpt;
  auto config =
      ModelConfigFromHfJson(nlohmann::json::parse(TinyConfig(false)), "c");
  ASSERT_TRUE(config.ok());
  ckpt.config = *config;
  ckpt.tensors = TinyWeights(at::kFloat, false);
  const std::string dir = root + "/model";
  fs::create_directories(dir);
  WriteText(dir + "/stale.bin", "old");
  ASSERT_TRUE(SaveHfCheckpoint(dir, ckpt).ok());
  EXPECT_FALSE(fs::exists(dir + "/stale.bin"));
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  HfSaveOptions no_overwrite;
  no_overwrite.overwrite = false;
  EXPECT_EQ(SaveHfCheckpoint(dir, ckpt, no_overwrite).code(),
            absl::StatusCode::kAlreadyExists);
  // A failing save leaves neither the target nor a temporary folder.
  ckpt.tensors["bad"] = at::zeros({2}, at::kComplexFloat);
  EXPECT_THAT(Msg(SaveHfCheckpoint(root + "/new", ckpt)), HasSubstr("'bad'"));
  EXPECT_EQ(Listing(root), std::set<std::string>{"model"});
  // Nested target folders are created.
  ckpt.tensors.erase("bad");
  EXPECT_TRUE(SaveHfCheckpoint(root + "/a/b/hf", ckpt).ok());
}

TEST(HfCheckpointTest, LoadErrorsNameTheFile) {
  const std::string dir = TempDir("errors");
  auto none = LoadHfCheckpoint(dir);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Msg(none.status()), HasSubstr("config.json"));

  WriteText(dir + "/config.json",
            R"({"architectures": ["BertModel"], "hidden_size": 8})");
  EXPECT_THAT(Msg(LoadHfCheckpoint(dir).status()),
              HasSubstr("unsupported architecture 'BertModel' (supported: "));

  WriteText(dir + "/config.json", TinyConfig(false));
  EXPECT_THAT(
      Msg(LoadHfCheckpoint(dir).status()),
      HasSubstr("no model.safetensors or model.safetensors.index.json"));
  EXPECT_TRUE(LoadHfConfigs(dir).ok());

  WriteText(dir + "/model.safetensors", "garbage!");
  EXPECT_THAT(Msg(LoadHfCheckpoint(dir).status()),
              HasSubstr("model.safetensors: header length"));
  WriteText(dir + "/generation_config.json", R"({"eos_token_id": "x"})");
  EXPECT_THAT(Msg(LoadHfConfigs(dir).status()),
              HasSubstr("generation_config.json: 'eos_token_id'"));
}

}  // namespace
}  // namespace verl::models
