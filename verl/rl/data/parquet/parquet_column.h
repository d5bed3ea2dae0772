// File: verl/rl/data/parquet/parquet_column.h
//
// Decodes one column chunk (all pages of one leaf column in one row group):
// dictionary page, data pages v1 and v2, decompression, repetition and
// definition levels, and values in any supported encoding.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_COLUMN_H_
#define VERL_RL_DATA_PARQUET_PARQUET_COLUMN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/rl/data/parquet/parquet_encoding.h"
#include "verl/rl/data/parquet/parquet_format.h"

namespace verl::rl::parquet {

// Levels and non-null values of one column chunk. def/rep have one entry
// per level (zeros when the column has no such levels); values has one entry
// per level whose def equals the column's max definition level.
struct ColumnData {
  std::vector<int32_t> def;
  std::vector<int32_t> rep;
  ColumnValues values;
};

// Largest page the reader will decompress (pages are ~1 MiB in practice).
// Limits that keep a hostile header from allocating unbounded memory.
inline constexpr int64_t kMaxPageBytes = int64_t{256} << 20;
inline constexpr int64_t kMaxPageValues = int64_t{1} << 24;
inline constexpr int64_t kMaxChunkValues = int64_t{1} << 28;

// `chunk` holds the column chunk's bytes (from its first page to its end).
absl::StatusOr<ColumnData> ReadColumnChunk(absl::string_view chunk,
                                           const ColumnMetaData& meta,
                                           int max_def, int max_rep,
                                           int32_t type_length);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_COLUMN_H_
