// The profiler as `--define=verl_profiler=off` compiles it (these targets
// build the same sources with VERL_PROFILER_DISABLED): no allocator hook is
// installed, nothing is recorded, and the scopes are empty.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <c10/core/CPUAllocator.h>

#include "gtest/gtest.h"
#include "verl/profiler/build_config.h"
#include "verl/profiler/memory_tracker.h"
#include "verl/profiler/timeline.h"

namespace verl::profiler {
namespace {

TEST(CompiledOutTest, ReportsCompiledOut) {
  EXPECT_FALSE(ProfilerCompiledIn());
}

TEST(CompiledOutTest, TrackerInstallsNoHookAndRecordsNothing) {
  c10::Allocator* before = c10::GetCPUAllocator();
  MemoryTracker& tracker = MemoryTracker::Global();
  tracker.Enable({/*trace_alloc_max_entries=*/1000, /*stack_depth=*/8});
  EXPECT_FALSE(tracker.enabled());
  EXPECT_EQ(c10::GetCPUAllocator(), before);
  {
    MemoryScope phase("update_actor");
    MemoryCategoryScope cat(MemoryCategory::kActivations);
    EXPECT_EQ(CurrentMemoryPhase(), "");
    EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kOther);
    at::Tensor t = at::ones({1024});
    EXPECT_EQ(t.sum().item<float>(), 1024.0f);
  }
  const MemoryStats stats = tracker.Stats();
  EXPECT_EQ(stats.num_allocs, 0);
  EXPECT_EQ(stats.live_bytes, 0);
  EXPECT_TRUE(tracker.Snapshot().events.empty());
  tracker.Disable();
  EXPECT_EQ(c10::GetCPUAllocator(), before);
}

TEST(CompiledOutTest, TimelineRecordsNothing) {
  Timeline& t = Timeline::Global();
  t.Enable(/*rank=*/0);
  EXPECT_FALSE(t.enabled());
  { TraceScope s("gen"); }
  EXPECT_TRUE(t.Events().empty());
  EXPECT_TRUE(ValidateTrace(t.ToJson()).ok());
}

}  // namespace
}  // namespace verl::profiler
