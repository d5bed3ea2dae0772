#include "verl/rl/data/parquet/dataset_file.h"

#include "absl/strings/match.h"
#include "verl/core/file_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_writer.h"

namespace verl::rl::parquet {

bool IsParquetPath(const std::string& path) {
  return absl::EndsWith(path, ".parquet");
}

absl::StatusOr<std::vector<nlohmann::json>> ReadDatasetFile(
    const std::string& path) {
  if (IsParquetPath(path)) return ReadParquetRows(path);
  return core::ReadJsonl(path);
}

absl::Status WriteDatasetFile(const std::string& path,
                              const std::vector<nlohmann::json>& rows) {
  if (IsParquetPath(path)) return WriteParquetFile(path, rows);
  return core::WriteJsonlAtomic(path, rows);
}

}  // namespace verl::rl::parquet
