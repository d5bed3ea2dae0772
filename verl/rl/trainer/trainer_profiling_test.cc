// File: verl/rl/trainer/trainer_profiling_test.cc
//
// The trainer with global_profiler on (tiny GRPO run, one rank): memory
// snapshots under verl's names that read back, a nested Chrome trace of the
// RL phases, perf/* metrics and the TensorBoard logger end to end.
#include "verl/rl/trainer/trainer_profiling.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/pickle.h"
#include "verl/profiler/event_writer.h"
#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/tensorboard.pb.h"
#include "verl/profiler/timeline.h"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/ppo_trainer.h"
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"

namespace verl::rl {
namespace {

namespace fs = std::filesystem;

std::string TmpDir(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d != nullptr ? d : "/tmp") + "/" + name;
}

PpoTrainerConfig Config(const std::string& experiment,
                        const std::vector<std::string>& extra) {
  std::vector<std::string> overrides =
      testing::TinyPpoOverrides("grpo", experiment);
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  auto config = LoadPpoTrainerConfig("", overrides);
  EXPECT_TRUE(config.ok()) << config.status();
  return *config;
}

nlohmann::json ReadJson(const std::string& path) {
  auto text = core::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status();
  return nlohmann::json::parse(text.ok() ? *text : "null");
}

TEST(TrainerProfilingTest, MemorySnapshotsMetricsAndTensorBoard) {
  const std::string dir = TmpDir("mem");
  const std::string tb = TmpDir("tb");
  setenv("VERL_FILE_LOGGER_ROOT", TmpDir("logs").c_str(), 1);
  setenv("TENSORBOARD_DIR", tb.c_str(), 1);
  auto result = RunPpo(
      Config("mem",
             {"global_profiler.tool=torch_memory", "global_profiler.steps=[1]",
              "global_profiler.save_path=" + dir,
              "global_profiler.global_tool_config.torch_memory.stack_depth=4",
              "actor_rollout_ref.actor.profiler.enable=true",
              "trainer.logger=[file,tensorboard]"}),
      nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(profiler::MemoryTracker::Global().enabled());  // run ended

  // verl's names: the profiled step's snapshot, and after every step the
  // actor's post-update snapshot named after the next step.
  const std::string pid = std::to_string(getpid());
  const std::string snap = dir + "/step1/torch_memory_rank0_pid" + pid;
  for (const char* ext : {".pickle", ".json", ".svg"}) {
    EXPECT_TRUE(fs::exists(snap + ext)) << snap << ext;
  }
  EXPECT_FALSE(
      fs::exists(dir + "/step2/torch_memory_rank0_pid" + pid + ".pickle"));
  for (int step : {2, 3}) {
    const std::string post = dir + "/step" + std::to_string(step) +
                             "/post_update_step" + std::to_string(step) +
                             "_rank0_pid" + pid + ".pickle";
    EXPECT_TRUE(fs::exists(post)) << post;
  }

  auto pickle = core::ReadPickleFile(snap + ".pickle");
  ASSERT_TRUE(pickle.ok()) << pickle.status();
  EXPECT_FALSE((*pickle)["segments"].empty());
  ASSERT_EQ((*pickle)["device_traces"].size(), 1u);
  EXPECT_FALSE((*pickle)["device_traces"][0].empty());
  const nlohmann::json summary = ReadJson(snap + ".json");
  EXPECT_EQ((*pickle)["verl"]["peak_bytes"], summary["peak_bytes"]);
  // Every category the trainer annotates was seen.
  for (const char* c : {"parameters", "gradients", "optimizer_state",
                        "activations", "kv_cache"}) {
    EXPECT_GT(summary["peak_bytes_by_category"][c].get<int64_t>(), 0) << c;
  }
  // Phases are the RL phase names, nested as on the timeline.
  std::set<std::string> phases;
  for (const auto& [phase, bytes] : summary["peak_bytes_by_phase"].items())
    phases.insert(phase);
  for (const char* p : {"step/gen", "step/old_log_prob/micro_batch/forward",
                        "step/update_actor/micro_batch/forward",
                        "step/update_actor/micro_batch/backward",
                        "step/update_actor/optimizer_step"}) {
    EXPECT_TRUE(phases.count(p)) << p << " in " << summary.dump();
  }

  // perf/* and timing_s/* with verl's keys.
  const MetricMap& m = result->last_step_metrics;
  for (const char* key :
       {"perf/mfu/actor", "perf/mfu/actor_infer",
        "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb",
        "perf/cpu_memory_used_gb", "perf/throughput", "perf/total_num_tokens",
        "perf/time_per_step", "timing_s/start_profile", "timing_s/stop_profile",
        "timing_s/testing", "timing_s/update_weights",
        "timing_per_token_ms/update_actor"}) {
    EXPECT_TRUE(m.count(key)) << key;
  }
  EXPECT_GT(m.at("perf/mfu/actor"), 0);
  EXPECT_LT(m.at("perf/mfu/actor"), 1);
  EXPECT_GT(m.at("perf/mfu/actor_infer"), 0);
  EXPECT_GT(m.at("perf/max_memory_allocated_gb"), 0);

  // TensorBoard: one event file with the step's scalars.
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(tb))
    files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].find("events.out.tfevents."), std::string::npos);
  auto records = profiler::ReadRecords(files[0]);
  ASSERT_TRUE(records.ok()) << records.status();
  std::map<int64_t, std::set<std::string>> tags;
  for (const std::string& r : *records) {
    profiler::tensorboard::Event e;
    ASSERT_TRUE(e.ParseFromString(r));
    for (const auto& v : e.summary().value()) tags[e.step()].insert(v.tag());
  }
  for (int64_t step : {1, 2}) {
    EXPECT_TRUE(tags[step].count("perf/mfu/actor")) << step;
    EXPECT_TRUE(tags[step].count("timing_s/step")) << step;
    EXPECT_TRUE(tags[step].count("actor/pg_loss")) << step;
  }
  EXPECT_TRUE(tags[0].count("val-core/arithmetic/reward/mean@1"));
  unsetenv("TENSORBOARD_DIR");
}

// The span named `inner` lies within some span named `outer`.
bool Within(const nlohmann::json& events, const std::string& inner,
            const std::string& outer) {
  for (const auto& i : events) {
    if (i["ph"] != "X" || i["name"] != inner) continue;
    const int64_t s = i["ts"], e = s + i["dur"].get<int64_t>();
    for (const auto& o : events) {
      if (o["ph"] != "X" || o["name"] != outer) continue;
      const int64_t os = o["ts"], oe = os + o["dur"].get<int64_t>();
      if (os <= s && e <= oe) return true;
    }
  }
  return false;
}

TEST(TrainerProfilingTest, ContinuousTimelineNestsPhasesAndMicroBatches) {
  const std::string dir = TmpDir("trace");
  setenv("VERL_FILE_LOGGER_ROOT", TmpDir("logs").c_str(), 1);
  auto result =
      RunPpo(Config("trace", {"global_profiler.tool=timeline",
                              "global_profiler.steps=[1,2]",
                              "global_profiler.profile_continuous_steps=true",
                              "global_profiler.save_path=" + dir,
                              "actor_rollout_ref.actor.profiler.enable=true"}),
             nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(profiler::MemoryTracker::Global().enabled());
  EXPECT_FALSE(profiler::Timeline::Global().enabled());
  // Consecutive profiled steps share one trace, named after the first.
  EXPECT_FALSE(fs::exists(dir + "/step2/prof_rank-0.json"));
  const nlohmann::json trace = ReadJson(dir + "/step1/prof_rank-0.json");
  ASSERT_TRUE(profiler::ValidateTrace(trace).ok())
      << profiler::ValidateTrace(trace);
  const nlohmann::json& events = trace["traceEvents"];
  int steps = 0;
  for (const auto& e : events) steps += e["name"] == "step" ? 1 : 0;
  EXPECT_EQ(steps, 2);
  for (const char* phase : {"gen", "reward", "old_log_prob", "ref", "adv",
                            "update_actor", "update_weights"}) {
    EXPECT_TRUE(Within(events, phase, "step")) << phase;
  }
  EXPECT_TRUE(Within(events, "micro_batch", "update_actor"));
  EXPECT_TRUE(Within(events, "forward", "micro_batch"));
  EXPECT_TRUE(Within(events, "backward", "micro_batch"));
  EXPECT_TRUE(Within(events, "optimizer_step", "update_actor"));
  EXPECT_TRUE(Within(events, "forward", "ref"));
  // Validation after step 2 is inside the profiled window, outside "step".
  int testing = 0;
  for (const auto& e : events) testing += e["name"] == "testing" ? 1 : 0;
  EXPECT_EQ(testing, 1);
  EXPECT_FALSE(Within(events, "testing", "step"));
}

// Per-role profiler blocks: the critic alone traces (tool torch: verl's
// .json.gz) and the reference alone snapshots memory; each covers only its
// own phases, and without the actor's torch_memory no post-update snapshot.
TEST(TrainerProfilingTest, PerRoleProfilersCoverOnlyTheirPhases) {
  const std::string dir = TmpDir("roles");
  setenv("VERL_FILE_LOGGER_ROOT", TmpDir("logs").c_str(), 1);
  PpoTrainerConfig config = [&] {
    std::vector<std::string> overrides =
        testing::TinyPpoOverrides("gae", "roles");
    for (const char* o :
         {"global_profiler.tool=torch", "global_profiler.steps=[2]",
          "critic.profiler.enable=true",
          "actor_rollout_ref.ref.profiler.enable=true",
          "actor_rollout_ref.ref.profiler.tool=torch_memory",
          "actor_rollout_ref.ref.profiler.tool_config.torch_memory.stack_depth="
          "2"})
      overrides.push_back(o);
    overrides.push_back("global_profiler.save_path=" + dir);
    auto c = LoadPpoTrainerConfig("", overrides);
    EXPECT_TRUE(c.ok()) << c.status();
    return *c;
  }();
  auto result = RunPpo(config, nullptr);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(profiler::Timeline::Global().enabled());
  EXPECT_FALSE(profiler::MemoryTracker::Global().enabled());
  EXPECT_FALSE(fs::exists(dir + "/step1"));
  EXPECT_FALSE(fs::exists(dir + "/step2/prof_rank-0.json"));
  const std::string gz = dir + "/step2/prof_rank-0.json.gz";
  ASSERT_TRUE(fs::exists(gz)) << gz;
  const std::string unzipped = TmpDir("roles_trace.json");
  ASSERT_EQ(std::system(("gzip -dc " + gz + " > " + unzipped).c_str()), 0);
  const nlohmann::json trace = ReadJson(unzipped);
  ASSERT_TRUE(profiler::ValidateTrace(trace).ok());
  std::set<std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") names.insert(e["name"].get<std::string>());
  for (const char* n : {"values", "update_critic", "forward", "backward"})
    EXPECT_TRUE(names.count(n)) << n;
  for (const char* n : {"step", "gen", "update_actor", "ref", "old_log_prob"})
    EXPECT_FALSE(names.count(n)) << n;
  EXPECT_TRUE(Within(trace["traceEvents"], "backward", "update_critic"));

  // The reference's snapshot: only events of phases under "ref".
  const std::string pid = std::to_string(getpid());
  auto pickle = core::ReadPickleFile(dir + "/step2/torch_memory_rank0_pid" +
                                     pid + ".pickle");
  ASSERT_TRUE(pickle.ok()) << pickle.status();
  const nlohmann::json& events = (*pickle)["device_traces"][0];
  int in_ref = 0;
  for (const auto& e : events) {
    const std::string phase = e.value("phase", "");
    if (e["action"] == "alloc") {
      EXPECT_NE(phase.find("ref"), std::string::npos) << phase;
      ++in_ref;
    }
  }
  EXPECT_GT(in_ref, 0);
  EXPECT_FALSE(fs::exists(dir + "/step3"));  // no post-update snapshots
}

TEST(TrainerProfilingTest, PeakFlopsFromTableConfigOrMeasurement) {
  PpoTrainerConfig config = Config("peak", {});
  EXPECT_DOUBLE_EQ(TrainerProfiler(config, 0, 1).peak_flops(), 448e9);
  config.mutable_global_profiler()->set_peak_flops(1e11);
  EXPECT_DOUBLE_EQ(TrainerProfiler(config, 0, 1).peak_flops(), 1e11);
  config.mutable_global_profiler()->set_measure_peak_flops(true);
  const double measured = TrainerProfiler(config, 0, 1).peak_flops();
  EXPECT_GT(measured, 1e8);
  EXPECT_LT(measured, 1e14);
}

}  // namespace
}  // namespace verl::rl
