// File: verl/ckpt/safetensors.h
//
// safetensors files <-> LibTorch tensors. Reading memory-maps the file and
// returns tensors that view the mapping without copying (the mapping lives as
// long as any tensor from it) whenever the data is aligned for its dtype;
// misaligned data is copied. The mapping is private and writable: writing to
// a returned tensor copies the touched pages and never changes the file.
// Writing goes to a temporary sibling that is fsynced and renamed, so a
// reader never sees a half-written file under the final name.
#ifndef VERL_CKPT_SAFETENSORS_H_
#define VERL_CKPT_SAFETENSORS_H_

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/ckpt/safetensors_header.h"

namespace verl::ckpt {

using TensorMap = std::map<std::string, at::Tensor>;
using StMetadata = std::map<std::string, std::string>;

// F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL <-> at::ScalarType.
// Other safetensors dtypes (U16/U32/U64, F8) have no LibTorch 1.13 type.
absl::StatusOr<at::ScalarType> ToScalarType(StDtype dtype);
absl::StatusOr<StDtype> FromScalarType(at::ScalarType type);

class SafetensorsReader {
 public:
  // Memory-maps and validates `path`. Errors name the file (and tensor).
  static absl::StatusOr<SafetensorsReader> Open(const std::string& path);
  // Validates an in-memory file; `source` names it in errors.
  static absl::StatusOr<SafetensorsReader> FromBytes(
      std::string bytes, std::string source = "<memory>");

  const std::string& source() const { return source_; }
  const StMetadata& metadata() const { return header_.metadata; }
  // Tensor entries in data-offset order.
  const std::vector<StTensorInfo>& infos() const { return header_.tensors; }
  std::vector<std::string> names() const;  // sorted
  bool Contains(const std::string& name) const {
    return by_name_.count(name) > 0;
  }

  // The tensor `name`: a view of the mapping when aligned and `copy` is
  // false, otherwise an owned copy. NotFound if absent; Unimplemented for a
  // dtype LibTorch lacks.
  absl::StatusOr<at::Tensor> Get(const std::string& name,
                                 bool copy = false) const;
  absl::StatusOr<TensorMap> GetAll(bool copy = false) const;

  // The whole file's bytes (mapped or owned), e.g. to check for views.
  absl::string_view file_bytes() const;

 private:
  struct Storage;
  static absl::StatusOr<SafetensorsReader> Make(
      std::shared_ptr<const Storage> storage, std::string source);
  at::Tensor View(const StTensorInfo& info, at::ScalarType type,
                  bool copy) const;

  std::shared_ptr<const Storage> storage_;
  StHeader header_;
  std::map<std::string, size_t> by_name_;  // index into header_.tensors
  std::string source_;
};

// Reads every tensor of `path` (views of the mapping where aligned); fills
// `metadata` if given.
absl::StatusOr<TensorMap> LoadSafetensors(const std::string& path,
                                          StMetadata* metadata = nullptr);

// The complete file bytes for `tensors` (CPU copies of non-CPU or
// non-contiguous tensors are taken). Fails on undefined tensors, dtypes
// safetensors lacks, or invalid UTF-8 names.
absl::StatusOr<std::string> SerializeSafetensors(
    const TensorMap& tensors, const StMetadata& metadata = {});

// Writes `tensors` to `path` atomically (temp + fsync + rename + dir fsync),
// streaming tensor data without building the file in memory.
absl::Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                             const StMetadata& metadata = {});

// Writes one safetensors file whose tensors (names, dtypes, shapes) are known
// before their data: the header goes first, then each tensor as it arrives
// (any order, each once), so a caller holds one tensor at a time. The bytes
// equal SaveSafetensors' for the same tensors. Atomic like SaveSafetensors:
// a temp sibling is fsynced and renamed by Finish(); without Finish() (error,
// destruction) the temp is removed and `path` is untouched.
class SafetensorsStreamWriter {
 public:
  struct Entry {
    std::string name;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  static absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>> Create(
      const std::string& path, const std::vector<Entry>& entries,
      const StMetadata& metadata = {});
  ~SafetensorsStreamWriter();
  SafetensorsStreamWriter(const SafetensorsStreamWriter&) = delete;
  SafetensorsStreamWriter& operator=(const SafetensorsStreamWriter&) = delete;

  // Tensor names in file order (writing in this order is sequential I/O).
  std::vector<std::string> DataOrder() const;
  // `tensor` must have the entry's dtype and shape (non-contiguous or
  // non-CPU tensors are copied first).
  absl::Status Write(const std::string& name, const at::Tensor& tensor);
  // Fails unless every entry was written.
  absl::Status Finish();

 private:
  SafetensorsStreamWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t data_start_ = 0;
  std::vector<StTensorInfo> infos_;  // data order
  std::map<std::string, size_t> by_name_;
  std::vector<bool> written_;
};

}  // namespace verl::ckpt

#endif  // VERL_CKPT_SAFETENSORS_H_
