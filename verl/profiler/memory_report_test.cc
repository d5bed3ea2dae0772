// File: verl/profiler/memory_report_test.cc
// The report of a hand-built trace with known peak, phases and sites.
#include "verl/profiler/memory_report.h"

#include <cstdlib>

#include "gtest/gtest.h"
#include "verl/core/pickle.h"
#include "verl/core/test_util.h"
#include "verl/profiler/memory_snapshot.h"

namespace verl::profiler {
namespace {

using ::verl::core::testing::StatusIs;

// A trace with live blocks A (100 B, site qsort) and B (50 B, site abort) and
// a freed 1000 B block C (site abort) that made the peak in phase "gen/x".
MemoryTrace KnownTrace() {
  MemoryTrace t;
  t.phases = {"", "gen", "gen/x", "update"};
  t.stacks = {{reinterpret_cast<void*>(&qsort)},
              {reinterpret_cast<void*>(&abort)}};
  using A = MemoryEvent::Action;
  const auto cat = MemoryCategory::kActivations;
  t.events = {{A::kAlloc, cat, 0x1000, 100, 1, 1, 0},
              {A::kAlloc, cat, 0x2000, 1000, 2, 2, 1},
              {A::kFree, cat, 0x2000, 1000, 3, 2, 1},
              {A::kAlloc, MemoryCategory::kParameters, 0x3000, 50, 4, 3, 1}};
  t.live = {{0x1000, 100, 1, cat, 1, 0},
            {0x3000, 50, 4, MemoryCategory::kParameters, 3, 1}};
  t.stats.live_bytes = 150;
  t.stats.live_blocks = 2;
  t.stats.live_by_category[static_cast<int>(cat)] = 100;
  t.stats.live_by_category[static_cast<int>(MemoryCategory::kParameters)] = 50;
  t.stats.peak_bytes = 1100;
  t.stats.peak_phase = "gen/x";
  t.now_us = 5;
  return t;
}

TEST(MemoryReportTest, KnownSnapshot) {
  auto snap = core::ReadPickle(MemorySnapshotPickle(KnownTrace()));
  ASSERT_TRUE(snap.ok()) << snap.status();
  auto r = AnalyzeMemorySnapshot(*snap, 5);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->live_bytes, 150);
  EXPECT_EQ(r->live_blocks, 2);
  EXPECT_EQ(r->live_by_category.at("activations"), 100);
  EXPECT_EQ(r->live_by_category.at("parameters"), 50);
  EXPECT_TRUE(r->has_summary);
  EXPECT_EQ(r->peak_bytes, 1100);
  EXPECT_EQ(r->peak_phase, "gen/x");
  EXPECT_EQ(r->trace_peak_bytes, 1100);
  EXPECT_EQ(r->trace_peak_phase, "gen/x");
  EXPECT_EQ(r->trace_events, 4);
  ASSERT_EQ(r->top_traced_sites.size(), 2u);
  EXPECT_EQ(r->top_traced_sites[0].bytes, 1050);
  EXPECT_EQ(r->top_traced_sites[0].count, 2);
  EXPECT_NE(r->top_traced_sites[0].site.find("abort (libc.so"),
            std::string::npos)
      << r->top_traced_sites[0].site;
  EXPECT_EQ(r->top_traced_sites[1].bytes, 100);
  ASSERT_EQ(r->top_live_sites.size(), 2u);
  EXPECT_NE(r->top_live_sites[0].site.find("qsort"), std::string::npos);
  EXPECT_EQ(r->top_live_sites[0].bytes, 100);

  const std::string text = FormatMemoryReport(*r);
  EXPECT_NE(text.find("peak: 0.001 MiB (1100 bytes) in phase gen/x"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1050 bytes      2 x  abort"), std::string::npos) << text;
}

TEST(MemoryReportTest, WithoutSummaryThePeakComesFromTheTrace) {
  auto snap = core::ReadPickle(MemorySnapshotPickle(KnownTrace()));
  ASSERT_TRUE(snap.ok());
  snap->erase("verl");
  auto r = AnalyzeMemorySnapshot(*snap);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_summary);
  EXPECT_EQ(r->peak_bytes, 1100);
  EXPECT_EQ(r->peak_phase, "gen/x");
}

TEST(MemoryReportTest, RejectsNonSnapshots) {
  EXPECT_THAT(
      AnalyzeMemorySnapshot(nlohmann::json::array()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "memory snapshot: expected a dict with a 'segments' list"));
  EXPECT_THAT(
      AnalyzeMemorySnapshot(nlohmann::json::object()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "memory snapshot: expected a dict with a 'segments' list"));
}

}  // namespace
}  // namespace verl::profiler
