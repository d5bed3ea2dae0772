// File: verl/rl/trainer/testing/train_compare_testutil.cc
#include "verl/rl/trainer/testing/train_compare_testutil.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace verl::rl::testing {

namespace {

std::string TmpDir() {
  const char* env = std::getenv("TEST_TMPDIR");
  return env ? env : "/tmp";
}

std::string RolloutDir(const std::string& name) {
  return absl::StrCat(TmpDir(), "/rollouts", name);
}

// The sampled responses of one step's rollout dump, in row order.
std::vector<std::string> DumpedOutputs(const std::string& name, size_t step) {
  const std::string path = absl::StrCat(RolloutDir(name), "/", step, ".jsonl");
  std::vector<std::string> outputs;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::string line;
  while (std::getline(in, line)) {
    outputs.push_back(nlohmann::json::parse(line).at("output"));
  }
  return outputs;
}

}  // namespace

std::vector<nlohmann::json> RunTrain(const std::string& name,
                                     const std::vector<std::string>& args) {
  // Runs already made in this test binary, by name: a repeated run (the
  // 1-process baseline several cases compare with) is read back, not redone.
  static auto* const runs =
      new std::map<std::string, std::pair<std::vector<std::string>,
                                          std::vector<nlohmann::json>>>();
  if (auto it = runs->find(name); it != runs->end()) {
    EXPECT_EQ(it->second.first, args)
        << "run '" << name << "' was made with other arguments";
    return it->second.second;
  }
  const std::string tmp = TmpDir();
  const std::string metrics = absl::StrCat(tmp, "/metrics", name, ".jsonl");
  const std::string log = absl::StrCat(tmp, "/train", name, ".log");
  const std::string cmd = absl::StrCat(
      "VERL_FILE_LOGGER_PATH=", metrics, " tools/train ",
      absl::StrJoin(args, " "), " trainer.rollout_data_dir=", RolloutDir(name),
      " >", log, " 2>&1");
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd << "\nsee " << log;
  std::vector<nlohmann::json> lines;
  std::ifstream in(metrics);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  if (rc == 0) (*runs)[name] = {args, lines};
  return lines;
}

size_t StepsWithSameRollouts(const std::string& one, const std::string& two,
                             size_t steps) {
  size_t same = 0;
  while (same < steps) {
    const std::vector<std::string> a = DumpedOutputs(one, same + 1);
    if (a.empty() || a != DumpedOutputs(two, same + 1)) break;
    ++same;
  }
  return same;
}

void ExpectSameMetrics(const std::vector<nlohmann::json>& one,
                       const std::vector<nlohmann::json>& two,
                       const std::string& what, size_t steps,
                       const std::vector<std::string>& required, double tol,
                       size_t compared_steps) {
  ASSERT_EQ(one.size(), steps) << what;
  ASSERT_EQ(two.size(), steps) << what;
  compared_steps = std::min(compared_steps, steps);
  int compared = 0;
  for (size_t step = 0; step < compared_steps; ++step) {
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
  EXPECT_GT(compared, 20 * static_cast<int>(compared_steps)) << what;
}

void ExpectSameRuns(const std::vector<nlohmann::json>& one,
                    const std::string& one_name,
                    const std::vector<nlohmann::json>& two,
                    const std::string& two_name, const std::string& what,
                    size_t steps, const std::vector<std::string>& required,
                    size_t min_same_steps, double tol) {
  const size_t same = StepsWithSameRollouts(one_name, two_name, steps);
  EXPECT_GE(same, min_same_steps)
      << what << ": the rollouts differ at step " << same + 1;
  ExpectSameMetrics(one, two, what, steps, required, tol, same);
  // Past the steps compared above, the rollout engine must still hold the
  // trained weights: its log-probs equal the actor's recomputed ones.
  for (size_t step = same; step < std::min(steps, two.size()); ++step) {
    const auto& data = two[step]["data"];
    ASSERT_TRUE(data.contains("training/rollout_probs_diff_max"))
        << what << " step " << step + 1;
    EXPECT_LT(data["training/rollout_probs_diff_max"].get<double>(), 1e-3)
        << what << " step " << step + 1
        << ": the rollout's log-probs differ from the actor's";
  }
}

}  // namespace verl::rl::testing
