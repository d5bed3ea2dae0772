// File: tools/model_merger_megatron_test.cc
//
// `model_merger --backend megatron` on dist_ckpt/ folders written by
// MegatronTrainState (tp = 1 in this process; then re-chunked over 3 ranks
// by rows, so every tensor is assembled from several files whose chunks
// cut through fused q/k/v groups and gate/up halves): the fp32 merge equals
// the HF tensors the model was loaded from, bit for bit (also for a value
// model with --is-value-model), `test` passes, --tie-word-embedding and
// sharded output work, and a table of bad inputs (missing rank file,
// metadata inconsistent with the files, truncated data file, wrong backend)
// each exit 1 with one line and leave nothing at --target_dir; the merge
// streams (peak RSS growth a small fraction of the model). The tp = 2
// round trip and the merge after training are in
// //verl/rl/workers:megatron_train_state_test.
#include <gtest/gtest.h>
#include <stdio.h>
#include <torch/types.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>

#include "absl/strings/str_split.h"
#include "verl/ckpt/dist_ckpt.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/core/test_util.h"
#include "verl/models/decoder.h"
#include "verl/models/hf_config.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/megatron/megatron_merger.h"
#include "verl/models/megatron/megatron_weights.h"
#include "verl/models/presets.h"
#include "verl/parallel/megatron/parallel_state.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/workers/megatron_train_state.h"

namespace verl {
namespace {

namespace fs = std::filesystem;

struct Model {
  models::ModelConfig config;
  std::map<std::string, at::Tensor> full;
};

Model MakeModel(bool value) {
  Model m;
  m.config = *models::MakePreset("tiny-qwen2");
  m.config.is_value_model = value;
  if (value) m.config.tie_word_embeddings = false;
  auto net = models::CreateModel(m.config, 7);
  for (const auto& p : net->named_parameters()) {
    m.full[p.key()] = p.value().detach().clone();
    // Norms start at one: make every value distinct.
    m.full[p.key()].add_(torch::randn_like(p.value()) * 0.1);
  }
  return m;
}

// Rewrites dir (a finalized dist_ckpt/) with every tensor's rows spread
// over `world` ranks (0-d tensors on rank 0).
void Rechunk(const std::string& dir, int world) {
  auto reader = *ckpt::DistCkptReader::Open(dir);
  std::vector<std::map<std::string, ckpt::DistSlice>> ranks(world);
  for (const auto& [key, m] : reader->metadata().tensors) {
    at::Tensor full = *reader->ReadFull(key);
    if (full.dim() == 0) {
      ranks[0][key] = {full, {}, {}};
      continue;
    }
    const int64_t per = (full.size(0) + world - 1) / world;
    for (int r = 0; r < world; ++r) {
      const int64_t b = std::min(full.size(0), r * per);
      const int64_t e = std::min(full.size(0), b + per);
      std::vector<int64_t> offsets(full.dim(), 0);
      offsets[0] = b;
      ranks[r][key] = {full.narrow(0, b, e - b).clone(), m.shape, offsets};
    }
  }
  const nlohmann::json common = reader->metadata().common;
  reader.reset();
  fs::remove_all(dir);
  for (int r = 0; r < world; ++r) {
    VERL_CHECK_OK(ckpt::SaveDistCkptRank(dir, r, world, ranks[r], common));
  }
  VERL_CHECK_OK(ckpt::FinalizeDistCkpt(dir, world));
}

// .../actor with dist_ckpt/ over `world` ranks and huggingface/config.json.
std::string SaveMegatron(const std::string& root, const Model& m, int world) {
  auto mpu = *parallel::megatron::ParallelState::Initialize(
      parallel::SingleProcessCommunicator(), {}, "merger_test");
  models::MegatronModelOptions options;
  auto model =
      std::make_shared<models::MegatronGPTModel>(m.config, options, mpu);
  VERL_CHECK_OK(
      models::LoadMegatronFromHf(models::HfSourceFromMap(m.full), model.get()));
  auto state = *rl::MegatronTrainState::Create(model, mpu, {}, true);
  const std::string actor = root + "/global_step_2/actor";
  VERL_CHECK_OK(state->SaveDistCheckpoint(actor, {}, {}));
  VERL_CHECK_OK(ckpt::FinalizeDistCkpt(actor + "/dist_ckpt", 1));
  VERL_CHECK_OK(core::MakeDirs(actor + "/huggingface"));
  VERL_CHECK_OK(
      models::WriteHfConfig(actor + "/huggingface/config.json", m.config));
  if (world > 1) Rechunk(actor + "/dist_ckpt", world);
  return actor;
}

int RunMerger(const std::string& args, std::string* out) {
  return core::testing::RunCommand("tools/model_merger " + args + " 2>&1", out);
}

void ExpectEqualFolder(const std::string& dir, const Model& m,
                       const std::string& skip = "") {
  auto got = ckpt::LoadSafetensorsFolder(dir);
  ASSERT_TRUE(got.ok()) << got.status();
  size_t want = 0;
  for (const auto& [name, t] : m.full) {
    if (name == skip) continue;
    ++want;
    ASSERT_TRUE(got->count(name)) << name;
    EXPECT_TRUE(at::equal(got->at(name), t)) << name;
  }
  EXPECT_EQ(got->size(), want);
}

TEST(ModelMergerMegatronTest, MergeEqualsTheLoadedWeightsBitForBit) {
  const Model m = MakeModel(false);
  const std::string root = core::testing::FreshTestDir("mm_megatron");
  const std::string actor = SaveMegatron(root, m, 3);
  std::string out;
  ASSERT_EQ(RunMerger("merge --backend megatron --local_dir " + actor +
                          " --target_dir " + root +
                          "/hf --dtype fp32"
                          " --use_cpu_initialization",
                      &out),
            0)
      << out;
  ExpectEqualFolder(root + "/hf", m);
  EXPECT_NE(out.find("from 3 shard files"), std::string::npos) << out;
  // test mode (verl's megatron tolerances) against the same weights.
  ASSERT_TRUE(ckpt::SaveSafetensorsFolder(root + "/hf", m.full).ok());
  EXPECT_EQ(RunMerger("test --backend megatron --local_dir " + actor +
                          " --test_hf_dir " + root + "/hf --dtype fp32",
                      &out),
            0)
      << out;
  EXPECT_NE(out.find("PASS"), std::string::npos) << out;
  // Sharded output with an index; tied embeddings leave lm_head out.
  ASSERT_EQ(RunMerger("merge --backend megatron --local_dir " + actor +
                          " --target_dir " + root +
                          "/tied --dtype fp32 --tie-word-embedding"
                          " --max_shard_size 20KB",
                      &out),
            0)
      << out;
  EXPECT_TRUE(fs::exists(root + "/tied/model.safetensors.index.json"));
  ExpectEqualFolder(root + "/tied", m, "lm_head.weight");
}

TEST(ModelMergerMegatronTest, ValueModel) {
  const Model m = MakeModel(true);
  ASSERT_TRUE(m.full.count("score.weight"));
  const std::string root = core::testing::FreshTestDir("mm_megatron_value");
  const std::string actor = SaveMegatron(root, m, 2);
  std::string out;
  ASSERT_EQ(RunMerger("merge --backend megatron --local_dir " + actor +
                          " --target_dir " + root +
                          "/hf --dtype fp32 --is-value-model",
                      &out),
            0)
      << out;
  ExpectEqualFolder(root + "/hf", m);
}

double StatusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) {
      return std::stod(line.substr(key.size())) / 1024;
    }
  }
  return -1;
}

// The merge streams: a ~75 MB model (16 layers) over 4 ranks grows the
// merging process's peak RSS (VmHWM of a forked child, after a warm-up
// merge) by a small fraction of the model.
TEST(ModelMergerMegatronTest, StreamingMergeKeepsPeakMemoryFarBelowTheModel) {
  Model m;
  m.config = *models::MakePreset("tiny-qwen2");
  m.config.hidden_size = 256;
  m.config.intermediate_size = 1024;
  m.config.num_hidden_layers = 16;
  m.config.num_attention_heads = 8;
  m.config.num_key_value_heads = 2;
  m.config.head_dim = 32;
  m.config.vocab_size = 4096;
  m.config.tie_word_embeddings = false;
  {
    auto net = models::CreateModel(m.config, 3);
    for (const auto& p : net->named_parameters()) {
      m.full[p.key()] = p.value().detach().clone();
    }
  }
  double model_mb = 0;
  for (const auto& [n, t] : m.full) model_mb += t.nbytes() / (1024.0 * 1024);
  const std::string root = core::testing::FreshTestDir("mm_megatron_rss");
  const std::string actor = SaveMegatron(root, m, 4);
  const std::string warm_actor =
      SaveMegatron(root + "/warm", MakeModel(false), 2);
  m.full.clear();
  ckpt::MergeOptions o;
  o.local_dir = actor;
  o.target_dir = root + "/hf";
  o.dtype = at::kBFloat16;
  o.max_shard_size = 20'000'000;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    ckpt::MergeOptions warm = o;
    warm.local_dir = warm_actor;
    warm.target_dir = root + "/warm_hf";
    bool ok = models::MergeMegatronCheckpoint(warm).ok();
    std::ofstream("/proc/self/clear_refs") << "5";
    const double before = StatusMb("VmRSS:");
    ok = ok && models::MergeMegatronCheckpoint(o).ok();
    double grown = ok ? StatusMb("VmHWM:") - before : -1;
    (void)!write(fds[1], &grown, sizeof(grown));
    _exit(0);
  }
  double grown = -1;
  ASSERT_EQ(read(fds[0], &grown, sizeof(grown)), sizeof(grown));
  waitpid(pid, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  ASSERT_GE(grown, 0) << "merge failed in the child";
  std::cout << "megatron merge peak RSS growth " << grown << " MB, model "
            << model_mb << " MB\n";
  EXPECT_LT(grown, 0.2 * model_mb);
  EXPECT_TRUE(fs::exists(root + "/hf/model.safetensors.index.json"));
}

struct BadInput {
  std::string name;
  std::function<void(const std::string& actor)> damage;
  std::string expect;  // substring of the one-line error
};

TEST(ModelMergerMegatronTest, BadInputsFailInOneLineAndLeaveNothing) {
  const Model m = MakeModel(false);
  const std::vector<BadInput> cases = {
      {"missing_rank_file",
       [](const std::string& a) { fs::remove(a + "/dist_ckpt/__1_0.distcp"); },
       "__1_0.distcp: missing (the data file of rank 1)"},
      {"metadata_inconsistent",
       [](const std::string& a) {
         const std::string p = a + "/dist_ckpt/.metadata";
         auto j = *core::ReadJsonFile(p);
         j["tensors"]["decoder.final_layernorm.weight"]["chunks"][0]["rank"] =
             1;
         VERL_CHECK_OK(core::WriteFileAtomic(p, j.dump()));
       },
       "__0_0.distcp: holds 30 chunks but"},
      {"truncated_data_file",
       [](const std::string& a) {
         const std::string p = a + "/dist_ckpt/__2_0.distcp";
         fs::resize_file(p, fs::file_size(p) - 100);
       },
       "__2_0.distcp"},
      {"no_dist_ckpt",
       [](const std::string& a) { fs::remove_all(a + "/dist_ckpt"); },
       "dist_ckpt: missing"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string root = core::testing::FreshTestDir("mm_bad_" + c.name);
    const std::string actor = SaveMegatron(root, m, 3);
    c.damage(actor);
    std::string out;
    EXPECT_EQ(RunMerger("merge --backend megatron --local_dir " + actor +
                            " --target_dir " + root + "/hf",
                        &out),
              1);
    EXPECT_NE(out.find(c.expect), std::string::npos) << out;
    std::vector<std::string> lines =
        absl::StrSplit(out, '\n', absl::SkipEmpty());
    EXPECT_EQ(lines.size(), 1u) << out;
    EXPECT_FALSE(fs::exists(root + "/hf"));
    for (const auto& e : fs::directory_iterator(root)) {
      EXPECT_EQ(e.path().filename().string().find("hf.tmp"), std::string::npos);
    }
  }
  // The wrong backend: a Megatron folder given to the FSDP merger.
  const std::string root = core::testing::FreshTestDir("mm_bad_backend");
  const std::string actor = SaveMegatron(root, m, 2);
  std::string out;
  EXPECT_EQ(RunMerger("merge --backend fsdp --local_dir " + actor +
                          " --target_dir " + root + "/hf",
                      &out),
            1);
  EXPECT_NE(out.find("holds a Megatron checkpoint (dist_ckpt/), not an FSDP "
                     "one: use --backend megatron"),
            std::string::npos)
      << out;
  EXPECT_FALSE(fs::exists(root + "/hf"));
}

}  // namespace
}  // namespace verl
