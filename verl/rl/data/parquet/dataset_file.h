// File: verl/rl/data/parquet/dataset_file.h
//
// One entry point for dataset files by extension, so the RL and SFT datasets
// and //tools:prepare_data treat Parquet (verl's format) and JSON Lines
// alike: ".parquet" is Parquet, anything else JSON Lines.
#ifndef VERL_RL_DATA_PARQUET_DATASET_FILE_H_
#define VERL_RL_DATA_PARQUET_DATASET_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace verl::rl::parquet {

// True when `path` names a Parquet file (ends in ".parquet").
bool IsParquetPath(const std::string& path);

// All rows of a .parquet or JSON Lines file; errors name the file.
absl::StatusOr<std::vector<nlohmann::json>> ReadDatasetFile(
    const std::string& path);

// Writes rows atomically: Parquet (snappy, dictionary) for ".parquet",
// JSON Lines otherwise.
absl::Status WriteDatasetFile(const std::string& path,
                              const std::vector<nlohmann::json>& rows);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_DATASET_FILE_H_
