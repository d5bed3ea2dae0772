// File: verl/rl/rewards/reward_score/default_compute_score.cc
#include "verl/rl/rewards/reward_score/default_compute_score.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/rl/rewards/reward_score/arithmetic.h"
#include "verl/rl/rewards/reward_score/countdown.h"
#include "verl/rl/rewards/reward_score/geo3k.h"
#include "verl/rl/rewards/reward_score/geo_map.h"
#include "verl/rl/rewards/reward_score/gsm8k.h"
#include "verl/rl/rewards/reward_score/math_dapo.h"
#include "verl/rl/rewards/reward_score/math_reward.h"
#include "verl/rl/rewards/reward_score/multiples.h"
#include "verl/rl/rewards/reward_score/search_r1.h"

namespace verl::rl::reward {
namespace {

const std::vector<std::string>& MathSources() {
  static const auto* v = new std::vector<std::string>{
      "lighteval/MATH", "DigitalLearningGmbH/MATH-lighteval",
      "HuggingFaceH4/MATH-500"};
  return *v;
}
const std::vector<std::string>& DapoSources() {
  static const auto* v =
      new std::vector<std::string>{"math_dapo", "math", "math_dapo_reasoning"};
  return *v;
}
const std::vector<std::string>& SearchR1Sources() {
  static const auto* v = new std::vector<std::string>{
      "searchR1_nq",       "searchR1_triviaqa",        "searchR1_popqa",
      "searchR1_hotpotqa", "searchR1_2wikimultihopqa", "searchR1_musique",
      "searchR1_bamboogle"};
  return *v;
}

bool In(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

absl::Status BadGroundTruth(const std::string& source, const char* expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("reward_model.ground_truth for data_source '", source,
                   "' must be ", expected));
}

// A string ground truth; numbers are printed as Python's str() would.
absl::StatusOr<std::string> GroundTruthString(const nlohmann::json& gt,
                                              const std::string& source) {
  if (gt.is_string()) return gt.get<std::string>();
  if (gt.is_number_integer()) return std::to_string(gt.get<int64_t>());
  if (gt.is_number()) return gt.dump();
  return BadGroundTruth(source, "a string");
}

absl::StatusOr<int64_t> GroundTruthInt(const nlohmann::json& gt,
                                       const std::string& source) {
  if (gt.is_number_integer()) return gt.get<int64_t>();
  int64_t v = 0;
  if (gt.is_string() && absl::SimpleAtoi(gt.get<std::string>(), &v)) return v;
  return BadGroundTruth(source, "an integer");
}

// Countdown ground truth {"target": t, "numbers": [...]}, possibly as JSON
// text.
absl::StatusOr<RewardResult> ScoreCountdown(const std::string& solution,
                                            const nlohmann::json& raw,
                                            const std::string& source) {
  nlohmann::json gt = raw;
  if (raw.is_string()) {
    gt = nlohmann::json::parse(raw.get<std::string>(), nullptr,
                               /*allow_exceptions=*/false);
  }
  if (!gt.is_object() || !gt.contains("target") || !gt.contains("numbers") ||
      !gt["target"].is_number_integer() || !gt["numbers"].is_array()) {
    return BadGroundTruth(source,
                          "{\"target\": <int>, \"numbers\": [<int>, ...]}");
  }
  std::vector<int64_t> numbers;
  for (const auto& n : gt["numbers"]) {
    if (!n.is_number_integer()) {
      return BadGroundTruth(source, "an object whose numbers are integers");
    }
    numbers.push_back(n.get<int64_t>());
  }
  RewardResult r;
  r.score =
      CountdownComputeScore(solution, gt["target"].get<int64_t>(), numbers);
  return r;
}

// Multiples ground truth {"k", "lo", "hi"} (integers), possibly as JSON text.
absl::StatusOr<RewardResult> ScoreMultiples(const std::string& solution,
                                            const nlohmann::json& raw,
                                            const std::string& source) {
  const nlohmann::json gt =
      raw.is_string() ? nlohmann::json::parse(raw.get<std::string>(), nullptr,
                                              /*allow_exceptions=*/false)
                      : raw;
  MultiplesQuestion q;
  bool ok = gt.is_object();
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"k", &q.k},
                            {"lo", &q.lo},
                            {"hi", &q.hi}}) {
    ok = ok && gt.contains(key) && gt[key].is_number_integer();
    if (ok) *field = gt[key].get<int64_t>();
  }
  if (!ok) {
    return BadGroundTruth(source,
                          "{\"k\": <int>, \"lo\": <int>, \"hi\": <int>}");
  }
  if (absl::Status s = ValidateMultiplesQuestion(q); !s.ok()) return s;
  RewardResult r;
  r.score = MultiplesComputeScore(solution, q);
  return r;
}

}  // namespace

std::vector<std::string> KnownRewardDataSources() {
  std::vector<std::string> out = {"openai/gsm8k"};
  for (const auto* v : {&MathSources(), &DapoSources(), &SearchR1Sources()})
    out.insert(out.end(), v->begin(), v->end());
  out.insert(out.end(), {"aime*", "hiyouga/geometry3k", "countdown",
                         "arithmetic", "multiples", "geo_map"});
  return out;
}

absl::StatusOr<RewardResult> DefaultComputeScore(
    const std::string& data_source, const std::string& solution,
    const nlohmann::json& ground_truth, const nlohmann::json& extra_info) {
  (void)extra_info;
  RewardResult r;
  if (data_source == "openai/gsm8k") {
    absl::StatusOr<std::string> gt =
        GroundTruthString(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    r.score = Gsm8kComputeScore(solution, *gt);
    return r;
  }
  if (In(MathSources(), data_source)) {
    absl::StatusOr<std::string> gt =
        GroundTruthString(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    r.score = MathComputeScore(solution, *gt);
    return r;
  }
  if (In(DapoSources(), data_source) || absl::StartsWith(data_source, "aime")) {
    absl::StatusOr<std::string> gt =
        GroundTruthString(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    MathDapoResult d = MathDapoComputeScore(solution, *gt);
    r.score = d.score;
    r.numeric["acc"] = d.acc ? 1.0 : 0.0;
    r.text["pred"] = d.pred;
    return r;
  }
  if (data_source == "hiyouga/geometry3k") {
    absl::StatusOr<std::string> gt =
        GroundTruthString(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    r.score = Geo3kComputeScore(solution, *gt);
    return r;
  }
  if (In(SearchR1Sources(), data_source)) {
    std::vector<std::string> targets;
    const nlohmann::json& t =
        ground_truth.is_object() && ground_truth.contains("target")
            ? ground_truth["target"]
            : nlohmann::json();
    if (t.is_string()) {
      targets.push_back(t.get<std::string>());
    } else if (t.is_array()) {
      for (const auto& x : t) {
        if (!x.is_string())
          return BadGroundTruth(data_source, "{\"target\": [<str>...]}");
        targets.push_back(x.get<std::string>());
      }
    } else {
      return BadGroundTruth(data_source, "{\"target\": <str or [str]>}");
    }
    r.score = SearchR1ComputeScore(solution, targets);
    return r;
  }
  if (data_source == "countdown") {
    return ScoreCountdown(solution, ground_truth, data_source);
  }
  if (data_source == "arithmetic") {
    absl::StatusOr<int64_t> gt = GroundTruthInt(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    r.score = ArithmeticComputeScore(solution, *gt);
    return r;
  }
  if (data_source == "multiples") {
    return ScoreMultiples(solution, ground_truth, data_source);
  }
  if (data_source == "geo_map") {
    absl::StatusOr<std::string> gt =
        GroundTruthString(ground_truth, data_source);
    if (!gt.ok()) return gt.status();
    r.score = GeoMapComputeScore(solution, *gt);
    return r;
  }
  return absl::UnimplementedError(
      absl::StrCat("no rule reward for data_source '", data_source,
                   "' (known: ", absl::StrJoin(KnownRewardDataSources(), ", "),
                   "); set custom_reward_function for other sources"));
}

}  // namespace verl::rl::reward
