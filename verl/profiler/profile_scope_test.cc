#include "verl/profiler/profile_scope.h"

#include <torch/types.h>

#include "gtest/gtest.h"

namespace verl::profiler {
namespace {

TEST(ProfileScopeTest, SpanAndMemoryPhaseShareTheName) {
  Timeline::Global().Clear();
  Timeline::Global().Enable(0);
  MemoryTracker::Global().Enable({1000, 0});
  at::Tensor kept;
  {
    ProfileScope outer("update_actor");
    ProfileScope inner("forward", MemoryCategory::kActivations);
    EXPECT_EQ(CurrentMemoryPhase(), "update_actor/forward");
    EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kActivations);
    kept = torch::ones({1024}, torch::kFloat);
  }
  EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kOther);
  const MemoryStats stats = MemoryTracker::Global().Stats();
  MemoryTracker::Global().Disable();
  Timeline::Global().Disable();
  EXPECT_GE(stats.live_by_phase.at("update_actor/forward"), 4096);
  EXPECT_GE(
      stats.live_by_category[static_cast<int>(MemoryCategory::kActivations)],
      4096);

  const auto events = Timeline::Global().Events();
  ASSERT_EQ(events.size(), 2u);  // inner closes first
  EXPECT_EQ(events[0].name, "forward");
  EXPECT_EQ(events[1].name, "update_actor");
  EXPECT_LE(events[1].start_us, events[0].start_us);
  EXPECT_GE(events[1].start_us + events[1].duration_us,
            events[0].start_us + events[0].duration_us);
}

TEST(ProfileScopeTest, KeepsTheCurrentCategoryWhenNoneIsGiven) {
  MemoryCategoryScope cat(MemoryCategory::kGradients);
  ProfileScope scope("backward");
  EXPECT_EQ(CurrentMemoryCategory(), MemoryCategory::kGradients);
}

}  // namespace
}  // namespace verl::profiler
