// File: tools/bench_memory.cc
//
// Overhead of the torch_memory tracker on a training step, measured in
// interleaved pairs in one process (the machine is shared: medians of paired
// ratios are what survive its load). Workloads:
//   tiny-qwen2  the tiny model's actor update: padded forward, token
//               log-probs, a policy-gradient-like loss, backward, AdamW
//               (~thousands of small allocations per step, like the trainer)
//   mlp         forward/backward/AdamW of a 4x512 MLP (~150 allocations)
// Modes:
//   baseline  no annotations, tracker never installed
//   off       MemoryScope / MemoryCategoryScope annotations, tracker off
//   on        annotations, tracker on (--max_entries, --stack_depth)
// Each pair runs off and on (and baseline and off) back to back, alternating
// the order (ABBA...), and the per-pair ratios give the median and spread.
// Also prints the cost of one tracked allocation (alloc + free of a small
// tensor, best of several repetitions) and the tracked allocations per step.
//
//   bazel run //tools:bench_memory -- --pairs=20 --stack_depth=32
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "verl/models/decoder.h"
#include "verl/models/logprob.h"
#include "verl/models/presets.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/gemm_peak.h"
#include "verl/profiler/memory_snapshot.h"
#include "verl/profiler/memory_tracker.h"

ABSL_FLAG(std::string, workload, "tiny-qwen2",
          "tiny-qwen2 (the tiny model's actor update) or mlp.");
ABSL_FLAG(int, pairs, 20, "Interleaved (off, on) pairs.");
ABSL_FLAG(int, steps_per_round, 2, "Training steps per mode and pair.");
ABSL_FLAG(int, batch, 8, "Rows per step.");
ABSL_FLAG(int, seq_len, 96, "tiny-qwen2: tokens per row.");
ABSL_FLAG(int, hidden, 512, "mlp: width.");
ABSL_FLAG(int, layers, 4, "mlp: depth.");
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

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

// CPU seconds of the calling thread: unlike wall time, not inflated when
// other processes preempt this one (the steps run on one thread).
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// One training step; `annotate` adds the memory scopes the trainer has.
using StepFn = std::function<void(bool annotate)>;

struct MlpStep {
  torch::nn::Sequential mlp;
  std::unique_ptr<torch::optim::AdamW> opt;
  torch::Tensor x, y;

  MlpStep(int batch, int hidden, int layers) {
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

  torch::Tensor Loss() { return torch::mse_loss(mlp->forward(x), y); }
};

// The tiny model's actor update: what the trainer's update_actor does per
// micro-batch, without the RL bookkeeping.
struct ActorStep {
  std::shared_ptr<verl::models::CausalLM> model;
  std::unique_ptr<torch::optim::AdamW> opt;
  at::Tensor ids, mask, pos, adv;

  ActorStep(const std::string& preset, int batch, int seq_len) {
    auto config = verl::models::MakePreset(preset);
    if (!config.ok()) {
      std::fprintf(stderr, "bench_memory: %s\n",
                   std::string(config.status().message()).c_str());
      std::exit(1);
    }
    MemoryCategoryScope cat(MemoryCategory::kParameters);
    model = verl::models::CreateModel(*config, 0);
    opt = std::make_unique<torch::optim::AdamW>(
        model->parameters(), torch::optim::AdamWOptions(1e-5));
    ids = at::randint(config->vocab_size, {batch, seq_len}, at::kLong);
    mask = at::ones({batch, seq_len}, at::kLong);
    pos = at::arange(seq_len, at::kLong).unsqueeze(0).expand({batch, seq_len});
    adv = at::randn({batch, seq_len - 1});
  }

  torch::Tensor Loss() {
    const at::Tensor logits = model->ForwardPadded(ids, mask, pos).logits;
    const at::Tensor lp = verl::models::LogProbsFromLogits(
        logits.slice(1, 0, -1), ids.slice(1, 1));
    return -(lp * adv).mean();
  }
};

template <typename W>
StepFn MakeStep(std::shared_ptr<W> w) {
  return [w](bool annotate) {
    if (!annotate) {
      w->opt->zero_grad();
      w->Loss().backward();
      w->opt->step();
      return;
    }
    MemoryScope phase("update_actor");
    w->opt->zero_grad();
    torch::Tensor loss;
    {
      MemoryScope fwd("forward");
      MemoryCategoryScope cat(MemoryCategory::kActivations);
      loss = w->Loss();
    }
    {
      MemoryScope bwd("backward");
      MemoryCategoryScope cat(MemoryCategory::kGradients);
      loss.backward();
    }
    MemoryCategoryScope cat(MemoryCategory::kOptimizerState);
    w->opt->step();
  };
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1) + 0.5)];
}
double Median(const std::vector<double>& v) { return Quantile(v, 0.5); }

void PrintRatios(const char* name, const std::vector<double>& r,
                 const char* target) {
  std::printf(
      "%-15s median %.4f  IQR [%.4f, %.4f]  min %.4f  max %.4f  (%zu pairs; "
      "%s)\n",
      name, Median(r), Quantile(r, 0.25), Quantile(r, 0.75),
      *std::min_element(r.begin(), r.end()),
      *std::max_element(r.begin(), r.end()), r.size(), target);
}

// Nanoseconds per alloc + free of a small tensor (best of 7 x 20000).
double AllocNs() {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 20000; ++i) at::empty({16});
    best = std::min(best, Seconds(t0) / 20000 * 1e9);
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::manual_seed(0);
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  const int steps = absl::GetFlag(FLAGS_steps_per_round);
  const std::string workload = absl::GetFlag(FLAGS_workload);
  char load[64] = "?";
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fgets(load, sizeof(load), f) == nullptr) load[0] = 0;
    std::fclose(f);
  }
  std::printf(
      "BLAS: %s, fp32 GEMM 512^3: %.1f GFLOP/s, threads %d, profiler %s, "
      "loadavg %s",
      verl::profiler::BlasLibrary().c_str(),
      verl::profiler::MeasureGemmFlops(512, 512, 512, 5) / 1e9,
      absl::GetFlag(FLAGS_threads),
      verl::profiler::ProfilerCompiledIn() ? "compiled in" : "compiled out",
      load);
  StepFn step;
  if (workload == "mlp") {
    step = MakeStep(std::make_shared<MlpStep>(absl::GetFlag(FLAGS_batch),
                                              absl::GetFlag(FLAGS_hidden),
                                              absl::GetFlag(FLAGS_layers)));
  } else {
    step = MakeStep(std::make_shared<ActorStep>(
        workload, absl::GetFlag(FLAGS_batch), absl::GetFlag(FLAGS_seq_len)));
  }
  for (int i = 0; i < 3; ++i) step(false);  // warm-up, optimizer state

  const verl::profiler::MemoryTrackerOptions on_options{
      absl::GetFlag(FLAGS_max_entries), absl::GetFlag(FLAGS_stack_depth)};
  MemoryTracker& tracker = MemoryTracker::Global();
  const double alloc_off_ns = AllocNs();
  tracker.Enable(on_options);
  const double alloc_on_ns = AllocNs();
  tracker.Disable();

  enum Mode { kBaseline, kOff, kOn };
  const char* kNames[] = {"baseline (not installed)", "off (annotated)", "on"};
  std::vector<double> per_step[3], cpu_per_step[3];
  std::vector<double> on_off, off_base, cpu_on_off, cpu_off_base;
  int64_t allocs = 0;
  auto run = [&](int m, int pair) {
    if (m == kOn) tracker.Enable(on_options);
    auto t0 = std::chrono::steady_clock::now();
    const double c0 = ThreadCpuSeconds();
    for (int s = 0; s < steps; ++s) step(m != kBaseline);
    const double t = Seconds(t0) / steps;
    cpu_per_step[m].push_back((ThreadCpuSeconds() - c0) / steps);
    if (m == kOn) {
      allocs = tracker.Stats().num_allocs;
      if (!absl::GetFlag(FLAGS_snapshot).empty() &&
          pair + 1 == absl::GetFlag(FLAGS_pairs)) {
        const absl::Status s = verl::profiler::WriteMemorySnapshot(
            tracker.Snapshot(), absl::GetFlag(FLAGS_snapshot));
        if (!s.ok()) {
          std::fprintf(stderr, "bench_memory: %s\n",
                       std::string(s.message()).c_str());
          std::exit(1);
        }
      }
      tracker.Disable();
    }
    per_step[m].push_back(t);
    return t;
  };
  for (int p = 0; p < absl::GetFlag(FLAGS_pairs); ++p) {
    // ABBA: alternate which mode of a pair runs first.
    const bool flip = p % 2 == 1;
    double off = 0, on = 0, base = 0, off2 = 0;
    if (flip) {
      on = run(kOn, p);
      off = run(kOff, p);
      off2 = run(kOff, p);
      base = run(kBaseline, p);
    } else {
      off = run(kOff, p);
      on = run(kOn, p);
      base = run(kBaseline, p);
      off2 = run(kOff, p);
    }
    on_off.push_back(on / off);
    off_base.push_back(off2 / base);
    const auto& c = cpu_per_step;
    // Both orders push this pair's `off` before its `off2`.
    const size_t n_off = c[kOff].size();
    cpu_on_off.push_back(c[kOn].back() / c[kOff][n_off - 2]);
    cpu_off_base.push_back(c[kOff][n_off - 1] / c[kBaseline].back());
  }
  std::printf("workload %s, %d steps per mode and pair, stack_depth %d\n",
              workload.c_str(), steps, absl::GetFlag(FLAGS_stack_depth));
  for (int m = 0; m < 3; ++m) {
    std::printf(
        "%-26s %9.3f ms/step wall, %9.3f ms/step thread CPU (medians)\n",
        kNames[m], Median(per_step[m]) * 1e3, Median(cpu_per_step[m]) * 1e3);
  }
  std::printf("tracked allocations per step: %.0f\n",
              static_cast<double>(allocs) / steps);
  std::printf(
      "one alloc+free of a small tensor: off %.0f ns, on %.0f ns (+%.0f ns "
      "per tracked allocation)\n",
      alloc_off_ns, alloc_on_ns, alloc_on_ns - alloc_off_ns);
  std::printf("wall time:\n");
  PrintRatios("on / off:", on_off, "target < 1.05");
  PrintRatios("off / baseline:", off_base, "target ~1.00");
  std::printf("thread CPU time (not inflated by other processes):\n");
  PrintRatios("on / off:", cpu_on_off, "target < 1.05");
  PrintRatios("off / baseline:", cpu_off_base, "target ~1.00");
  return 0;
}
