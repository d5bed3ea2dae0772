// File: verl/rl/data/preprocess.cc
#include "verl/rl/data/preprocess.h"

#include <cctype>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "verl/rl/rewards/reward_score/math_reward.h"

namespace verl::rl {
namespace {

// The record's string fields `keys`, or an error naming the first missing.
absl::Status RequireStrings(const nlohmann::json& record,
                            std::initializer_list<const char*> keys,
                            const char* dataset, int64_t index) {
  if (!record.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dataset, " record ", index, ": not a JSON object"));
  }
  for (const char* key : keys) {
    if (!record.contains(key) || !record[key].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(
          dataset, " record ", index, ": missing string field \"", key, "\""));
    }
  }
  return absl::OkStatus();
}

nlohmann::json UserPrompt(const std::string& content) {
  return nlohmann::json::array({{{"role", "user"}, {"content", content}}});
}

}  // namespace

absl::StatusOr<nlohmann::json> ConvertGsm8kRecord(const nlohmann::json& record,
                                                  const std::string& split,
                                                  int64_t index) {
  absl::Status ok =
      RequireStrings(record, {"question", "answer"}, "gsm8k", index);
  if (!ok.ok()) return ok;
  const std::string question_raw = record["question"];
  const std::string answer_raw = record["answer"];
  // verl: re.search("#### (\\-?[0-9\\.\\,]+)", answer); commas removed.
  const size_t mark = answer_raw.find("#### ");
  std::string solution;
  if (mark != std::string::npos) {
    size_t pos = mark + 5;
    if (pos < answer_raw.size() && answer_raw[pos] == '-')
      solution += answer_raw[pos++];
    while (pos < answer_raw.size() &&
           (std::isdigit(static_cast<unsigned char>(answer_raw[pos])) ||
            answer_raw[pos] == '.' || answer_raw[pos] == ',')) {
      solution += answer_raw[pos++];
    }
  }
  if (solution.empty() || solution == "-") {
    return absl::InvalidArgumentError(
        absl::StrCat("gsm8k record ", index,
                     ": answer has no \"#### <number>\" final answer"));
  }
  solution = absl::StrReplaceAll(solution, {{",", ""}});
  return nlohmann::json{
      {"data_source", "openai/gsm8k"},
      {"prompt",
       UserPrompt(absl::StrCat(question_raw,
                               " Let's think step by step and output the "
                               "final answer after \"####\"."))},
      {"ability", "math"},
      {"reward_model", {{"style", "rule"}, {"ground_truth", solution}}},
      {"extra_info",
       {{"split", split},
        {"index", index},
        {"answer", answer_raw},
        {"question", question_raw}}},
  };
}

absl::StatusOr<nlohmann::json> ConvertMathRecord(const nlohmann::json& record,
                                                 const std::string& split,
                                                 int64_t index) {
  absl::Status ok =
      RequireStrings(record, {"problem", "solution"}, "math", index);
  if (!ok.ok()) return ok;
  const std::string solution = record["solution"];
  std::optional<std::string> boxed = reward::LastBoxedOnlyString(solution);
  std::optional<std::string> answer =
      boxed ? reward::RemoveBoxed(*boxed) : std::nullopt;
  if (!answer) {
    return absl::InvalidArgumentError(absl::StrCat(
        "math record ", index, ": solution has no final \\boxed{...} answer"));
  }
  nlohmann::json row = record;  // keeps level/type (verl pops the rest)
  row.erase("problem");
  row.erase("solution");
  row["data_source"] = "DigitalLearningGmbH/MATH-lighteval";
  row["prompt"] = UserPrompt(absl::StrCat(
      record["problem"].get<std::string>(),
      " Let's think step by step and output the final answer within "
      "\\boxed{}."));
  row["ability"] = "math";
  row["reward_model"] = {{"style", "rule"}, {"ground_truth", *answer}};
  row["extra_info"] = {{"split", split}, {"index", index}};
  return row;
}

}  // namespace verl::rl
