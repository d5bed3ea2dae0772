// File: verl/ckpt/gguf/gguf.h
//
// GGUF v3, llama.cpp's model file (ggml/docs/gguf.md): a header, typed
// metadata key/values, tensor infos, then the tensor data, each tensor at an
// offset aligned to `general.alignment` (32). The writer streams tensors
// (one in memory at a time) into an atomically committed file and converts
// them to f32, f16, bf16 or q8_0 (ggml's block quantization: blocks of 32
// values, scale d = max|x| / 127 stored as fp16, q = round(x / d)). The
// reader parses and bounds-checks a file (for the export tests and to
// refuse a bad file with one clear error), and dequantizes tensors.
#ifndef VERL_CKPT_GGUF_H_
#define VERL_CKPT_GGUF_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/core/atomic_file.h"

namespace verl::ckpt {

// ggml tensor types the project writes (values are ggml's enum).
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// "f32" | "f16" | "bf16" | "q8_0".
absl::StatusOr<GgmlType> ParseGgmlType(const std::string& name);
std::string GgmlTypeName(GgmlType type);

// GGUF metadata value types (gguf_type).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

// One encoded metadata value.
struct GgufValue {
  GgufValueType type;
  std::string payload;  // the value's bytes after its type tag

  static GgufValue Uint32(uint32_t v);
  static GgufValue Int32(int32_t v);
  static GgufValue Uint64(uint64_t v);
  static GgufValue Float32(float v);
  static GgufValue Bool(bool v);
  static GgufValue String(const std::string& v);
  static GgufValue StringArray(const std::vector<std::string>& v);
  static GgufValue Int32Array(const std::vector<int32_t>& v);
  static GgufValue Float32Array(const std::vector<float>& v);
};
using GgufMetadata = std::vector<std::pair<std::string, GgufValue>>;

struct GgufTensorSpec {
  std::string name;
  std::vector<int64_t> shape;  // torch order (outermost first)
  GgmlType type = GgmlType::kF32;
};

class GgufWriter {
 public:
  // Lays out the file; errors name the tensor (q8_0 needs the innermost
  // dimension to be a multiple of 32; names ≤ 63 bytes as llama.cpp).
  static absl::StatusOr<std::unique_ptr<GgufWriter>> Create(
      const std::string& path, const GgufMetadata& metadata,
      const std::vector<GgufTensorSpec>& tensors);
  // `tensor`: floating point with the spec's shape, converted to its type.
  absl::Status Write(const std::string& name, const at::Tensor& tensor);
  // Fails unless every tensor was written; then commits the file.
  absl::Status Finish();

 private:
  GgufWriter() = default;
  std::unique_ptr<core::AtomicFileWriter> file_;
  std::vector<GgufTensorSpec> specs_;
  std::vector<uint64_t> offsets_;  // absolute file offsets
  std::vector<bool> written_;
};

// A parsed file: metadata decoded to JSON (arrays as JSON arrays), tensor
// infos with absolute data offsets.
struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // torch order
  uint32_t type = 0;           // ggml type id
  uint64_t offset = 0;         // absolute
  uint64_t bytes = 0;
};
struct GgufFile {
  uint32_t version = 0;
  std::vector<std::pair<std::string, GgufValueType>> metadata_types;
  nlohmann::json metadata = nlohmann::json::object();
  std::vector<GgufTensorInfo> tensors;
};
absl::StatusOr<GgufFile> ReadGguf(const std::string& path);
// A tensor of `file` as float32 (f16/bf16 widened, q8_0 dequantized).
absl::StatusOr<at::Tensor> ReadGgufTensor(const std::string& path,
                                          const GgufFile& file,
                                          const std::string& name);

}  // namespace verl::ckpt

#endif  // VERL_CKPT_GGUF_H_
