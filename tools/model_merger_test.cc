// File: tools/model_merger_test.cc
//
// The merger on checkpoints of a tiny preset model written by the
// CheckpointManager: bit-identical fp32 merges for 2 and 4 ranks, dtype
// conversion, shard splitting, LoRA extraction, the CLI (verl's dashed flags,
// test mode, megatron) and a table of bad inputs.
#include <gtest/gtest.h>
#include <stdio.h>
#include <torch/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "glog/logging.h"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/gguf/gguf.h"
#include "verl/ckpt/merger/checkpoint_merger.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/gguf_export.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/hf_config.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;
namespace fs = std::filesystem;

std::string Tmp(const std::string& name) {
  return core::testing::FreshTestDir("merger_" + name);
}

struct Model {
  models::ModelConfig config;
  std::map<std::string, at::Tensor> full;
};

const Model& TinyModel() {
  static const Model* model = [] {
    auto* m = new Model;
    m->config = *models::MakePreset("tiny-qwen2");
    auto net = models::CreateModel(m->config, 7);
    for (const auto& p : net->named_parameters()) {
      m->full[p.key()] = p.value().detach().clone();
    }
    // Norm weights are all ones at init: make every value distinct.
    for (auto& [name, t] : m->full) t.add_(torch::randn_like(t) * 0.1);
    return m;
  }();
  return *model;
}

// Writes global_step_1/actor for `world` ranks; returns the actor folder.
std::string SaveCheckpoint(const std::string& root, int world,
                           const std::map<std::string, at::Tensor>& full) {
  CheckpointManagerOptions opt{root};
  opt.save_contents = {"model"};
  CheckpointManager mgr(opt);
  const FsdpLayout layout = MakeFsdpLayout(full, world);
  RoleMeta meta;
  meta.layout = layout;
  meta.hf_config = *models::ModelConfigToHfJson(TinyModel().config);
  meta.generation_config = {{"eos_token_id", 2}, {"bos_token_id", 1}};
  VERL_CHECK_OK(mgr.BeginSave(1));
  for (int r = 0; r < world; ++r) {
    RoleShard shard;
    shard.model = ShardStateDict(full, layout, r);
    VERL_CHECK_OK(mgr.SaveShard(1, "actor", r, world, shard));
  }
  VERL_CHECK_OK(mgr.SaveRoleMeta(1, "actor", meta));
  VERL_CHECK_OK(mgr.CommitSave(1));
  return root + "/global_step_1/actor";
}

MergeOptions Options(const std::string& local, const std::string& target) {
  MergeOptions o;
  o.local_dir = local;
  o.target_dir = target;
  o.dtype = at::kFloat;
  o.extra_hf_files = models::HfTokenizerFiles();
  return o;
}

TEST(ModelMergerTest, MergesBitIdenticalFp32For2And4Ranks) {
  for (int world : {2, 4}) {
    const std::string root = Tmp("rt" + std::to_string(world));
    const std::string actor = SaveCheckpoint(root, world, TinyModel().full);
    std::ofstream(actor + "/huggingface/tokenizer.json") << "{}";
    auto stats = MergeFsdpCheckpoint(Options(actor, root + "/hf"));
    ASSERT_TRUE(stats.ok()) << stats.status();
    EXPECT_EQ(stats->world_size, world);
    // The project's HF loader reads the result.
    auto hf = models::LoadHfCheckpoint(root + "/hf");
    ASSERT_TRUE(hf.ok()) << hf.status();
    EXPECT_EQ(hf->config.hidden_size, TinyModel().config.hidden_size);
    EXPECT_TRUE(fs::exists(root + "/hf/generation_config.json"));
    EXPECT_TRUE(fs::exists(root + "/hf/tokenizer.json"));
    ASSERT_EQ(hf->tensors.size(), TinyModel().full.size());
    for (const auto& [name, t] : TinyModel().full) {
      ASSERT_TRUE(hf->tensors.count(name)) << name;
      EXPECT_EQ(hf->tensors.at(name).scalar_type(), at::kFloat);
      EXPECT_TRUE(at::equal(hf->tensors.at(name), t)) << name;
    }
    for (const auto& e : fs::directory_iterator(root)) {
      EXPECT_EQ(e.path().filename().string().find("hf.tmp-merge-"),
                std::string::npos)
          << e.path();
    }
  }
}

// A killed merge's scratch folder goes at the next merge into that target;
// other folders stay.
TEST(ModelMergerTest, KilledMergeScratchFoldersAreRemoved) {
  const std::string root = Tmp("killed");
  const std::string actor = SaveCheckpoint(root, 2, TinyModel().full);
  const pid_t child = fork();  // a pid that is gone
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  const std::string mine = core::ProcessTempName("hf.tmp-merge-");
  const std::string dead =
      root + "/" + mine.substr(0, mine.rfind('-') + 1) + std::to_string(child);
  const std::string legacy = root + "/hf.tmp-merge-" + std::to_string(child);
  for (const std::string& d :
       {dead, legacy, root + "/hf.tmp-merge-notes",
        root + "/other.tmp-merge-" + std::to_string(child)}) {
    fs::create_directories(d);
  }
  ASSERT_TRUE(MergeFsdpCheckpoint(Options(actor, root + "/hf/")).ok());
  EXPECT_TRUE(fs::exists(root + "/hf/config.json"));
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_FALSE(fs::exists(legacy));
  EXPECT_TRUE(fs::exists(root + "/hf.tmp-merge-notes"));
  EXPECT_TRUE(fs::exists(root + "/other.tmp-merge-" + std::to_string(child)));
}

TEST(ModelMergerTest, DtypeShardingAndTiedEmbeddings) {
  const std::string root = Tmp("dtype");
  const std::string actor = SaveCheckpoint(root, 2, TinyModel().full);
  MergeOptions o = Options(actor, root + "/hf");
  o.dtype = at::kBFloat16;
  o.max_shard_size = 20000;
  o.tie_word_embedding = true;
  ASSERT_TRUE(MergeFsdpCheckpoint(o).ok());
  EXPECT_TRUE(fs::exists(root + "/hf/" + std::string(kSafetensorsIndexFile)));
  auto tensors = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_FALSE(tensors->count("lm_head.weight"));
  for (const auto& [name, t] : *tensors) {
    EXPECT_EQ(t.scalar_type(), at::kBFloat16);
    EXPECT_TRUE(at::equal(t, TinyModel().full.at(name).to(at::kBFloat16)))
        << name;
  }
}

TEST(ModelMergerTest, LoraKeysGoToAPeftAdapter) {
  std::map<std::string, at::Tensor> full;
  full["base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight"] =
      torch::randn({8, 8});
  full["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"] =
      torch::randn({4, 8});
  full["base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight"] =
      torch::randn({8, 4});
  const std::string root = Tmp("lora");
  const std::string actor = SaveCheckpoint(root, 2, full);
  auto stats = MergeFsdpCheckpoint(Options(actor, root + "/hf"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->num_lora_tensors, 2);
  auto base = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(base.ok());
  EXPECT_TRUE(at::equal(
      base->at("model.layers.0.self_attn.q_proj.weight"),
      full.at("base_model.model.model.layers.0.self_attn.q_proj.base_layer."
              "weight")));
  auto adapter =
      core::ReadJsonFile(root + "/hf/lora_adapter/adapter_config.json");
  ASSERT_TRUE(adapter.ok());
  EXPECT_EQ((*adapter)["r"], 4);
  EXPECT_EQ((*adapter)["target_modules"], nlohmann::json({"q_proj"}));
  EXPECT_TRUE(fs::exists(root + "/hf/lora_adapter/adapter_model.safetensors"));
}

TEST(ModelMergerTest, MergeLoraFoldsTheAdapterIntoTheBase) {
  const std::string pre = "base_model.model.model.layers.0.self_attn.q_proj.";
  std::map<std::string, at::Tensor> full;
  full[pre + "base_layer.weight"] = torch::randn({8, 6});
  full[pre + "lora_A.weight"] = torch::randn({4, 6});
  full[pre + "lora_B.weight"] = torch::randn({8, 4});
  full["base_model.model.model.norm.weight"] = torch::randn({6});
  const std::string root = Tmp("lora_merge");
  const std::string actor = SaveCheckpoint(root, 2, full);
  MergeOptions o = Options(actor, root + "/hf");
  o.dtype = at::kFloat;
  o.merge_lora = true;
  EXPECT_THAT(
      MergeFsdpCheckpoint(o),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "--merge_lora needs --lora_alpha > 0"));  // lora_alpha missing
  o.lora_alpha = 16;
  auto stats = MergeFsdpCheckpoint(o);
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto merged = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(merged.ok());
  // W + alpha / r * B @ A with r = 4, computed here independently.
  const at::Tensor want = full[pre + "base_layer.weight"] +
                          (16.0 / 4) * full[pre + "lora_B.weight"].matmul(
                                           full[pre + "lora_A.weight"]);
  EXPECT_TRUE(at::allclose(merged->at("model.layers.0.self_attn.q_proj.weight"),
                           want, 1e-5, 1e-6));
  EXPECT_TRUE(at::equal(merged->at("model.norm.weight"),
                        full["base_model.model.model.norm.weight"]));
  EXPECT_TRUE(fs::exists(root + "/hf/lora_adapter/adapter_model.safetensors"));
}

TEST(ModelMergerTest, PlainVerlStyleCheckpointWithoutLayout) {
  // As verl writes it: fsdp_config.json without shard layout, one rank.
  const std::string root = Tmp("plain");
  const std::string actor = SaveCheckpoint(root, 1, TinyModel().full);
  ASSERT_TRUE(core::WriteFileAtomic(actor + "/fsdp_config.json",
                                    R"({"FSDP_version": 1, "world_size": 1})")
                  .ok());
  auto stats = MergeFsdpCheckpoint(Options(actor, root + "/hf"));
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto tensors = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(tensors.ok());
  for (const auto& [name, t] : TinyModel().full) {
    EXPECT_TRUE(at::equal(tensors->at(name), t)) << name;
  }
}

struct BadInput {
  std::string name;
  std::function<void(const std::string& actor)> damage;
  std::string expect;  // substring of the error
};

TEST(ModelMergerTest, BadInputsNameTheFileAndLeaveNothing) {
  const std::vector<BadInput> cases = {
      {"no_fsdp_config",
       [](const std::string& a) { fs::remove(a + "/fsdp_config.json"); },
       "fsdp_config.json not found: expected"},
      {"missing_shard",
       [](const std::string& a) {
         fs::remove(a + "/model_world_size_2_rank_1.pt");
       },
       "missing shard file"},
      {"extra_shard",
       [](const std::string& a) {
         fs::copy_file(a + "/model_world_size_2_rank_1.pt",
                       a + "/model_world_size_4_rank_3.pt");
       },
       "model_world_size_4_rank_3.pt: fsdp_config.json says world size 2"},
      {"world_mismatch",
       [](const std::string& a) {
         VERL_CHECK_OK(
             core::WriteFileAtomic(a + "/fsdp_config.json",
                                   R"({"FSDP_version": 2, "world_size": 1})"));
       },
       "unexpected shard file"},
      {"truncated",
       [](const std::string& a) {
         const std::string p = a + "/model_world_size_2_rank_1.pt";
         fs::resize_file(p, fs::file_size(p) / 2);
       },
       "model_world_size_2_rank_1.pt: not a readable PyTorch"},
      {"corrupted",
       [](const std::string& a) {
         const std::string p = a + "/model_world_size_2_rank_0.pt";
         std::string b = *core::ReadFile(p);
         b[b.size() / 3] ^= 0x10;
         VERL_CHECK_OK(core::WriteFileAtomic(p, b));
       },
       "model_world_size_2_rank_0.pt: not a readable PyTorch"},
      {"shape_mismatch",
       [](const std::string& a) {
         const std::string p = a + "/model_world_size_2_rank_1.pt";
         auto d = *LoadPtTensorDict(p);
         d["model.norm.weight"] = torch::zeros({1});
         VERL_CHECK_OK(SavePtTensorDict(p, d));
       },
       "'model.norm.weight' rank 1: chunk shape [1]"},
      {"no_config",
       [](const std::string& a) { fs::remove(a + "/huggingface/config.json"); },
       "no --hf_model_path"},
  };
  for (const BadInput& c : cases) {
    const std::string root = Tmp("bad_" + c.name);
    const std::string actor = SaveCheckpoint(root, 2, TinyModel().full);
    c.damage(actor);
    auto stats = MergeFsdpCheckpoint(Options(actor, root + "/hf"));
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(stats.ok()) << c.name;
    EXPECT_NE(stats.status().message().find(c.expect), std::string::npos)
        << c.name << ": " << stats.status();
    EXPECT_FALSE(fs::exists(root + "/hf")) << c.name;
    for (const auto& e : fs::directory_iterator(root)) {
      EXPECT_EQ(e.path().filename().string().find("hf.tmp"), std::string::npos)
          << c.name;
    }
  }
}

// Runs the merger binary; returns its exit code and fills `out`.
int RunMerger(const std::string& args, std::string* out) {
  return core::testing::RunCommand("tools/model_merger " + args + " 2>&1", out);
}

// config.json names the merged dtype (as transformers' save_pretrained of
// the bf16 model would), and repeated eos ids are written once.
TEST(ModelMergerTest, ConfigNamesTheMergedDtypeAndUniqueEosIds) {
  const std::string root = Tmp("meta");
  const std::string actor = SaveCheckpoint(root, 2, TinyModel().full);
  // What the trainer wrote before: fp32 and the preset's eos id repeated by
  // the tokenizer's.
  nlohmann::json config =
      *core::ReadJsonFile(actor + "/huggingface/config.json");
  config["torch_dtype"] = "float32";
  config["eos_token_id"] = {294, 294};
  config["text_config"] = {{"torch_dtype", "float32"}};
  VERL_CHECK_OK(core::WriteFileAtomic(actor + "/huggingface/config.json",
                                      config.dump(2)));
  VERL_CHECK_OK(core::WriteFileAtomic(
      actor + "/huggingface/generation_config.json",
      nlohmann::json({{"eos_token_id", {2, 2, 3}}, {"bos_token_id", 1}})
          .dump()));
  for (const auto& [dtype, name] :
       std::vector<std::pair<at::ScalarType, std::string>>{
           {at::kBFloat16, "bfloat16"},
           {at::kHalf, "float16"},
           {at::kFloat, "float32"}}) {
    MergeOptions o = Options(actor, root + "/hf_" + name);
    o.dtype = dtype;
    ASSERT_TRUE(MergeFsdpCheckpoint(o).ok()) << name;
    auto merged = core::ReadJsonFile(o.target_dir + "/config.json");
    ASSERT_TRUE(merged.ok()) << merged.status();
    EXPECT_EQ((*merged)["torch_dtype"], name);
    EXPECT_EQ((*merged)["text_config"]["torch_dtype"], name);
    EXPECT_EQ((*merged)["eos_token_id"], 294);
    auto gen = core::ReadJsonFile(o.target_dir + "/generation_config.json");
    ASSERT_TRUE(gen.ok()) << gen.status();
    EXPECT_EQ((*gen)["eos_token_id"], nlohmann::json({2, 3}));
    // The project's loader agrees.
    auto hf = models::LoadHfCheckpoint(o.target_dir);
    ASSERT_TRUE(hf.ok()) << hf.status();
    EXPECT_EQ(hf->config.torch_dtype, name);
    EXPECT_EQ(hf->config.eos_token_ids, std::vector<int64_t>({294}));
  }
  // transformers v5 spells the key "dtype": kept that way.
  config.erase("torch_dtype");
  config["dtype"] = "float32";
  VERL_CHECK_OK(core::WriteFileAtomic(actor + "/huggingface/config.json",
                                      config.dump(2)));
  std::string out;
  ASSERT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/v5 --dtype bfloat16",
                      &out),
            0)
      << out;
  auto v5 = core::ReadJsonFile(root + "/v5/config.json");
  ASSERT_TRUE(v5.ok()) << v5.status();
  EXPECT_EQ((*v5)["dtype"], "bfloat16");
  EXPECT_FALSE(v5->contains("torch_dtype"));
  // The writer itself no longer repeats ids (the trainer's checkpoints).
  models::ModelConfig repeated = TinyModel().config;
  repeated.eos_token_ids = {294, 294};
  EXPECT_EQ((*models::ModelConfigToHfJson(repeated))["eos_token_id"], 294);
  repeated.eos_token_ids = {294, 7, 294};
  EXPECT_EQ((*models::ModelConfigToHfJson(repeated))["eos_token_id"],
            nlohmann::json({294, 7}));
}

TEST(ModelMergerTest, CommandLine) {
  const std::string root = Tmp("cli");
  const std::string actor = SaveCheckpoint(root, 4, TinyModel().full);
  std::string out;
  ASSERT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/ref --dtype=fp32",
                      &out),
            0)
      << out;
  // Test mode against the fp32 reference: pass; bf16 or a changed tensor: fail.
  EXPECT_EQ(RunMerger("test --backend fsdp --local_dir " + actor +
                          " --test_hf_dir " + root + "/ref --dtype fp32",
                      &out),
            0)
      << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  EXPECT_EQ(RunMerger("test --backend fsdp --local_dir " + actor +
                          " --test_hf_dir " + root + "/ref",
                      &out),
            1);
  EXPECT_NE(out.find("dtype bfloat16 vs float32"), std::string::npos) << out;
  auto ref = *LoadSafetensorsFolder(root + "/ref");
  ref["model.norm.weight"] = ref["model.norm.weight"].clone() + 1e-3;
  fs::create_directories(root + "/ref2");
  VERL_CHECK_OK(SaveSafetensorsFolder(root + "/ref2", ref));
  EXPECT_EQ(RunMerger("test --backend fsdp --local_dir " + actor +
                          " --test_hf_dir " + root + "/ref2 --dtype fp32",
                      &out),
            1);
  EXPECT_NE(out.find("model.norm.weight: values differ"), std::string::npos)
      << out;
  // verl's dashed flag spelling.
  EXPECT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root +
                          "/tied --tie-word-embedding"
                          " --use_cpu_initialization --max_shard_size 10KB",
                      &out),
            0)
      << out;
  auto tied = LoadSafetensorsFolder(root + "/tied");
  ASSERT_TRUE(tied.ok()) << tied.status();
  EXPECT_FALSE(tied->count("lm_head.weight"));
  // The wrong backend: an FSDP folder given to the Megatron merger.
  EXPECT_EQ(RunMerger("merge --backend megatron --local_dir " + actor +
                          " --target_dir " + root + "/x",
                      &out),
            1);
  EXPECT_NE(out.find("holds an FSDP checkpoint"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(root + "/x"));
  EXPECT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/x --dtype int3",
                      &out),
            2);
  EXPECT_EQ(RunMerger("merge --backend fsdp --local_dir " + root +
                          " --target_dir " + root + "/x",
                      &out),
            1);
  EXPECT_NE(out.find("fsdp_config.json not found"), std::string::npos) << out;
  EXPECT_FALSE(fs::exists(root + "/x"));
}

// --output_format=gguf: the checkpoint merged (fp32) and exported is the
// same file, byte for byte, as //tools:export_gguf's export of the fp32 HF
// merge; an existing model.gguf is kept unless --overwrite; bad types and
// test mode are refused.
TEST(ModelMergerTest, GgufOutputEqualsExportOfTheFp32Merge) {
  const std::string root = Tmp("gguf");
  const std::string actor = SaveCheckpoint(root, 2, TinyModel().full);
  VERL_CHECK_OK(
      models::MakeBuiltinTokenizer().SaveToDirectory(actor + "/huggingface"));
  std::string out;
  ASSERT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/ref --dtype=fp32",
                      &out),
            0)
      << out;
  for (const char* type : {"f32", "q8_0"}) {
    const std::string dir = root + "/gguf_" + type;
    ASSERT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                            " --target_dir " + dir +
                            " --output_format gguf --gguf_outtype " + type,
                        &out),
              0)
        << out;
    models::GgufExportOptions o;
    o.type = *ParseGgmlType(type);
    o.name = std::string("gguf_") + type;
    VERL_CHECK_OK(
        models::ExportHfFolderToGguf(root + "/ref", root + "/want.gguf", o));
    EXPECT_EQ(*core::ReadFile(dir + "/model.gguf"),
              *core::ReadFile(root + "/want.gguf"))
        << type;
    // Nothing but the GGUF file is left behind.
    EXPECT_EQ(
        std::distance(fs::directory_iterator(dir), fs::directory_iterator()),
        1);
  }
  const std::string existing = root + "/gguf_f32/model.gguf";
  const std::string before = *core::ReadFile(existing);
  EXPECT_EQ(
      RunMerger("merge --backend fsdp --local_dir " + actor + " --target_dir " +
                    root + "/gguf_f32 --output_format gguf --gguf_outtype f16",
                &out),
      1);
  EXPECT_NE(out.find("exists (pass --overwrite"), std::string::npos) << out;
  EXPECT_EQ(*core::ReadFile(existing), before);
  EXPECT_EQ(
      RunMerger("merge --backend fsdp --local_dir " + actor + " --target_dir " +
                    root + "/g --output_format gguf --gguf_outtype q3",
                &out),
      2);
  EXPECT_EQ(
      RunMerger("merge --backend fsdp --local_dir " + actor + " --target_dir " +
                    root + "/g --output_format gguf --dtype fp16",
                &out),
      2);
  EXPECT_NE(out.find("--gguf_outtype"), std::string::npos) << out;
  EXPECT_EQ(
      RunMerger("test --backend fsdp --local_dir " + actor + " --test_hf_dir " +
                    root + "/ref --output_format gguf",
                &out),
      2);
  EXPECT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/g --output_format onnx",
                      &out),
            2);
  EXPECT_FALSE(fs::exists(root + "/g"));
}

}  // namespace
}  // namespace verl::ckpt
