// File: verl/rl/data/generation_dump.h
//
// verl's `_dump_generations` (trainer.rollout_data_dir and
// trainer.validation_data_dir): one JSON line per trajectory with the decoded
// prompt (`input`), response (`output`), ground truth (`gts`), sequence score
// (`score`), the step, and every reward extra-info column of the same length,
// written to `{dir}/{step}.jsonl` atomically.
#ifndef VERL_RL_DATA_GENERATION_DUMP_H_
#define VERL_RL_DATA_GENERATION_DUMP_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl {

struct GenerationRecords {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<nlohmann::json> gts;
  std::vector<double> scores;
  // Reward extra infos (e.g. acc, pred); columns of another length are
  // skipped, as verl does.
  std::map<std::string, std::vector<nlohmann::json>> extra;
};

// Appends `from`'s rows to `to` (validation batches add up to one dump).
void AppendRecords(const GenerationRecords& from, GenerationRecords* to);

// The JSON lines verl writes (exposed for tests). Error if inputs, outputs,
// gts and scores differ in length.
absl::StatusOr<std::vector<nlohmann::json>> GenerationLines(
    const GenerationRecords& records, int64_t step);

// Writes `{dir}/{step}.jsonl` (creating `dir`); errors name the path.
absl::Status DumpGenerations(const std::string& dir, int64_t step,
                             const GenerationRecords& records);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_GENERATION_DUMP_H_
