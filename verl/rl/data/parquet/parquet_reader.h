// File: verl/rl/data/parquet/parquet_reader.h
//
// Reads Parquet files as rows of nlohmann::json, so dataset code treats
// Parquet and JSONL rows alike. Files are streamed one row group at a time:
// only the footer and the current row group's column chunks are in memory.
//
// Value mapping: BOOLEAN -> bool; INT32/INT64 -> integer (unsigned when
// annotated so; DECIMAL -> double); FLOAT/DOUBLE -> float; BYTE_ARRAY with a
// STRING/ENUM/JSON annotation -> string, other BYTE_ARRAY and
// FIXED_LEN_BYTE_ARRAY -> json binary; INT96 -> nanoseconds since the epoch;
// groups -> objects; LIST (3-level and legacy 2-level) and unannotated
// repeated fields -> arrays; MAP with string keys -> object (else a list of
// {key, value}); nulls -> null. Every error names the file, and for data
// errors the row group and the column path.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_READER_H_
#define VERL_RL_DATA_PARQUET_PARQUET_READER_H_

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/rl/data/parquet/parquet_format.h"
#include "verl/rl/data/parquet/parquet_schema.h"

namespace verl::rl::parquet {

class ParquetReader {
 public:
  // Opens a file and reads its footer.
  static absl::StatusOr<ParquetReader> Open(const std::string& path);
  // Reads from an in-memory file (tests, fuzzing); `name` is used in errors.
  static absl::StatusOr<ParquetReader> FromBytes(std::string bytes,
                                                 std::string name = "<memory>");

  const FileMetaData& metadata() const { return md_; }
  const Schema& schema() const { return schema_; }
  int num_row_groups() const { return md_.row_groups.size(); }
  int64_t num_rows() const { return md_.num_rows; }

  // Decodes row group `i` into rows.
  absl::StatusOr<std::vector<nlohmann::json>> ReadRowGroup(int i);
  // Every row of the file, row group by row group.
  absl::StatusOr<std::vector<nlohmann::json>> ReadAll();

 private:
  ParquetReader() = default;
  absl::Status Init();
  absl::StatusOr<std::string> ReadAt(uint64_t offset, uint64_t size);

  std::string name_;
  std::string bytes_;                    // in-memory mode
  std::unique_ptr<std::ifstream> file_;  // file mode
  uint64_t size_ = 0;
  uint64_t data_end_ = 0;  // where the footer begins
  FileMetaData md_;
  Schema schema_;
};

// Calls fn(row) for every row of `path`, one row group in memory at a time.
absl::Status ForEachParquetRow(
    const std::string& path,
    const std::function<absl::Status(nlohmann::json&&)>& fn);

// All rows of `path`.
absl::StatusOr<std::vector<nlohmann::json>> ReadParquetRows(
    const std::string& path);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_READER_H_
