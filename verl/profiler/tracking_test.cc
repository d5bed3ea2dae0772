#include "verl/profiler/tracking.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/test_util.h"
#include "verl/profiler/event_writer.h"

namespace verl::profiler {
namespace {

using ::verl::core::testing::StatusIs;

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

TEST(TrackingTest, FileBackendWritesVerlJsonl) {
  const std::string root = TempDir() + "/logs";
  setenv("VERL_FILE_LOGGER_ROOT", root.c_str(), 1);
  unsetenv("VERL_FILE_LOGGER_PATH");
  TrackingOptions o;
  o.project_name = "proj";
  o.experiment_name = "exp";
  o.backends = {"file"};
  {
    auto tracker = Tracker::Create(o);
    ASSERT_TRUE(tracker.ok()) << tracker.status();
    EXPECT_EQ((*tracker)->file_path(), root + "/proj/exp.jsonl");
    ASSERT_TRUE((*tracker)
                    ->Log({{"actor/pg_loss", 0.25}, {"bad", std::nan("")}}, 1)
                    .ok());
  }
  {
    // A second tracker (a resumed run) appends rather than truncating.
    auto tracker = Tracker::Create(o);
    ASSERT_TRUE((*tracker)->Log({{"actor/pg_loss", 0.5}}, 2).ok());
  }
  std::ifstream in(root + "/proj/exp.jsonl");
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 1);
  EXPECT_DOUBLE_EQ(lines[0]["data"]["actor/pg_loss"].get<double>(), 0.25);
  EXPECT_TRUE(lines[0]["data"]["bad"].is_null());
  EXPECT_EQ(lines[1]["step"], 2);

  const std::string explicit_path = TempDir() + "/explicit/m.jsonl";
  setenv("VERL_FILE_LOGGER_PATH", explicit_path.c_str(), 1);
  auto tracker = Tracker::Create(o);
  ASSERT_TRUE(tracker.ok());
  EXPECT_EQ((*tracker)->file_path(), explicit_path);
  unsetenv("VERL_FILE_LOGGER_PATH");
}

TEST(TrackingTest, TensorBoardBackendUsesEnvDir) {
  const std::string dir = TempDir() + "/tbdir";
  setenv("TENSORBOARD_DIR", dir.c_str(), 1);
  TrackingOptions o;
  o.backends = {"tensorboard"};
  auto tracker = Tracker::Create(o);
  ASSERT_TRUE(tracker.ok()) << tracker.status();
  EXPECT_EQ((*tracker)->tensorboard_dir(), dir);
  ASSERT_TRUE((*tracker)->Log({{"a/b", 3}}, 5).ok());
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  int files = 0;
  while (dirent* e = readdir(d)) {
    if (std::string(e->d_name).rfind("events.out.tfevents.", 0) == 0) {
      ++files;
      auto records = ReadRecords(dir + "/" + e->d_name);
      ASSERT_TRUE(records.ok());
      EXPECT_EQ(records->size(), 2u);
    }
  }
  closedir(d);
  EXPECT_EQ(files, 1);
  unsetenv("TENSORBOARD_DIR");
}

TEST(TrackingTest, UnknownBackendIsAnError) {
  TrackingOptions o;
  o.backends = {"console", "bogus"};
  auto tracker = Tracker::Create(o);
  ASSERT_THAT(tracker,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "trainer.logger: unsupported backend \"bogus\""));
  EXPECT_NE(tracker.status().message().find("console, file, tensorboard"),
            std::string::npos);
}

// verl's default [console, wandb]: wandb (no network) is skipped with one
// warning and the console logger still runs.
TEST(TrackingTest, NetworkLoggersWarnOnceAndAreSkipped) {
  const std::string path = TempDir() + "/console_wandb.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  TrackingOptions o;
  o.console = f;
  o.backends = {"console", "wandb"};
  ::testing::internal::CaptureStderr();
  auto tracker = Tracker::Create(o);
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(tracker.ok()) << tracker.status();
  EXPECT_EQ((*tracker)->skipped(), std::vector<std::string>{"wandb"});
  EXPECT_NE(err.find("\"wandb\" needs a network service"), std::string::npos)
      << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_TRUE((*tracker)->Log({{"a/b", 1.0}}, 1).ok());
  std::fclose(f);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find("step 1"), std::string::npos) << all;
}

TEST(TrackingTest, ConsoleFormatGroupsByPrefix) {
  const std::string text = FormatConsoleStep({{"actor/pg_loss", 0.5},
                                              {"actor/grad_norm", 1.5},
                                              {"timing_s/step", 2.0},
                                              {"critic/score/mean", 0.75}},
                                             3, 10, 125);
  EXPECT_NE(text.find("step 3/10 | 2.00s | eta 2m05s"), std::string::npos)
      << text;
  EXPECT_NE(text.find("actor/"), std::string::npos);
  EXPECT_NE(text.find("grad_norm=1.5  pg_loss=0.5"), std::string::npos) << text;
  EXPECT_NE(text.find("score/mean=0.75"), std::string::npos);
  EXPECT_EQ(FormatDuration(3725), "1h02m");
  EXPECT_EQ(FormatDuration(45), "45s");
}

TEST(TrackingTest, ConsoleBackendPrintsEachStep) {
  const std::string path = TempDir() + "/console.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  TrackingOptions o;
  o.console = f;
  o.total_steps = 4;
  auto tracker = Tracker::Create(o);
  ASSERT_TRUE(tracker.ok());
  ASSERT_TRUE((*tracker)->Log({{"x/y", 1}}, 1).ok());
  ASSERT_TRUE((*tracker)->Log({{"x/y", 2}}, 2).ok());
  std::fclose(f);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NE(all.find("step 1/4"), std::string::npos);
  EXPECT_NE(all.find("step 2/4"), std::string::npos);
  EXPECT_NE(all.find("eta"), std::string::npos);
}

}  // namespace
}  // namespace verl::profiler
