// File: verl/rl/data/parquet/parquet_encoding.h
//
// Parquet value and level encodings: PLAIN, the RLE/bit-packed hybrid (levels,
// dictionary indices, RLE booleans), DELTA_BINARY_PACKED,
// DELTA_LENGTH_BYTE_ARRAY, DELTA_BYTE_ARRAY and BYTE_STREAM_SPLIT decoders,
// and the PLAIN / RLE-hybrid encoders the writer uses. Every decoder checks
// its reads against the buffer and fails with a Status, never reads past it.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_ENCODING_H_
#define VERL_RL_DATA_PARQUET_PARQUET_ENCODING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/rl/data/parquet/parquet_format.h"

namespace verl::rl::parquet {

// Decoded values of one column, stored by physical type: BOOLEAN, INT32 and
// INT64 in `ints`; FLOAT and DOUBLE in `floats`; BYTE_ARRAY,
// FIXED_LEN_BYTE_ARRAY and INT96 in `bytes`.
struct ColumnValues {
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> bytes;
  size_t size() const { return ints.size() + floats.size() + bytes.size(); }
  // Appends dict[index] (same physical type; index checked by the caller).
  void AppendFrom(const ColumnValues& dict, size_t index);
};

// Decodes `count` PLAIN values of `type` (type_length for FLBA) and appends
// them to *out; *consumed (if set) receives the bytes used.
absl::Status DecodePlain(PhysicalType type, int32_t type_length,
                         absl::string_view data, int64_t count,
                         ColumnValues* out, size_t* consumed = nullptr);

// Decodes `count` values of the RLE/bit-packed hybrid with `bit_width`
// (0..32) from the whole of `data` (no length prefix).
absl::Status DecodeRleHybrid(absl::string_view data, int bit_width,
                             int64_t count, std::vector<int32_t>* out);

// DELTA_BINARY_PACKED: appends exactly `count` integers (INT32 values wrap to
// 32 bits) and sets *consumed to the bytes the encoded run used.
absl::Status DecodeDeltaBinaryPacked(absl::string_view data, int64_t count,
                                     bool is_int32, std::vector<int64_t>* out,
                                     size_t* consumed);

// DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY (appends `count` values).
absl::Status DecodeDeltaLengthByteArray(absl::string_view data, int64_t count,
                                        std::vector<std::string>* out);
absl::Status DecodeDeltaByteArray(absl::string_view data, int64_t count,
                                  std::vector<std::string>* out);

// BYTE_STREAM_SPLIT for FLOAT, DOUBLE, INT32, INT64 and FLBA.
absl::Status DecodeByteStreamSplit(PhysicalType type, int32_t type_length,
                                   absl::string_view data, int64_t count,
                                   ColumnValues* out);

// Number of bits needed for values in [0, max_value].
int BitWidth(uint64_t max_value);

// Encoders (writer side).
std::string EncodeRleHybrid(const std::vector<int32_t>& values, int bit_width);
// Appends PLAIN encodings of values[begin, end) to *out.
void EncodePlain(PhysicalType type, const ColumnValues& values, size_t begin,
                 size_t end, std::string* out);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_ENCODING_H_
