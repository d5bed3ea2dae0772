// File: verl/ckpt/safetensors_header.h
//
// The safetensors container without LibTorch: header parsing with the
// reference library's validation rules, and header serialization with its
// layout (huggingface/safetensors, src/tensor.rs).
//
// File layout: u64 little-endian N | N bytes of UTF-8 JSON (right-padded with
// spaces) | byte buffer. The JSON maps tensor names to {dtype, shape,
// data_offsets: [begin, end)} relative to the buffer, plus an optional
// "__metadata__" string->string map. The tensors must cover the buffer exactly
// (no holes, no overlaps) and each byte range must equal shape x dtype size.
#ifndef VERL_CKPT_SAFETENSORS_HEADER_H_
#define VERL_CKPT_SAFETENSORS_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::ckpt {

// Element types of the safetensors format whose elements are whole bytes.
enum class StDtype {
  kBool,
  kU8,
  kI8,
  kF8E4M3,
  kF8E5M2,
  kI16,
  kU16,
  kF16,
  kBF16,
  kI32,
  kU32,
  kF32,
  kI64,
  kU64,
  kF64,
};

// "F32", "BF16", ... as written in headers.
const char* StDtypeName(StDtype dtype);
// Bytes per element.
size_t StDtypeSize(StDtype dtype);
// Parses a header dtype string; InvalidArgument for unknown names.
absl::StatusOr<StDtype> ParseStDtype(absl::string_view name);

// Largest header the reference accepts (MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxHeaderSize = 100'000'000;
inline constexpr char kMetadataKey[] = "__metadata__";

struct StTensorInfo {
  std::string name;
  StDtype dtype = StDtype::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offsets in the data buffer, [begin, end)
  uint64_t end = 0;

  uint64_t num_bytes() const { return end - begin; }
};

struct StHeader {
  std::map<std::string, std::string> metadata;
  std::vector<StTensorInfo> tensors;  // sorted by data offset
  uint64_t data_start = 0;            // file offset of the data buffer (8 + N)
  uint64_t data_size = 0;             // bytes in the data buffer
};

// Parses and validates the header of a complete safetensors file held in
// `file` (the whole file: header and data). `source` names the file in
// errors. Never reads outside `file`; every malformed input is an
// InvalidArgument naming `source` and, where known, the tensor.
absl::StatusOr<StHeader> ParseStHeader(absl::string_view file,
                                       absl::string_view source);

// Assigns data offsets to `tensors` (name, dtype and shape set) in the
// reference writer's order: larger elements first, then by name, so every
// tensor starts at a multiple of its element size. Returns the buffer size.
// Fails on duplicate names, negative dims or size overflow.
absl::StatusOr<uint64_t> LayoutStTensors(std::vector<StTensorInfo>* tensors);

// Serializes the 8-byte length prefix and the JSON header (keys sorted,
// padded with spaces to a multiple of 8 bytes) for laid-out `tensors`.
// Fails if a name or metadata string is not valid UTF-8.
absl::StatusOr<std::string> SerializeStHeader(
    const std::vector<StTensorInfo>& tensors,
    const std::map<std::string, std::string>& metadata);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_SAFETENSORS_HEADER_H_
