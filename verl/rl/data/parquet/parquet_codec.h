// File: verl/rl/data/parquet/parquet_codec.h
//
// Page compression codecs on Debian's libraries: SNAPPY (libsnappy), GZIP
// (zlib), ZSTD (libzstd) and BROTLI (libbrotli). LZO and LZ4 are refused with
// a clear error. The uncompressed size comes from the page header, so every
// decompressor writes into a buffer of known size and must fill it exactly.
#ifndef VERL_RL_DATA_PARQUET_PARQUET_CODEC_H_
#define VERL_RL_DATA_PARQUET_PARQUET_CODEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/rl/data/parquet/parquet_format.h"

namespace verl::rl::parquet {

absl::StatusOr<std::string> Decompress(Codec codec, absl::string_view data,
                                       size_t uncompressed_size);

// Writer side: UNCOMPRESSED, SNAPPY, GZIP and ZSTD.
absl::StatusOr<std::string> Compress(Codec codec, absl::string_view data);

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_PARQUET_CODEC_H_
