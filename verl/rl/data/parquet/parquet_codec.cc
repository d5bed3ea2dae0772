#include "verl/rl/data/parquet/parquet_codec.h"

#include <brotli/decode.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include <memory>

#include "absl/strings/str_cat.h"

namespace verl::rl::parquet {
namespace {

absl::Status SizeMismatch(Codec codec, size_t got, size_t want) {
  return absl::InvalidArgumentError(absl::StrCat(CodecName(codec),
                                                 " page decompressed to ", got,
                                                 " bytes, header says ", want));
}

absl::StatusOr<std::string> Inflate(absl::string_view data, size_t size) {
  // DEFLATE expands at most ~1032:1; a larger claim is corrupt.
  if (size > data.size() * 1032 + 1024) {
    return SizeMismatch(Codec::kGzip, data.size() * 1032, size);
  }
  std::string out(size, '\0');
  z_stream z{};
  // 15 + 32: zlib or gzip header, detected automatically.
  if (inflateInit2(&z, 15 + 32) != Z_OK) {
    return absl::InternalError("zlib inflateInit2 failed");
  }
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  z.avail_in = data.size();
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = out.size();
  int rc = Z_OK;
  // Concatenated gzip members are allowed by the format; inflate each.
  while (true) {
    rc = inflate(&z, Z_FINISH);
    if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
      inflateReset(&z);
      continue;
    }
    break;
  }
  const size_t got = out.size() - z.avail_out;
  inflateEnd(&z);
  if (rc != Z_STREAM_END) {
    return absl::InvalidArgumentError(
        absl::StrCat("GZIP page is corrupt (zlib code ", rc, ")"));
  }
  if (got != size) return SizeMismatch(Codec::kGzip, got, size);
  return out;
}

}  // namespace

absl::StatusOr<std::string> Decompress(Codec codec, absl::string_view data,
                                       size_t size) {
  switch (codec) {
    case Codec::kUncompressed:
      if (data.size() != size) return SizeMismatch(codec, data.size(), size);
      return std::string(data);
    case Codec::kSnappy: {
      size_t n = 0;
      if (!snappy::GetUncompressedLength(data.data(), data.size(), &n)) {
        return absl::InvalidArgumentError("SNAPPY page is corrupt");
      }
      if (n != size) return SizeMismatch(codec, n, size);
      std::string out(n, '\0');
      if (!snappy::RawUncompress(data.data(), data.size(), out.data())) {
        return absl::InvalidArgumentError("SNAPPY page is corrupt");
      }
      return out;
    }
    case Codec::kGzip:
      return Inflate(data, size);
    case Codec::kZstd: {
      // Check the frame's declared size before allocating the output.
      const unsigned long long declared =  // NOLINT(runtime/int)
          ZSTD_getFrameContentSize(data.data(), data.size());
      if (declared == ZSTD_CONTENTSIZE_ERROR) {
        return absl::InvalidArgumentError("ZSTD page is corrupt");
      }
      if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != size) {
        return SizeMismatch(codec, declared, size);
      }
      std::string out(size, '\0');
      // One context per thread: creating one per page dominated small reads.
      thread_local std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(
          ZSTD_createDCtx(), ZSTD_freeDCtx);
      const size_t n = ZSTD_decompressDCtx(dctx.get(), out.data(), out.size(),
                                           data.data(), data.size());
      if (ZSTD_isError(n)) {
        return absl::InvalidArgumentError(
            absl::StrCat("ZSTD page is corrupt: ", ZSTD_getErrorName(n)));
      }
      if (n != size) return SizeMismatch(codec, n, size);
      return out;
    }
    case Codec::kBrotli: {
      std::string out(size, '\0');
      size_t n = out.size();
      if (BrotliDecoderDecompress(data.size(),
                                  reinterpret_cast<const uint8_t*>(data.data()),
                                  &n, reinterpret_cast<uint8_t*>(out.data())) !=
          BROTLI_DECODER_RESULT_SUCCESS) {
        return absl::InvalidArgumentError("BROTLI page is corrupt");
      }
      if (n != size) return SizeMismatch(codec, n, size);
      return out;
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("compression codec ", CodecName(codec),
                       " is not supported (use SNAPPY, GZIP, ZSTD, BROTLI "
                       "or UNCOMPRESSED)"));
  }
}

absl::StatusOr<std::string> Compress(Codec codec, absl::string_view data) {
  switch (codec) {
    case Codec::kUncompressed:
      return std::string(data);
    case Codec::kSnappy: {
      std::string out;
      snappy::Compress(data.data(), data.size(), &out);
      return out;
    }
    case Codec::kGzip: {
      z_stream z{};
      if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                       Z_DEFAULT_STRATEGY) != Z_OK) {
        return absl::InternalError("zlib deflateInit2 failed");
      }
      std::string out(deflateBound(&z, data.size()), '\0');
      z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
      z.avail_in = data.size();
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = out.size();
      const int rc = deflate(&z, Z_FINISH);
      out.resize(out.size() - z.avail_out);
      deflateEnd(&z);
      if (rc != Z_STREAM_END) return absl::InternalError("zlib deflate failed");
      return out;
    }
    case Codec::kZstd: {
      std::string out(ZSTD_compressBound(data.size()), '\0');
      const size_t n =
          ZSTD_compress(out.data(), out.size(), data.data(), data.size(), 3);
      if (ZSTD_isError(n)) return absl::InternalError(ZSTD_getErrorName(n));
      out.resize(n);
      return out;
    }
    default:
      return absl::UnimplementedError(
          absl::StrCat("the writer does not support codec ", CodecName(codec)));
  }
}

}  // namespace verl::rl::parquet
