// File: tools/bench_profiling.cc
//
// Overhead of the trainer's profiling on whole PPO steps: GRPO on a built-in
// preset and the arithmetic task (batch 16 x n=4, 32 response tokens), run
// in interleaved rounds of three modes in the same process:
//   off       global_profiler.tool null (spans and memory phases are still
//             annotated; the disabled path)
//   memory    torch_memory recording (every allocation, --stack_depth
//             frames) and verl's post-update snapshot after every step
//   timeline  the Chrome trace on every step (tool=timeline)
// Prints the median timing_s/step of each mode (steps after the first of a
// run), the ratio to off, and the median cost of writing the files
// (timing_s/stop_profile for the trace; the post-update snapshot is timed
// separately as the rest of the run's wall time).
//
//   bazel run -c opt //tools:bench_profiling -- --rounds=3 --steps=4
#include <ATen/Parallel.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/ppo_trainer.h"

ABSL_FLAG(int, rounds, 3, "Interleaved rounds per mode.");
ABSL_FLAG(int, steps, 4, "Training steps per run.");
ABSL_FLAG(std::string, preset, "tiny-qwen2", "Model preset.");
ABSL_FLAG(int, threads, 1, "Intra-op threads.");
ABSL_FLAG(int, stack_depth, 32, "torch_memory stack_depth.");
ABSL_FLAG(std::string, out_dir, "/tmp/bench_profiling",
          "Where logs, snapshots and traces go.");

namespace {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<std::string> BaseOverrides(int steps) {
  return {
      "data.train_files=[builtin:arithmetic/train]",
      "data.val_files=[]",
      "data.train_batch_size=16",
      "data.max_prompt_length=64",
      "data.max_response_length=32",
      "actor_rollout_ref.model.preset=" + absl::GetFlag(FLAGS_preset),
      "actor_rollout_ref.model.enable_gradient_checkpointing=false",
      "actor_rollout_ref.actor.ppo_mini_batch_size=8",
      "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
      "actor_rollout_ref.actor.use_kl_loss=true",
      "actor_rollout_ref.rollout.n=4",
      "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=16",
      "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=16",
      "algorithm.adv_estimator=grpo",
      "trainer.logger=[file]",
      "trainer.val_before_train=false",
      "trainer.n_gpus_per_node=1",
      "trainer.resume_mode=disable",
      absl::StrCat("trainer.total_training_steps=", steps),
  };
}

struct Mode {
  const char* name;
  std::vector<std::string> overrides;
  std::vector<double> step_s, stop_s, rest_s;
  std::vector<double> run_step_s;  // median step time of each run (round)
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  const int steps = absl::GetFlag(FLAGS_steps);
  const std::string out = absl::GetFlag(FLAGS_out_dir);
  const std::string all_steps = [&] {
    std::string s = "global_profiler.steps=[";
    for (int i = 1; i <= steps; ++i) absl::StrAppend(&s, i > 1 ? "," : "", i);
    return s + "]";
  }();
  std::vector<Mode> modes = {
      {"off", {}},
      {"memory",
       {"global_profiler.tool=torch_memory",
        absl::StrCat(
            "global_profiler.global_tool_config.torch_memory.stack_depth=",
            absl::GetFlag(FLAGS_stack_depth)),
        "global_profiler.save_path=" + out + "/memory"}},
      {"timeline",
       {"global_profiler.tool=timeline", all_steps,
        "actor_rollout_ref.actor.profiler.enable=true",
        "global_profiler.save_path=" + out + "/timeline"}},
  };
  std::printf("preset %s, %d steps per run, %d rounds, %d thread(s)\n",
              absl::GetFlag(FLAGS_preset).c_str(), steps,
              absl::GetFlag(FLAGS_rounds), absl::GetFlag(FLAGS_threads));
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    for (Mode& mode : modes) {
      std::vector<std::string> overrides = BaseOverrides(steps);
      overrides.insert(overrides.end(), mode.overrides.begin(),
                       mode.overrides.end());
      auto config = verl::rl::LoadPpoTrainerConfig("", overrides);
      if (!config.ok()) {
        std::fprintf(stderr, "bench_profiling: %s\n",
                     std::string(config.status().message()).c_str());
        return 1;
      }
      const std::string log = absl::StrCat(out, "/", mode.name, r, ".jsonl");
      std::remove(log.c_str());
      setenv("VERL_FILE_LOGGER_PATH", log.c_str(), 1);
      const auto t0 = std::chrono::steady_clock::now();
      auto result = verl::rl::RunPpo(*config, nullptr);
      const double wall =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
      if (!result.ok()) {
        std::fprintf(stderr, "bench_profiling: %s: %s\n", mode.name,
                     std::string(result.status().message()).c_str());
        return 1;
      }
      std::ifstream in(log);
      std::string line;
      double logged = 0;
      std::vector<double> run_steps;
      while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        const auto& d = j["data"];
        const double step_s = d.value("timing_s/step", 0.0);
        logged += step_s + d.value("timing_s/stop_profile", 0.0) +
                  d.value("timing_s/start_profile", 0.0);
        if (j["step"].get<int>() < 2) continue;  // warm-up step
        mode.step_s.push_back(step_s);
        run_steps.push_back(step_s);
        mode.stop_s.push_back(d.value("timing_s/stop_profile", 0.0));
      }
      mode.run_step_s.push_back(Median(run_steps));
      // Init and the post-update snapshots (after logging) are the rest.
      mode.rest_s.push_back((wall - logged) / steps);
    }
  }
  const double off = Median(modes[0].step_s);
  std::printf("%-9s %12s %10s %16s %18s\n", "mode", "step ms", "vs off",
              "stop_profile ms", "rest ms/step");
  for (const Mode& m : modes) {
    std::printf("%-9s %12.1f %10.4f %16.1f %18.1f\n", m.name,
                Median(m.step_s) * 1e3, Median(m.step_s) / off,
                Median(m.stop_s) * 1e3, Median(m.rest_s) * 1e3);
  }
  // The machine is shared: the paired ratio (each run against the off run
  // of its own round, median over rounds) is the steadier figure.
  for (int m = 1; m < 3; ++m) {
    std::vector<double> ratios;
    for (size_t r = 0; r < modes[m].run_step_s.size(); ++r)
      ratios.push_back(modes[m].run_step_s[r] / modes[0].run_step_s[r]);
    std::printf("%s / off: %.4f (median of per-round ratios%s)\n",
                modes[m].name, Median(ratios), m == 1 ? "; target < 1.05" : "");
  }
  return 0;
}
