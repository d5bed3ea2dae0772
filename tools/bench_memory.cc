// File: tools/bench_memory.cc
//
// Overhead of the torch_memory tracker on a training-like step (forward,
// backward and AdamW update of an MLP), in three modes measured in
// interleaved rounds of the same run:
//   baseline  no annotations, tracker never installed
//   off       MemoryScope / MemoryCategoryScope annotations, tracker off
//   on        annotations, tracker on (--max_entries, --stack_depth)
// Prints the median step time of each mode and the ratios on/off and
// off/baseline, with the BLAS in use and its measured GEMM rate.
//
//   bazel run //tools:bench_memory -- --rounds=15 --stack_depth=32
#include <ATen/Parallel.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "verl/profiler/memory_snapshot.h"
#include "verl/profiler/memory_tracker.h"

ABSL_FLAG(int, rounds, 15, "Interleaved rounds per mode.");
ABSL_FLAG(int, steps_per_round, 5, "Training steps per round.");
ABSL_FLAG(int, batch, 64, "Rows per step.");
ABSL_FLAG(int, hidden, 512, "MLP width.");
ABSL_FLAG(int, layers, 4, "MLP depth.");
ABSL_FLAG(int, threads, 1, "Intra-op threads.");
ABSL_FLAG(int64_t, max_entries, 100000, "trace_alloc_max_entries when on.");
ABSL_FLAG(int, stack_depth, 32, "stack_depth when on.");
ABSL_FLAG(std::string, snapshot, "",
          "If set, writes the last tracked round's snapshot (.pickle, .json, "
          ".svg) here.");

namespace {

using verl::profiler::MemoryCategory;
using verl::profiler::MemoryCategoryScope;
using verl::profiler::MemoryScope;
using verl::profiler::MemoryTracker;

std::string BlasLibrary() {
  char buf[4096];
  const ssize_t n = readlink("/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                             buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string("unknown");
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

double GemmGflops(int64_t n) {
  torch::Tensor a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::matmul(a, b);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    torch::matmul(a, b);
    best = std::min(best, Seconds(t0));
  }
  return 2.0 * n * n * n / best / 1e9;
}

struct Trainer {
  torch::nn::Sequential mlp;
  std::unique_ptr<torch::optim::AdamW> opt;
  torch::Tensor x, y;

  Trainer(int batch, int hidden, int layers) {
    MemoryCategoryScope cat(MemoryCategory::kParameters);
    for (int i = 0; i < layers; ++i) {
      mlp->push_back(torch::nn::Linear(hidden, hidden));
      mlp->push_back(torch::nn::GELU());
    }
    mlp->push_back(torch::nn::Linear(hidden, 1));
    opt = std::make_unique<torch::optim::AdamW>(
        mlp->parameters(), torch::optim::AdamWOptions(1e-4));
    x = torch::randn({batch, hidden});
    y = torch::randn({batch, 1});
  }

  void Step(bool annotate) {
    if (!annotate) {
      opt->zero_grad();
      torch::mse_loss(mlp->forward(x), y).backward();
      opt->step();
      return;
    }
    MemoryScope phase("update_actor");
    opt->zero_grad();
    torch::Tensor loss;
    {
      MemoryScope fwd("forward");
      MemoryCategoryScope cat(MemoryCategory::kActivations);
      loss = torch::mse_loss(mlp->forward(x), y);
    }
    {
      MemoryScope bwd("backward");
      MemoryCategoryScope cat(MemoryCategory::kGradients);
      loss.backward();
    }
    MemoryCategoryScope cat(MemoryCategory::kOptimizerState);
    opt->step();
  }
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::manual_seed(0);
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  const int steps = absl::GetFlag(FLAGS_steps_per_round);
  std::printf("BLAS: %s, fp32 GEMM 512^3: %.1f GFLOP/s, threads %d\n",
              BlasLibrary().c_str(), GemmGflops(512),
              absl::GetFlag(FLAGS_threads));
  Trainer trainer(absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_hidden),
                  absl::GetFlag(FLAGS_layers));
  for (int i = 0; i < 3; ++i) trainer.Step(false);  // warm-up, optimizer state

  const verl::profiler::MemoryTrackerOptions on_options{
      absl::GetFlag(FLAGS_max_entries), absl::GetFlag(FLAGS_stack_depth)};
  enum Mode { kBaseline, kOff, kOn };
  const char* kNames[] = {"baseline (not installed)", "off (annotated)", "on"};
  std::vector<double> per_step[3];
  int64_t allocs = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    for (int m : {kBaseline, kOff, kOn}) {
      if (m == kOn) MemoryTracker::Global().Enable(on_options);
      auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) trainer.Step(m != kBaseline);
      per_step[m].push_back(Seconds(t0) / steps);
      if (m == kOn) {
        allocs = MemoryTracker::Global().Stats().num_allocs;
        if (!absl::GetFlag(FLAGS_snapshot).empty() &&
            r + 1 == absl::GetFlag(FLAGS_rounds)) {
          const absl::Status s = verl::profiler::WriteMemorySnapshot(
              MemoryTracker::Global().Snapshot(),
              absl::GetFlag(FLAGS_snapshot));
          if (!s.ok()) {
            std::fprintf(stderr, "bench_memory: %s\n",
                         std::string(s.message()).c_str());
            return 1;
          }
        }
        MemoryTracker::Global().Disable();
      }
    }
  }
  double median[3];
  for (int m = 0; m < 3; ++m) {
    median[m] = Median(per_step[m]);
    std::printf("%-26s %8.3f ms/step\n", kNames[m], median[m] * 1e3);
  }
  std::printf("tracked allocations per step: %.1f (stack_depth %d)\n",
              static_cast<double>(allocs) / steps,
              absl::GetFlag(FLAGS_stack_depth));
  std::printf("on / off:       %.4f (target < 1.05)\n",
              median[kOn] / median[kOff]);
  std::printf("off / baseline: %.4f (target ~1.00)\n",
              median[kOff] / median[kBaseline]);
  return 0;
}
