// File: tools/bench_merger.cc
//
// Model-merger throughput and memory: writes a synthetic `--size_mb` fp32
// checkpoint sharded over `--world` ranks (verl layout), then, each in a
// fresh child process, (a) reads the shard files sequentially (the input
// baseline), (b) writes as many bytes once with fsync (the output floor) and
// (c) merges them into an HF folder. Prints MB/s of both and
// the merge's peak RSS (VmHWM) and its growth over the child's starting RSS
// next to the model size, one line at the end.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randn.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "glog/logging.h"
#include "verl/ckpt/checkpoint_manager.h"
#include "verl/ckpt/merger/checkpoint_merger.h"
#include "verl/core/status.h"

ABSL_FLAG(std::string, dir, "/tmp/bench_merger", "Scratch folder.");
ABSL_FLAG(int, size_mb, 512, "Model size in MB (fp32).");
ABSL_FLAG(int, world, 4, "Ranks in the checkpoint.");
ABSL_FLAG(std::string, dtype, "fp32", "Merge output dtype.");
ABSL_FLAG(int, threads, 4, "Merger loading threads.");

namespace {
namespace fs = std::filesystem;
using verl::ckpt::CheckpointManager;

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

double StatusMb(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0)
      return std::stod(line.substr(key.size())) / 1e3;
  }
  return -1;
}

struct ChildRun {
  double seconds = 0;
  double peak_mb = 0;    // VmHWM
  double growth_mb = 0;  // VmHWM - VmRSS at the start (peak reset there)
};

// Runs `fn` in a child whose peak RSS is reset when it starts.
ChildRun InChild(const std::function<void()>& fn) {
  int fds[2];
  CHECK_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    std::ofstream("/proc/self/clear_refs") << "5";
    const double start = StatusMb("VmRSS:");
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    ChildRun out{Seconds(t0), StatusMb("VmHWM:"), 0};
    out.growth_mb = out.peak_mb - start;
    CHECK_EQ(write(fds[1], &out, sizeof(out)),
             static_cast<ssize_t>(sizeof(out)));
    _exit(0);
  }
  ChildRun out;
  CHECK_EQ(read(fds[0], &out, sizeof(out)), static_cast<ssize_t>(sizeof(out)));
  waitpid(pid, nullptr, 0);
  close(fds[0]);
  close(fds[1]);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int world = absl::GetFlag(FLAGS_world);
  fs::remove_all(dir);
  // 16 MB tensors plus small ones (norms) with uneven row counts.
  std::map<std::string, at::Tensor> full;
  const int64_t big = absl::GetFlag(FLAGS_size_mb) / 16;
  for (int64_t i = 0; i < big; ++i) {
    full["model.layers." + std::to_string(i) + ".mlp.weight"] =
        at::randn({2047, 2049});
    full["model.layers." + std::to_string(i) + ".norm.weight"] =
        at::randn({2049});
  }
  double model_mb = 0;
  for (const auto& [n, t] : full) model_mb += t.nbytes() / 1e6;
  CheckpointManager mgr({dir + "/ckpt", {"model"}});
  verl::ckpt::RoleMeta meta;
  meta.layout = verl::ckpt::MakeFsdpLayout(full, world);
  meta.hf_config = {{"architectures", {"LlamaForCausalLM"}}};
  VERL_CHECK_OK(mgr.BeginSave(1));
  for (int r = 0; r < world; ++r) {
    verl::ckpt::RoleShard shard;
    shard.model = verl::ckpt::ShardStateDict(full, meta.layout, r);
    VERL_CHECK_OK(mgr.SaveShard(1, "actor", r, world, shard));
  }
  VERL_CHECK_OK(mgr.SaveRoleMeta(1, "actor", meta));
  VERL_CHECK_OK(mgr.CommitSave(1));
  full.clear();
  const std::string actor = dir + "/ckpt/global_step_1/actor";

  uint64_t file_bytes = 0;
  const ChildRun seq = InChild([&] {
    std::vector<char> buf(8 << 20);
    for (int r = 0; r < world; ++r) {
      const int fd = open(
          (actor + "/" + verl::ckpt::RankFileName("model", r, world)).c_str(),
          O_RDONLY);
      ssize_t n;
      while ((n = read(fd, buf.data(), buf.size())) > 0) file_bytes += n;
      close(fd);
    }
  });
  for (int r = 0; r < world; ++r) {
    file_bytes += fs::file_size(actor + "/" +
                                verl::ckpt::RankFileName("model", r, world));
  }
  const double in_mb = file_bytes / 1e6;
  // The output floor: writing the same bytes once, fsynced.
  const ChildRun write_floor = InChild([&] {
    std::vector<char> buf(8 << 20, 1);
    const std::string path = dir + "/write_floor.bin";
    const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    for (uint64_t done = 0; done < file_bytes; done += buf.size()) {
      CHECK_GT(write(fd, buf.data(), buf.size()), 0);
    }
    CHECK_EQ(fsync(fd), 0);
    close(fd);
    unlink(path.c_str());
  });
  const ChildRun merge = InChild([&] {
    verl::ckpt::MergeOptions o;
    o.local_dir = actor;
    o.target_dir = dir + "/hf";
    o.dtype = *verl::ckpt::ParseMergeDtype(absl::GetFlag(FLAGS_dtype));
    o.max_shard_size = 200'000'000;
    o.num_threads = absl::GetFlag(FLAGS_threads);
    o.overwrite = true;  // the benchmark's own scratch folder
    VERL_CHECK_OK(verl::ckpt::MergeFsdpCheckpoint(o).status());
  });
  std::cout << absl::StrFormat(
                   "bench_merger: model %.0f MB over %d ranks | sequential "
                   "read %.0f MB/s | write+fsync %.0f MB/s | merge (%s out) "
                   "%.0f MB/s (%.2f s, %.2fx read time) | merge peak RSS %.0f "
                   "MB = %.2fx model, growth %.0f MB = %.3fx model",
                   model_mb, world, in_mb / seq.seconds,
                   in_mb / write_floor.seconds, absl::GetFlag(FLAGS_dtype),
                   in_mb / merge.seconds, merge.seconds,
                   merge.seconds / seq.seconds, merge.peak_mb,
                   merge.peak_mb / model_mb, merge.growth_mb,
                   merge.growth_mb / model_mb)
            << std::endl;
  fs::remove_all(dir);
  return 0;
}
