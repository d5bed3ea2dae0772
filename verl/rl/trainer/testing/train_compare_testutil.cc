// File: verl/rl/trainer/testing/train_compare_testutil.cc
#include "verl/rl/trainer/testing/train_compare_testutil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace verl::rl::testing {

std::vector<nlohmann::json> RunTrain(const std::string& name,
                                     const std::vector<std::string>& args) {
  const char* env = std::getenv("TEST_TMPDIR");
  const std::string tmp = env ? env : "/tmp";
  const std::string metrics = absl::StrCat(tmp, "/metrics", name, ".jsonl");
  const std::string log = absl::StrCat(tmp, "/train", name, ".log");
  const std::string cmd =
      absl::StrCat("VERL_FILE_LOGGER_PATH=", metrics, " tools/train ",
                   absl::StrJoin(args, " "), " >", log, " 2>&1");
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\nsee " << log;
  std::vector<nlohmann::json> lines;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

void ExpectSameMetrics(const std::vector<nlohmann::json>& one,
                       const std::vector<nlohmann::json>& two,
                       const std::string& what, size_t steps,
                       const std::vector<std::string>& required, double tol) {
  ASSERT_EQ(one.size(), steps) << what;
  ASSERT_EQ(two.size(), steps) << what;
  int compared = 0;
  for (size_t step = 0; step < steps; ++step) {
    const auto& a = one[step]["data"];
    const auto& b = two[step]["data"];
    for (const std::string& key : required) {
      EXPECT_TRUE(a.contains(key)) << what << ": " << key;
    }
    for (const auto& [key, value] : a.items()) {
      // global_seqlen/* describe the per-rank split itself.
      if (key.rfind("timing", 0) == 0 || key.rfind("perf/", 0) == 0 ||
          key.rfind("global_seqlen/", 0) == 0) {
        continue;
      }
      if (!value.is_number()) continue;
      ASSERT_TRUE(b.contains(key)) << what << ": " << key;
      const double x = value.get<double>(), y = b[key].get<double>();
      EXPECT_LE(std::abs(x - y), tol * std::max(1.0, std::abs(x)))
          << what << " step " << step + 1 << " " << key << ": one run " << x
          << ", other " << y;
      ++compared;
    }
  }
  EXPECT_GT(compared, 20 * static_cast<int>(steps)) << what;
}

}  // namespace verl::rl::testing
