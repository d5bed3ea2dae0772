#include "verl/profiler/progress.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"

namespace verl::profiler {
namespace {

TEST(ProgressBarTest, FormatShowsCountRateAndEta) {
  EXPECT_EQ(ProgressBar::Format("gen", 8, 32, "prompts", 400, 2.0),
            "[gen] 8/32 prompts  25% | 200.0 tok/s | 2s elapsed | eta 6s");
  EXPECT_EQ(ProgressBar::Format("validation", 3, 0, "batches", -1, 61),
            "[validation] 3 batches | 1m01s elapsed");
  // Done: no eta.
  EXPECT_EQ(ProgressBar::Format("gen", 4, 4, "prompts", -1, 1.0),
            "[gen] 4/4 prompts 100% | 1s elapsed");
}

TEST(ProgressBarTest, NonTerminalPrintsThrottledLinesAndOneFinalLine) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    ProgressBar bar("gen", 10, "prompts", f, /*min_interval_s=*/3600);
    for (int i = 1; i <= 10; ++i) bar.Update(i, 10 * i);
  }  // the destructor prints the final line
  std::rewind(f);
  char buf[512];
  std::string all;
  while (std::fgets(buf, sizeof(buf), f)) all += buf;
  std::fclose(f);
  EXPECT_EQ(all.find("[gen] 10/10 prompts 100%"), 0u) << all;
  EXPECT_EQ(all.find('\n'), all.size() - 1) << all;  // a single line
}

TEST(ProgressBarTest, NullStreamIsSilent) {
  ProgressBar bar("gen", 10, "prompts", nullptr);
  bar.Update(5);
  bar.Finish();
}

}  // namespace
}  // namespace verl::profiler
