// File: verl/rl/data/parquet/parquet_writer.h
//
// Writes JSON rows as a Parquet file the way pyarrow writes verl's
// preprocessed datasets: the schema is inferred from the rows (every field
// nullable; objects -> structs, arrays -> 3-level LISTs named list/element,
// strings -> BYTE_ARRAY STRING, json binary -> BYTE_ARRAY, integers -> INT64,
// numbers with a fraction -> DOUBLE, booleans -> BOOLEAN), values PLAIN or
// dictionary-encoded, data pages v1, snappy by default. Pages are cut at row
// boundaries near 1 MiB and row groups at `row_group_rows`, so readers stream
// them in bounded memory.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_WRITER_H_
#define VERL_RL_DATA_PARQUET_PARQUET_WRITER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/rl/data/parquet/parquet_format.h"

namespace verl::rl::parquet {

struct ParquetWriteOptions {
  Codec codec = Codec::kSnappy;  // kUncompressed, kSnappy, kGzip or kZstd
  bool dictionary = true;        // RLE_DICTIONARY pages (falls back to PLAIN
                                 // when a dictionary would exceed 1 MiB)
  int64_t row_group_rows = 10000;
  int64_t page_bytes = 1 << 20;  // target data page size
};

// Serializes rows (JSON objects) into a Parquet file image. Errors name the
// row and the column path (e.g. a field that is a string in one row and an
// object in another).
absl::StatusOr<std::string> SerializeParquet(
    const std::vector<nlohmann::json>& rows,
    const ParquetWriteOptions& options = {});

// SerializeParquet, then an atomic write of `path`.
absl::Status WriteParquetFile(const std::string& path,
                              const std::vector<nlohmann::json>& rows,
                              const ParquetWriteOptions& options = {});

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_WRITER_H_
