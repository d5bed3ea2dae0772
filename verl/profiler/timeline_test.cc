#include "verl/profiler/timeline.h"

#include <cstdlib>
#include <thread>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::profiler {
namespace {

using ::verl::core::testing::StatusIs;

TEST(TimelineTest, DisabledRecordsNothing) {
  Timeline::Global().Disable();
  Timeline::Global().Clear();
  { TraceScope s("gen"); }
  EXPECT_TRUE(Timeline::Global().Events().empty());
}

// A ".json.gz" path is written gzip-compressed; GNU gzip (an independent
// implementation) decompresses it back to the same trace as ".json".
TEST(TimelineTest, GzPathWritesGzipThatGunzipReads) {
  Timeline& t = Timeline::Global();
  t.Clear();
  t.Enable(/*rank=*/1);
  for (int i = 0; i < 50; ++i) TraceScope s("micro_batch");
  t.Disable();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR"));
  ASSERT_TRUE(t.WriteJson(dir + "/p.json").ok());
  ASSERT_TRUE(t.WriteJson(dir + "/p.json.gz").ok());
  auto raw = core::ReadFile(dir + "/p.json.gz");
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_GE(raw->size(), 2u);
  EXPECT_EQ(static_cast<unsigned char>((*raw)[0]), 0x1f);  // gzip magic
  EXPECT_EQ(static_cast<unsigned char>((*raw)[1]), 0x8b);
  auto plain = core::ReadFile(dir + "/p.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_LT(raw->size(), plain->size());
  ASSERT_EQ(
      std::system(("gzip -dc " + dir + "/p.json.gz > " + dir + "/unzipped.json")
                      .c_str()),
      0);
  auto unzipped = core::ReadJsonFile(dir + "/unzipped.json");
  ASSERT_TRUE(unzipped.ok()) << unzipped.status();
  EXPECT_EQ(*unzipped, nlohmann::json::parse(*plain));
  EXPECT_TRUE(ValidateTrace(*unzipped).ok());
}

TEST(TimelineTest, SpansNestPerThreadAndJsonIsValid) {
  Timeline& t = Timeline::Global();
  t.Clear();
  t.Enable(/*rank=*/3);
  {
    TraceScope step("step");
    {
      TraceScope gen("gen");
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    {
      TraceScope update("update_actor");
      TraceScope comm("all_gather", "collective", {{"bytes", 4096}});
    }
  }
  std::thread([] { TraceScope other("reward"); }).join();
  t.Disable();

  const std::string path =
      std::string(std::getenv("TEST_TMPDIR")) + "/trace.json";
  ASSERT_TRUE(t.WriteJson(path).ok());
  auto json = core::ReadJsonFile(path);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ((*json)["displayTimeUnit"], "ms");
  std::map<std::string, nlohmann::json> spans;
  int metadata = 0;
  for (const auto& e : (*json)["traceEvents"]) {
    EXPECT_EQ(e["pid"], 3);
    if (e["ph"] == "M") {
      ++metadata;
      continue;
    }
    EXPECT_EQ(e["ph"], "X");
    spans[e["name"]] = e;
  }
  EXPECT_EQ(metadata, 3);  // process name + two threads
  ASSERT_EQ(spans.size(), 5u);
  EXPECT_GE(spans["gen"]["dur"].get<int64_t>(), 2000);
  EXPECT_EQ(spans["all_gather"]["args"]["bytes"], 4096);
  EXPECT_EQ(spans["all_gather"]["cat"], "collective");
  EXPECT_NE(spans["reward"]["tid"], spans["step"]["tid"]);
  // Children lie within their parents on the same thread.
  auto within = [&](const std::string& child, const std::string& parent) {
    const auto& c = spans[child];
    const auto& p = spans[parent];
    EXPECT_EQ(c["tid"], p["tid"]);
    EXPECT_GE(c["ts"].get<int64_t>(), p["ts"].get<int64_t>());
    EXPECT_LE(c["ts"].get<int64_t>() + c["dur"].get<int64_t>(),
              p["ts"].get<int64_t>() + p["dur"].get<int64_t>());
  };
  within("gen", "step");
  within("update_actor", "step");
  within("all_gather", "update_actor");
  // Siblings do not overlap.
  EXPECT_LE(
      spans["gen"]["ts"].get<int64_t>() + spans["gen"]["dur"].get<int64_t>(),
      spans["update_actor"]["ts"].get<int64_t>());
}

TEST(TimelineTest, EventCapIsRespected) {
  Timeline& t = Timeline::Global();
  t.Clear();
  t.Enable(0, /*max_events=*/2);
  for (int i = 0; i < 5; ++i) TraceScope s("x");
  t.Disable();
  EXPECT_EQ(t.Events().size(), 2u);
  EXPECT_EQ(t.ToJson()["otherData"]["dropped_events"], 3);
}

}  // namespace
}  // namespace verl::profiler

namespace verl::profiler {
namespace {

nlohmann::json X(const char* name, int64_t ts, int64_t dur, int64_t tid = 0) {
  return {{"name", name}, {"ph", "X"}, {"ts", ts},
          {"dur", dur},   {"pid", 0},  {"tid", tid}};
}

TEST(TimelineTest, ValidateTraceAcceptsNestedAndRejectsOverlap) {
  nlohmann::json ok = {
      {"traceEvents",
       {X("step", 0, 100), X("gen", 0, 40), X("update_actor", 50, 50),
        X("forward", 60, 10), X("other_thread", 30, 100, /*tid=*/1)}}};
  EXPECT_TRUE(ValidateTrace(ok).ok()) << ValidateTrace(ok);
  nlohmann::json bad = {{"traceEvents", {X("step", 0, 100), X("gen", 90, 20)}}};
  const absl::Status s = ValidateTrace(bad);
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument,
                          "trace: span 'gen' [90, 110) overlaps 'step'"));
  EXPECT_NE(s.message().find("'gen'"), std::string::npos) << s;
  EXPECT_THAT(ValidateTrace(
                  {{"traceEvents", {{{"name", "x"}, {"ph", "X"}, {"ts", 1}}}}}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trace event 0 (x): needs integer dur"));
  EXPECT_THAT(ValidateTrace(nlohmann::json::object()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trace: no traceEvents array"));
}

}  // namespace
}  // namespace verl::profiler
