// File: verl/ckpt/merger/checkpoint_merger_test.cc
//
// The streaming merge: its peak memory (VmHWM growth of a forked child) stays
// a small fraction of the model, and its output equals the full tensors;
// checkpoints written by PyTorch (OrderedDict state dicts, views of a flat
// storage, no shard layout) merge too.
#include "verl/ckpt/merger/checkpoint_merger.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/core/status.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {
namespace fs = std::filesystem;

std::string Tmp(const std::string& name) {
  return core::testing::FreshTestDir("merger_" + name);
}

double StatusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0)
      return std::stod(line.substr(key.size())) / 1024;
  }
  return -1;
}

// Writes a `world`-rank checkpoint of `full`; returns the actor folder.
std::string SaveCheckpoint(const std::string& root, int world,
                           const std::map<std::string, at::Tensor>& full) {
  CheckpointManagerOptions opt{root};
  opt.save_contents = {"model"};
  CheckpointManager mgr(opt);
  RoleMeta meta;
  meta.layout = MakeFsdpLayout(full, world);
  meta.hf_config = {{"architectures", {"LlamaForCausalLM"}}};
  VERL_CHECK_OK(mgr.BeginSave(1));
  for (int r = 0; r < world; ++r) {
    RoleShard shard;
    shard.model = ShardStateDict(full, meta.layout, r);
    VERL_CHECK_OK(mgr.SaveShard(1, "actor", r, world, shard));
  }
  VERL_CHECK_OK(mgr.SaveRoleMeta(1, "actor", meta));
  VERL_CHECK_OK(mgr.CommitSave(1));
  return root + "/global_step_1/actor";
}

TEST(CheckpointMergerTest, StreamingMergeKeepsPeakMemoryFarBelowTheModel) {
  // 64 MB of fp32: 16 tensors of 4 MB (rows not a multiple of 4) + norms.
  std::map<std::string, at::Tensor> full;
  for (int i = 0; i < 16; ++i) {
    const std::string p = "model.layers." + std::to_string(i);
    full[p + ".mlp.weight"] = at::randn({1023, 1025});
    full[p + ".norm.weight"] = at::randn({1025});
  }
  double model_mb = 0;
  for (const auto& [n, t] : full) model_mb += t.nbytes() / (1024.0 * 1024);
  const std::string root = Tmp("stream");
  const std::string actor = SaveCheckpoint(root, 4, full);
  MergeOptions o;
  o.local_dir = actor;
  o.target_dir = root + "/hf";
  o.dtype = at::kBFloat16;
  o.max_shard_size = 20'000'000;  // several output files
  o.num_threads = 4;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    // Warm up on a tiny checkpoint (pages in the code a merge runs, which
    // counts in RSS), then reset the peak to the current RSS.
    MergeOptions warm = o;
    warm.local_dir =
        SaveCheckpoint(root + "/warm", 4, {{"w", at::randn({64, 64})}});
    warm.target_dir = root + "/warm_hf";
    bool ok = MergeFsdpCheckpoint(warm).ok();
    std::ofstream("/proc/self/clear_refs") << "5";
    const double before = StatusMb("VmRSS:");
    ok = ok && MergeFsdpCheckpoint(o).ok();
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
  // One tensor is 4 MB (+2 MB as bf16); loading every shard (the previous
  // merger) grew RSS by ~3x the model.
  std::cout << "merge peak RSS growth " << grown << " MB, model " << model_mb
            << " MB\n";
  EXPECT_LT(grown, 0.2 * model_mb)
      << "peak RSS grew " << grown << " MB for a " << model_mb << " MB model";
  auto merged = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ(merged->size(), full.size());
  ASSERT_TRUE(fs::exists(root + "/hf/" + kSafetensorsIndexFile));
  for (const auto& [name, t] : full) {
    EXPECT_TRUE(at::equal(merged->at(name), t.to(at::kBFloat16))) << name;
  }
}

TEST(CheckpointMergerTest, MergesCheckpointsWrittenByTorchSave) {
  const std::string root = Tmp("torch_save");
  const std::string cmd =
      "python3 verl/ckpt/testdata/make_torch_pt.py " + root + " ckpt 2>&1";
  fs::create_directories(root);
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  MergeOptions o;
  o.local_dir = root + "/global_step_1/actor";
  o.target_dir = root + "/hf";
  o.dtype = at::kFloat;
  auto stats = MergeFsdpCheckpoint(o);
  ASSERT_TRUE(stats.ok()) << stats.status();
  auto merged = LoadSafetensorsFolder(root + "/hf");
  ASSERT_TRUE(merged.ok()) << merged.status();
  const std::map<std::string, at::Tensor> want = {
      {"model.embed_tokens.weight",
       at::arange(15, at::kFloat).view({5, 3}) * 0.5},
      {"model.norm.weight", at::tensor({1.0f, 2.0f, 3.0f})},
      {"lm_head.weight", at::arange(15, at::kFloat).view({5, 3}) - 7}};
  ASSERT_EQ(merged->size(), want.size());
  for (const auto& [name, t] : want) {
    EXPECT_TRUE(at::equal(merged->at(name), t)) << name << merged->at(name);
  }

  // A non-empty target is the user's: refused (nothing deleted) unless
  // overwrite is set.
  const std::string mine = root + "/mine";
  fs::create_directories(mine);
  std::ofstream(mine + "/notes.txt") << "keep me";
  o.target_dir = mine;
  auto refused = MergeFsdpCheckpoint(o);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("pass --overwrite"),
            std::string::npos)
      << refused.status();
  EXPECT_TRUE(fs::exists(mine + "/notes.txt"));
  EXPECT_FALSE(fs::exists(mine + "/config.json"));
  o.overwrite = true;
  ASSERT_TRUE(MergeFsdpCheckpoint(o).ok());
  EXPECT_FALSE(fs::exists(mine + "/notes.txt"));
  EXPECT_TRUE(LoadSafetensorsFolder(mine).ok());
}

}  // namespace
}  // namespace verl::ckpt
