// File: verl/profiler/memory_profiler_test.cc
// verl's file names, step and rank gating, and the post-update dumps.
#include "verl/profiler/memory_profiler.h"

#include <ATen/ATen.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/pickle.h"
#include "verl/core/test_util.h"
#include "verl/profiler/memory_tracker.h"

namespace verl::profiler {
namespace {

using ::verl::core::testing::StatusIs;

namespace fs = std::filesystem;

std::string TmpDir(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d != nullptr ? d : "/tmp") + "/" + name;
}

GlobalProfilerConfig Global(const std::string& save_path) {
  GlobalProfilerConfig g;
  g.set_tool(ProfilerTool::torch_memory);
  g.add_steps(1);
  g.add_steps(3);
  g.set_save_path(save_path);
  g.mutable_global_tool_config()->mutable_torch_memory()->set_stack_depth(4);
  return g;
}

TEST(MemoryProfilerTest, WritesVerlFileNamesForProfiledStepsAndRanks) {
  const std::string dir = TmpDir("profile");
  ProfilerConfig role;
  role.set_enable(true);
  role.add_ranks(0);
  role.add_ranks(2);
  {
    MemoryProfiler p0(Global(dir), role, /*rank=*/0, /*pid=*/77);
    MemoryProfiler p1(Global(dir), role, /*rank=*/1, /*pid=*/78);
    ASSERT_TRUE(p0.recording());
    EXPECT_TRUE(MemoryTracker::Global().enabled());
    EXPECT_TRUE(p0.ProfilesStep(1));
    EXPECT_FALSE(p0.ProfilesStep(2));
    EXPECT_FALSE(p1.ProfilesStep(1));
    EXPECT_EQ(p0.StepSnapshotPath(3),
              dir + "/step3/torch_memory_rank0_pid77.pickle");
    EXPECT_EQ(p0.PostUpdatePath(3),
              dir + "/step3/post_update_step3_rank0_pid77.pickle");

    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_TRUE(p0.StartStep(step).ok());
      ASSERT_TRUE(p1.StartStep(step).ok());
      at::Tensor t = at::empty({1024}, at::kFloat);
      ASSERT_TRUE(p0.StopStep().ok());
      ASSERT_TRUE(p1.StopStep().ok());
      ASSERT_TRUE(p0.DumpPostUpdate(step).ok());
      ASSERT_TRUE(p1.DumpPostUpdate(step).ok());
    }
  }
  EXPECT_FALSE(MemoryTracker::Global().enabled());
  for (int64_t step = 1; step <= 3; ++step) {
    const std::string s = dir + "/step" + std::to_string(step);
    const bool profiled = step != 2;
    EXPECT_EQ(fs::exists(s + "/torch_memory_rank0_pid77.pickle"), profiled);
    EXPECT_EQ(fs::exists(s + "/torch_memory_rank0_pid77.json"), profiled);
    EXPECT_EQ(fs::exists(s + "/torch_memory_rank0_pid77.svg"), profiled);
    EXPECT_FALSE(fs::exists(s + "/torch_memory_rank1_pid78.pickle"));
    EXPECT_TRUE(fs::exists(s + "/post_update_step" + std::to_string(step) +
                           "_rank0_pid77.pickle"));
    EXPECT_TRUE(fs::exists(s + "/post_update_step" + std::to_string(step) +
                           "_rank1_pid78.pickle"));
  }
  // The step snapshot was taken while the step's tensor was alive.
  auto snap =
      core::ReadPickleFile(dir + "/step1/torch_memory_rank0_pid77.pickle");
  ASSERT_TRUE(snap.ok()) << snap.status();
  bool found = false;
  for (const auto& seg : (*snap)["segments"])
    found |= seg["total_size"] == 4096;
  EXPECT_TRUE(found);
}

TEST(MemoryProfilerTest, OtherToolsRecordNothing) {
  const std::string dir = TmpDir("other");
  GlobalProfilerConfig g = Global(dir);
  g.set_tool(ProfilerTool::torch);
  ProfilerConfig role;
  role.set_enable(true);
  role.set_all_ranks(true);
  MemoryProfiler p(g, role, 5);
  EXPECT_FALSE(p.recording());
  EXPECT_FALSE(MemoryTracker::Global().enabled());
  ASSERT_TRUE(p.StartStep(1).ok());
  ASSERT_TRUE(p.StopStep().ok());
  ASSERT_TRUE(p.DumpPostUpdate(1).ok());
  EXPECT_FALSE(fs::exists(dir));
}

TEST(MemoryProfilerTest, RoleToolAndAllRanks) {
  const std::string dir = TmpDir("role");
  GlobalProfilerConfig g = Global(dir);
  g.clear_tool();
  ProfilerConfig role;
  role.set_tool(ProfilerTool::torch_memory);
  role.set_enable(true);
  role.set_all_ranks(true);
  role.set_save_path(dir + "/actor");
  MemoryProfiler p(g, role, 7, 9);
  EXPECT_TRUE(p.ProfilesStep(3));
  ASSERT_TRUE(p.StartStep(3).ok());
  ASSERT_TRUE(p.StopStep().ok());
  EXPECT_TRUE(fs::exists(dir + "/actor/step3/torch_memory_rank7_pid9.pickle"));
}

TEST(MemoryProfilerTest, UnwritableSavePathIsAnError) {
  const std::string file = TmpDir("a_file");
  ASSERT_TRUE(core::WriteFileAtomic(file, "x").ok());
  ProfilerConfig role;
  role.set_enable(true);
  MemoryProfiler p(Global(file), role, 0, 1);
  ASSERT_TRUE(p.StartStep(1).ok());
  const absl::Status s = p.StopStep();
  ASSERT_THAT(s, StatusIs(absl::StatusCode::kInternal,
                          "mkdir failed: Not a directory"));
  EXPECT_NE(s.message().find("rank 0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("a_file"), std::string::npos) << s;
}

// KeepPhases keeps the events of matching phases (by path component) and
// the other half of their alloc/free pairs, nothing else.
TEST(MemoryProfilerTest, KeepPhasesKeepsPhaseEventsAndTheirPairs) {
  MemoryTrace t;
  t.phases = {"", "step/values", "step/values/forward", "step/gen",
              "step/update_critic_x"};
  using A = MemoryEvent::Action;
  auto ev = [](A a, uint64_t addr, int32_t phase) {
    MemoryEvent e;
    e.action = a;
    e.addr = addr;
    e.size = 8;
    e.phase = phase;
    return e;
  };
  t.events = {
      ev(A::kAlloc, 1, 2),  // kept: values/forward
      ev(A::kAlloc, 2, 3),  // gen: dropped
      ev(A::kFree, 1, 3),   // kept: frees a kept block
      ev(A::kFree, 2, 1),   // kept: a free inside values
      ev(A::kAlloc, 3, 4),  // "update_critic_x" is not "update_critic"
      ev(A::kFree, 3, 0),   // dropped with its alloc
      ev(A::kAlloc, 1, 3),  // gen reuses addr 1: dropped
      ev(A::kFree, 1, 0),   // dropped with it
  };
  t.live = {LiveBlock{9, 8}};
  const MemoryTrace k = KeepPhases(t, {"values", "update_critic"});
  ASSERT_EQ(k.events.size(), 3u);
  EXPECT_EQ(k.events[0].addr, 1u);
  EXPECT_EQ(k.events[0].action, A::kAlloc);
  EXPECT_EQ(k.events[1].addr, 1u);
  EXPECT_EQ(k.events[1].action, A::kFree);
  EXPECT_EQ(k.events[2].addr, 2u);
  EXPECT_EQ(k.live.size(), 1u);
  EXPECT_EQ(KeepPhases(t, {}).events.size(), t.events.size());
}

}  // namespace
}  // namespace verl::profiler
