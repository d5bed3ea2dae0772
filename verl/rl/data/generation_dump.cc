// File: verl/rl/data/generation_dump.cc
#include "verl/rl/data/generation_dump.h"

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::rl {

void AppendRecords(const GenerationRecords& from, GenerationRecords* to) {
  auto append = [](const auto& src, auto* dst) {
    dst->insert(dst->end(), src.begin(), src.end());
  };
  append(from.inputs, &to->inputs);
  append(from.outputs, &to->outputs);
  append(from.gts, &to->gts);
  append(from.scores, &to->scores);
  for (const auto& [key, column] : from.extra) append(column, &to->extra[key]);
}

absl::StatusOr<std::vector<nlohmann::json>> GenerationLines(
    const GenerationRecords& r, int64_t step) {
  const size_t n = r.inputs.size();
  if (r.outputs.size() != n || r.gts.size() != n || r.scores.size() != n) {
    return absl::InvalidArgumentError(absl::StrCat(
        "generation dump: ", n, " inputs but ", r.outputs.size(), " outputs, ",
        r.gts.size(), " gts, ", r.scores.size(), " scores"));
  }
  std::vector<nlohmann::json> lines(n);
  for (size_t i = 0; i < n; ++i) {
    nlohmann::json& line = lines[i];
    line["input"] = r.inputs[i];
    line["output"] = r.outputs[i];
    line["gts"] = r.gts[i];
    line["score"] = r.scores[i];
    line["step"] = step;
    for (const auto& [key, column] : r.extra) {
      if (column.size() == n) line[key] = column[i];
    }
  }
  return lines;
}

absl::Status DumpGenerations(const std::string& dir, int64_t step,
                             const GenerationRecords& records) {
  VERL_ASSIGN_OR_RETURN(std::vector<nlohmann::json> lines,
                        GenerationLines(records, step));
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  return core::WriteJsonlAtomic(absl::StrCat(dir, "/", step, ".jsonl"), lines);
}

}  // namespace verl::rl
