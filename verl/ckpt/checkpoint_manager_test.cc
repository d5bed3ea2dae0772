// File: verl/ckpt/checkpoint_manager_test.cc
#include "verl/ckpt/checkpoint_manager.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/full.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;
namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(t ? t : "/tmp") + "/mgr_" + name;
  fs::remove_all(dir);
  return dir;
}

std::map<std::string, at::Tensor> FullModel(int64_t seed) {
  at::manual_seed(seed);
  return {{"model.embed_tokens.weight", at::randn({11, 6})},
          {"model.norm.weight", at::randn({6})},
          {"lm_head.weight", at::randn({11, 6}).to(at::kBFloat16)},
          {"scale", at::scalar_tensor(2.0)}};
}

// Every rank's RoleSave for a full model, as the trainer would build it.
std::vector<RoleSave> MakeRoleSaves(
    const std::map<std::string, at::Tensor>& full, int world) {
  std::vector<RoleSave> out(world);
  const FsdpLayout layout = MakeFsdpLayout(full, world);
  for (int r = 0; r < world; ++r) {
    out[r].shard.model = ShardStateDict(full, layout, r);
    for (const auto& [name, t] : out[r].shard.model) {
      out[r].shard.optimizer_group.param_names.push_back(name);
      out[r].shard.optimizer[name + ".exp_avg"] = t.to(at::kFloat) * 0.5;
      out[r].shard.optimizer[name + ".exp_avg_sq"] = t.to(at::kFloat) * 0.25;
      out[r].shard.optimizer[name + ".step"] = at::scalar_tensor(3, at::kLong);
    }
    out[r].shard.extra.lr_scheduler_step = 7;
    out[r].shard.extra.rng["cpu"] = CpuRngState();
    out[r].shard.extra.user = {{"rank", r}};
    out[r].meta.layout = layout;
    out[r].meta.hf_config = {{"architectures", {"Qwen2ForCausalLM"}},
                             {"model_type", "qwen2"}};
    out[r].meta.generation_config = {{"eos_token_id", 2}};
    out[r].meta.hf_model = full;
  }
  return out;
}

// Python's plain pickle (no torch) on the data.pkl record of a .pt zip,
// printed as JSON with sorted keys.
std::string PythonUnpickle(const std::string& path) {
  const std::string cmd =
      "python3 -c \"import json, pickle, sys, zipfile; "
      "z = zipfile.ZipFile(sys.argv[1]); "
      "n = [x for x in z.namelist() if x.endswith('/data.pkl')][0]; "
      "print(json.dumps(pickle.loads(z.read(n)), sort_keys=True))\" " +
      path + " 2>&1";
  return core::testing::RunAndCapture(cmd);
}

// Saves all ranks in this process, in the protocol's order.
absl::Status SaveAllRanks(CheckpointManager& mgr, int64_t step,
                          const std::map<std::string, at::Tensor>& full,
                          int world,
                          const std::vector<std::string>& roles = {"actor"}) {
  const std::vector<RoleSave> saves = MakeRoleSaves(full, world);
  if (auto s = mgr.BeginSave(step); !s.ok()) return s;
  for (const std::string& role : roles) {
    for (int r = 0; r < world; ++r) {
      if (auto s = mgr.SaveShard(step, role, r, world, saves[r].shard); !s.ok())
        return s;
    }
    if (auto s = mgr.SaveRoleMeta(step, role, saves[0].meta); !s.ok()) return s;
  }
  if (auto s = mgr.SaveDataState(step, {{"cursor", step * 10}}); !s.ok())
    return s;
  return mgr.CommitSave(step);
}

TEST(CheckpointManagerTest, LayoutMatchesVerl) {
  const std::string root = FreshDir("layout");
  CheckpointManagerOptions opt{root};
  opt.save_contents.insert("hf_model");
  CheckpointManager mgr(opt);
  ASSERT_TRUE(SaveAllRanks(mgr, 5, FullModel(1), 2, {"actor", "critic"}).ok());
  EXPECT_EQ(*core::ReadFile(root + "/latest_checkpointed_iteration.txt"), "5");
  for (const std::string role : {"actor", "critic"}) {
    const std::string d = root + "/global_step_5/" + role + "/";
    for (int r = 0; r < 2; ++r) {
      const std::string suffix =
          "_world_size_2_rank_" + std::to_string(r) + ".pt";
      EXPECT_TRUE(fs::exists(d + "model" + suffix)) << d;
      EXPECT_TRUE(fs::exists(d + "optim" + suffix)) << d;
      EXPECT_TRUE(fs::exists(d + "extra_state" + suffix)) << d;
    }
    EXPECT_TRUE(fs::exists(d + "huggingface/config.json"));
    EXPECT_TRUE(fs::exists(d + "huggingface/generation_config.json"));
    auto json = core::ReadJsonFile(d + "fsdp_config.json");
    ASSERT_TRUE(json.ok());
    EXPECT_EQ((*json)["world_size"], 2);
    EXPECT_EQ((*json)["FSDP_version"], 2);
    EXPECT_EQ((*json)["shard_layout"]["model.embed_tokens.weight"]["shape"],
              nlohmann::json({11, 6}));
    EXPECT_EQ((*json)["shard_layout"]["model.embed_tokens.weight"]["padding"],
              1);
    auto hf = LoadSafetensorsFolder(d + "huggingface");
    ASSERT_TRUE(hf.ok()) << hf.status();
    EXPECT_TRUE(
        at::equal(hf->at("lm_head.weight"), FullModel(1).at("lm_head.weight")));
  }
  // data.pt as verl writes it: Python's pickle reads it without torch.
  const std::string data_pt = root + "/global_step_5/data.pt";
  EXPECT_FALSE(fs::exists(root + "/global_step_5/data.json"));
  EXPECT_EQ(PythonUnpickle(data_pt), "{\"cursor\": 50}\n");
  // Nothing temporary is left.
  for (const auto& e : fs::directory_iterator(root)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos);
  }
}

TEST(CheckpointManagerTest, RoundTripBitIdentical) {
  for (int world : {1, 2, 4}) {
    const std::string root = FreshDir("rt" + std::to_string(world));
    CheckpointManager mgr({root});
    const auto full = FullModel(world);
    ASSERT_TRUE(SaveAllRanks(mgr, 3, full, world).ok());
    auto dir = mgr.ResolveResumeDir(ResumeMode::kAuto);
    ASSERT_TRUE(dir.ok() && dir->has_value());
    EXPECT_EQ(*StepFromDir(**dir), 3);
    auto data = mgr.LoadDataState(**dir);
    ASSERT_TRUE(data.ok() && data->has_value());
    EXPECT_EQ((**data)["cursor"], 30);
    auto layout = mgr.LoadLayout(**dir, "actor");
    ASSERT_TRUE(layout.ok()) << layout.status();
    const auto saves = MakeRoleSaves(full, world);
    std::map<std::string, std::vector<at::Tensor>> chunks;
    for (int r = 0; r < world; ++r) {
      auto shard = mgr.LoadShard(**dir, "actor", r, world);
      ASSERT_TRUE(shard.ok()) << shard.status();
      for (const auto& [name, t] : saves[r].shard.model) {
        EXPECT_TRUE(at::equal(shard->model.at(name), t)) << name;
        chunks[name].push_back(shard->model.at(name));
      }
      for (const auto& [name, t] : saves[r].shard.optimizer) {
        EXPECT_TRUE(at::equal(shard->optimizer.at(name), t)) << name;
      }
      EXPECT_EQ(shard->optimizer.size(), saves[r].shard.optimizer.size());
      EXPECT_EQ(shard->optimizer_group.param_names,
                saves[r].shard.optimizer_group.param_names);
      EXPECT_EQ(shard->extra.lr_scheduler_step, 7);
      EXPECT_EQ(shard->extra.user["rank"], r);
    }
    for (const auto& [name, t] : full) {
      auto merged = UnshardTensor(name, layout->params.at(name), chunks[name]);
      ASSERT_TRUE(merged.ok()) << merged.status();
      EXPECT_EQ(merged->scalar_type(), t.scalar_type());
      EXPECT_TRUE(at::equal(*merged, t)) << name << " world " << world;
    }
  }
}

TEST(CheckpointManagerTest, DataStateIsDataPtAndLegacyDataJsonLoads) {
  const std::string root = FreshDir("data_state");
  CheckpointManager mgr({root});
  const nlohmann::json state = {
      {"dataloader", {{"epoch", 2}, {"batches_in_epoch", 7}}},
      {"trainer",
       {{"kl_coef", 0.0015625},
        {"uid_counter", int64_t{1} << 40},
        {"flags", {true, false, nullptr}},
        {"name", "run-\u00e9"}}}};
  ASSERT_TRUE(mgr.BeginSave(3).ok());
  ASSERT_TRUE(mgr.SaveDataState(3, state).ok());
  ASSERT_TRUE(mgr.CommitSave(3).ok());
  const std::string step = root + "/global_step_3";
  auto back = mgr.LoadDataState(step);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ(**back, state);
  EXPECT_EQ(nlohmann::json::parse(PythonUnpickle(step + "/data.pt")), state);
  // A corrupted data.pt is an error naming it, never a silent restart.
  std::string bytes = *core::ReadFile(step + "/data.pt");
  bytes[bytes.size() / 4] ^= 0x20;
  ASSERT_TRUE(core::WriteFileAtomic(step + "/data.pt", bytes).ok());
  auto bad = mgr.LoadDataState(step);
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kDataLoss, "CRC-32 mismatch"));
  EXPECT_NE(bad.status().message().find("data.pt"), std::string::npos)
      << bad.status();
  // Checkpoints of earlier versions have data.json instead.
  fs::remove(step + "/data.pt");
  ASSERT_TRUE(
      core::WriteFileAtomic(step + "/data.json", state.dump(2) + "\n").ok());
  auto legacy = mgr.LoadDataState(step);
  ASSERT_TRUE(legacy.ok() && legacy->has_value()) << legacy.status();
  EXPECT_EQ(**legacy, state);
  fs::remove(step + "/data.json");
  auto none = mgr.LoadDataState(step);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(CheckpointManagerTest, SpmdSaveWithLocalAllOk) {
  const std::string root = FreshDir("spmd");
  CheckpointManager mgr({root});
  auto saves = MakeRoleSaves(FullModel(3), 1);
  ASSERT_TRUE(
      mgr.Save(9, 0, 1, {{"actor", saves[0]}}, {{"c", 1}}, LocalAllOk).ok());
  EXPECT_EQ(*mgr.LatestStep(), 9);
  // A failing rank fails the save and the tracker is unchanged.
  CheckpointManagerOptions bad{root};
  bad.save_contents = {"optimizer"};
  CheckpointManager bad_mgr(bad);
  auto st = bad_mgr.Save(10, 0, 1, {{"actor", saves[0]}}, {}, LocalAllOk);
  ASSERT_THAT(st, StatusIs(absl::StatusCode::kInvalidArgument,
                           "save_contents must contain 'model'"));
  EXPECT_NE(st.message().find("must contain 'model'"), std::string::npos) << st;
  EXPECT_EQ(*mgr.LatestStep(), 9);
}

TEST(CheckpointManagerTest, RetentionKeepsNewest) {
  const std::string root = FreshDir("retention");
  CheckpointManagerOptions opt{root};
  opt.max_ckpt_to_keep = {{"actor", 2}, {"critic", 1}};
  CheckpointManager mgr(opt);
  for (int step = 1; step <= 4; ++step) {
    ASSERT_TRUE(
        SaveAllRanks(mgr, step, FullModel(step), 1, {"actor", "critic"}).ok());
  }
  EXPECT_FALSE(fs::exists(root + "/global_step_1"));
  EXPECT_FALSE(fs::exists(root + "/global_step_2"));
  EXPECT_TRUE(fs::exists(root + "/global_step_3/actor"));
  EXPECT_FALSE(fs::exists(root + "/global_step_3/critic"));
  EXPECT_TRUE(fs::exists(root + "/global_step_4/actor"));
  EXPECT_TRUE(fs::exists(root + "/global_step_4/critic"));
}

TEST(CheckpointManagerTest, ResumeModes) {
  const std::string root = FreshDir("resume");
  CheckpointManager mgr({root});
  auto none = mgr.ResolveResumeDir(ResumeMode::kAuto);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());  // from scratch
  ASSERT_TRUE(SaveAllRanks(mgr, 2, FullModel(2), 1).ok());
  ASSERT_TRUE(SaveAllRanks(mgr, 4, FullModel(4), 1).ok());
  EXPECT_EQ(**mgr.ResolveResumeDir(ResumeMode::kAuto), root + "/global_step_4");
  EXPECT_FALSE(mgr.ResolveResumeDir(ResumeMode::kDisable)->has_value());
  auto path =
      mgr.ResolveResumeDir(ResumeMode::kResumePath, root + "/global_step_2/");
  ASSERT_TRUE(path.ok() && path->has_value());
  EXPECT_EQ(*StepFromDir(**path), 2);
  auto bad = mgr.ResolveResumeDir(ResumeMode::kResumePath, root);
  ASSERT_THAT(bad, StatusIs(absl::StatusCode::kInvalidArgument,
                            "must name a global_step_<N> folder"));
  EXPECT_NE(bad.status().message().find("global_step_"), std::string::npos);
  EXPECT_TRUE(absl::IsNotFound(
      mgr.ResolveResumeDir(ResumeMode::kResumePath, root + "/global_step_3")
          .status()));
  EXPECT_THAT(ParseResumeMode("sometimes"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "unknown value 'sometimes'"));
  // A tracker naming a missing step is an error, never a silent restart.
  ASSERT_TRUE(core::WriteFileAtomic(mgr.TrackerPath(), "7").ok());
  auto missing = mgr.ResolveResumeDir(ResumeMode::kAuto);
  ASSERT_THAT(missing, StatusIs(absl::StatusCode::kDataLoss,
                                "global_step_7 does not exist"));
  EXPECT_NE(missing.status().message().find("global_step_7"),
            std::string::npos);
  // load_contents: model only.
  CheckpointManagerOptions opt{root};
  opt.load_contents = {"model"};
  auto shard =
      CheckpointManager(opt).LoadShard(root + "/global_step_4", "actor", 0, 1);
  ASSERT_TRUE(shard.ok());
  EXPECT_FALSE(shard->model.empty());
  EXPECT_TRUE(shard->optimizer.empty());
}

TEST(CheckpointManagerTest, DifferentWorldSizeIsAClearError) {
  const std::string root = FreshDir("world");
  CheckpointManager mgr({root});
  ASSERT_TRUE(SaveAllRanks(mgr, 1, FullModel(1), 4).ok());
  auto st = mgr.LoadShard(root + "/global_step_1", "actor", 0, 2);
  ASSERT_THAT(st, StatusIs(absl::StatusCode::kFailedPrecondition,
                           "different world size is not supported"));
  EXPECT_TRUE(absl::IsFailedPrecondition(st.status()));
  EXPECT_NE(st.status().message().find("saved by 4 ranks"), std::string::npos)
      << st.status();
  EXPECT_NE(st.status().message().find("world size 2"), std::string::npos);
}

TEST(CheckpointManagerTest, ResaveSameStepAndLeftoverTempFolders) {
  const std::string root = FreshDir("resave");
  CheckpointManager mgr({root});
  ASSERT_TRUE(SaveAllRanks(mgr, 3, FullModel(1), 1).ok());
  fs::create_directories(root + "/global_step_9.tmp-save/actor");
  ASSERT_TRUE(SaveAllRanks(mgr, 3, FullModel(2), 1).ok());
  EXPECT_FALSE(fs::exists(root + "/global_step_9.tmp-save"));
  EXPECT_FALSE(fs::exists(root + "/global_step_3.tmp-old"));
  auto shard = mgr.LoadShard(root + "/global_step_3", "actor", 0, 1);
  ASSERT_TRUE(shard.ok());
  EXPECT_TRUE(at::equal(shard->model.at("model.norm.weight"),
                        FullModel(2).at("model.norm.weight")));
}

// A save that fails half-way (here: hf_model asked for but no weights given,
// after every shard was written) leaves no partial folder behind; the
// previous checkpoint and the tracker are untouched. At start,
// RemoveUnfinishedSaves removes killed saves' folders and nothing else.
TEST(CheckpointManagerTest, FailedSavesLeaveNoTempFolder) {
  const std::string root = FreshDir("failed_save");
  CheckpointManager mgr({root});
  auto saves = MakeRoleSaves(FullModel(3), 1);
  ASSERT_TRUE(
      mgr.Save(4, 0, 1, {{"actor", saves[0]}}, {{"c", 1}}, LocalAllOk).ok());
  CheckpointManagerOptions hf{root};
  hf.save_contents = {"model", "optimizer", "hf_model"};
  CheckpointManager hf_mgr(hf);
  saves[0].meta.hf_model.clear();
  auto st = hf_mgr.Save(5, 0, 1, {{"actor", saves[0]}}, {}, LocalAllOk);
  ASSERT_THAT(st, StatusIs(absl::StatusCode::kInvalidArgument,
                           "save_contents has hf_model but no full weights"));
  EXPECT_NE(st.message().find("step 5 (commit, rank 0)"), std::string::npos)
      << st;
  EXPECT_FALSE(fs::exists(hf_mgr.TempStepDir(5)));
  EXPECT_FALSE(fs::exists(root + "/global_step_5"));
  EXPECT_EQ(*mgr.LatestStep(), 4);
  EXPECT_TRUE(mgr.LoadShard(root + "/global_step_4", "actor", 0, 1).ok());
  // A killed save's folders go at the next start; the user's files stay.
  fs::create_directories(root + "/global_step_6.tmp-save/actor");
  fs::create_directories(root + "/global_step_4.tmp-old");
  fs::create_directories(root + "/my_notes.tmp-save");
  std::ofstream(root + "/global_step_notes.txt") << "mine";
  ASSERT_TRUE(mgr.RemoveUnfinishedSaves().ok());
  EXPECT_FALSE(fs::exists(root + "/global_step_6.tmp-save"));
  EXPECT_FALSE(fs::exists(root + "/global_step_4.tmp-old"));
  EXPECT_TRUE(fs::exists(root + "/my_notes.tmp-save"));
  EXPECT_TRUE(fs::exists(root + "/global_step_notes.txt"));
  EXPECT_TRUE(fs::exists(root + "/global_step_4/actor"));
  EXPECT_TRUE(
      CheckpointManager({root + "/missing"}).RemoveUnfinishedSaves().ok());
}

// A model whose every value encodes the step, big enough that a save takes
// a while (~8 MB per rank).
std::map<std::string, at::Tensor> StepModel(int64_t step) {
  std::map<std::string, at::Tensor> m;
  for (int i = 0; i < 2; ++i) {
    m["layer" + std::to_string(i)] = at::full({1024, 1024}, double(step));
  }
  return m;
}

TEST(CheckpointManagerTest, KilledSavesNeverCorruptTheLatestCheckpoint) {
  const std::string root = FreshDir("kill");
  CheckpointManager mgr({root});
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(SaveAllRanks(mgr, 0, StepModel(0), 2).ok());
  // Kill times spread over ~2.5 saves, so kills land in every phase.
  const int64_t save_us = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  std::mt19937 rng(2024);
  int64_t committed = 0;
  int killed_mid_save = 0;
  for (int trial = 0; trial < 24; ++trial) {
    const int64_t first = committed + 1;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      for (int64_t step = first;; ++step) {
        if (!SaveAllRanks(mgr, step, StepModel(step), 2).ok()) _exit(3);
      }
    }
    std::this_thread::sleep_for(
        std::chrono::microseconds(rng() % (5 * save_us / 2 + 1)));
    ASSERT_EQ(kill(pid, SIGKILL), 0);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited early: " << status;
    auto dir = mgr.ResolveResumeDir(ResumeMode::kAuto);
    ASSERT_TRUE(dir.ok() && dir->has_value()) << dir.status();
    const int64_t latest = *StepFromDir(**dir);
    ASSERT_GE(latest, committed);
    for (int r = 0; r < 2; ++r) {
      auto shard = mgr.LoadShard(**dir, "actor", r, 2);
      ASSERT_TRUE(shard.ok()) << "trial " << trial << ": " << shard.status();
      for (const auto& [name, t] : shard->model) {
        ASSERT_TRUE(at::equal(t, at::full({512, 1024}, double(latest))))
            << name << " trial " << trial;
      }
    }
    for (const auto& e : fs::directory_iterator(root)) {
      killed_mid_save +=
          e.path().filename().string().find(".tmp-") != std::string::npos;
    }
    committed = latest;
  }
  // The kills must have hit saves in progress (temp folders left behind).
  EXPECT_GT(killed_mid_save, 0);
  EXPECT_GT(committed, 0);
}

}  // namespace
}  // namespace verl::ckpt
