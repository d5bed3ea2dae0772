// File: verl/rl/rewards/reward_score/reward_score_fuzz.cc
//
// libFuzzer entry for the rule scorers: model output is outside input. The
// first byte picks the data source, the rest is split at the first NUL into
// (solution, ground truth). Every call must return a Status or a score in
// the scorer's documented range; a crash, sanitizer report or CHECK failure
// is a finding. reward_score_fuzz_test runs this entry over malformed inputs
// without libFuzzer; with clang, link this file with -fsanitize=fuzzer.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "nlohmann/json.hpp"
#include "verl/rl/rewards/reward_score/default_compute_score.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kSources[] = {
      "openai/gsm8k", "lighteval/MATH", "math_dapo",  "hiyouga/geometry3k",
      "searchR1_nq",  "countdown",      "arithmetic", "aime24"};
  if (size == 0) return 0;
  const std::string source = kSources[data[0] % 8];
  const std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
  const size_t cut = rest.find('\0');
  const std::string solution = rest.substr(0, cut);
  const std::string gt_text =
      cut == std::string::npos ? std::string() : rest.substr(cut + 1);
  // Ground truth as a plain string and, when it parses, as JSON.
  nlohmann::json parsed = nlohmann::json::parse(gt_text, nullptr, false);
  for (const nlohmann::json& gt : {nlohmann::json(gt_text), parsed}) {
    absl::StatusOr<verl::rl::reward::RewardResult> r =
        verl::rl::reward::DefaultComputeScore(source, solution, gt);
    if (r.ok() && (!std::isfinite(r->score) || std::fabs(r->score) > 1.0)) {
      std::abort();
    }
  }
  return 0;
}
