// File: tools/train_profiling_test.cc
//
// //tools:train on 2 ranks with global_profiler.tool=timeline on all ranks:
// each rank writes {save_path}/step1/prof_rank-{R}.json, a valid Chrome
// trace (pid = rank) whose collectives (with their bytes) sit inside the RL
// phases that issue them.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/parallel/launcher.h"
#include "verl/profiler/timeline.h"
#include "verl/rl/trainer/testing/ppo_trainer_testutil.h"

namespace {

std::string Runfile(const std::string& path) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "verl", "/", path);
}

// Spans named `inner` that do not lie within a span named one of `outers`
// (on any thread: FSDP may issue collectives from its communication thread).
int Outside(const nlohmann::json& events, const std::string& inner,
            const std::vector<std::string>& outers, int* seen) {
  int outside = 0;
  for (const auto& i : events) {
    if (i["ph"] != "X" || i["name"] != inner) continue;
    ++*seen;
    const int64_t s = i["ts"], e = s + i["dur"].get<int64_t>();
    bool within = false;
    for (const auto& o : events) {
      if (o["ph"] != "X") continue;
      bool named = false;
      for (const auto& n : outers) named |= o["name"] == n;
      const int64_t os = o["ts"], oe = os + o["dur"].get<int64_t>();
      within |= named && os <= s && e <= oe;
    }
    outside += within ? 0 : 1;
  }
  return outside;
}

TEST(TrainProfilingTest, TwoRankTimelinesHoldCollectivesInsidePhases) {
  const std::string tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp + "/profile";
  setenv("VERL_FILE_LOGGER_ROOT", (tmp + "/logs").c_str(), 1);
  std::vector<std::string> args =
      verl::rl::testing::TinyPpoOverrides("grpo", "dist");
  for (const char* extra :
       {"trainer.n_gpus_per_node=2", "trainer.total_training_steps=1",
        // 2 trajectories per rank and mini-batch
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
        // FSDP over Gloo: fp32 compute (Gloo has no bf16 collectives)
        "actor_rollout_ref.actor.fsdp_config.dtype=float32",
        "global_profiler.tool=timeline", "global_profiler.steps=[1]",
        "actor_rollout_ref.actor.profiler.enable=true",
        "actor_rollout_ref.actor.profiler.all_ranks=true"}) {
    args.push_back(extra);
  }
  args.push_back("global_profiler.save_path=" + dir);
  verl::parallel::LaunchOptions options;
  options.nproc_per_node = 2;
  options.master_port = 0;
  auto code = verl::parallel::RunWorkers(Runfile("tools/train"), args, options);
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_EQ(*code, 0);

  const std::vector<std::string> phases = {
      "gen",           "reward",       "old_log_prob",
      "ref",           "values",       "adv",
      "update_critic", "update_actor", "update_weights",
      "testing",       "step"};
  for (int rank = 0; rank < 2; ++rank) {
    const std::string path =
        absl::StrCat(dir, "/step1/prof_rank-", rank, ".json");
    auto text = verl::core::ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status();
    const nlohmann::json trace = nlohmann::json::parse(*text);
    ASSERT_TRUE(verl::profiler::ValidateTrace(trace).ok())
        << verl::profiler::ValidateTrace(trace);
    const nlohmann::json& events = trace["traceEvents"];
    int64_t collective_bytes = 0;
    for (const auto& e : events) {
      EXPECT_EQ(e["pid"], rank);
      if (e.value("cat", "") == "collective") {
        EXPECT_EQ(e["args"]["group_size"], 2);
        collective_bytes += e["args"]["bytes"].get<int64_t>();
      }
    }
    EXPECT_GT(collective_bytes, 0) << path;
    // Collectives of the trainer's phases: gathers of generated batches and
    // of log-probs, and the update's all-reduces.
    for (const char* op : {"all_gather", "all_reduce"}) {
      int seen = 0;
      EXPECT_EQ(Outside(events, op, phases, &seen), 0) << op << " " << path;
      EXPECT_GT(seen, 0) << op << " " << path;
    }
    // The generated batch is gathered inside "gen".
    int gathers = 0;
    const int outside_gen = Outside(events, "all_gather", {"gen"}, &gathers);
    EXPECT_LT(outside_gen, gathers) << path;
  }
}

}  // namespace
