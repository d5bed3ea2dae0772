// File: verl/ckpt/pt_archive.h
//
// A lazy reader of `.pt` files holding a state dict (torch.save of a dict or
// collections.OrderedDict of tensors, or LibTorch's pickler): Open reads only
// the zip directory and the pickle (verify: every small record's CRC-32), so
// a caller can look at every tensor's name, dtype and shape first and then
// fetch tensors one at a time with pread, straight into a destination buffer
// (e.g. a slice of the merged tensor). Each storage record's CRC-32 is checked
// when it is read (LibTorch's own reader skips CRC checks). Errors name the
// file: truncated or corrupted archives, compressed records, big-endian
// files, and objects other than plain tensors (the class is named, e.g.
// DTensor).
#ifndef VERL_CKPT_PT_ARCHIVE_H_
#define VERL_CKPT_PT_ARCHIVE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "verl/ckpt/pt_pickle.h"

namespace verl::ckpt {

struct PtTensorInfo {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // elements
  int64_t storage_offset = 0;   // elements
  std::string storage_key;      // record "<archive>/data/<key>"

  int64_t numel() const;
};

class PtArchive {
 public:
  // Opens `path`, which must hold a dict str -> tensor.
  static absl::StatusOr<PtArchive> Open(const std::string& path);
  // The unpickled object of any `.pt` file (e.g. a dict of numbers and
  // strings); tensors in it stay storage references.
  static absl::StatusOr<PyRef> LoadObject(const std::string& path);
  // Opens any `.pt` file: `*top` is its object (as LoadObject), whose
  // tensors Describe + Read fetch; `trace`, if given, records the pickle's
  // opcodes and globals (core::PickleTrace). tensors() stays empty.
  static absl::StatusOr<PtArchive> OpenObject(
      const std::string& path, PyRef* top, core::PickleTrace* trace = nullptr);
  // A tensor of the object (a PtTensorRef) as a PtTensorInfo named `name`,
  // checked against its storage record. Errors name the file and `name`.
  absl::StatusOr<PtTensorInfo> Describe(const std::string& name,
                                        const PyObj& value) const;

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  // Tensors in the pickle's order.
  const std::vector<PtTensorInfo>& tensors() const { return tensors_; }
  // nullptr when absent.
  const PtTensorInfo* Find(const std::string& name) const;

  // Copies `t` into `dst` (defined, contiguous, CPU, t's shape and dtype),
  // verifying the storage record's CRC-32. A tensor that is its whole
  // storage (the usual case) is read straight into `dst`. Thread-safe.
  absl::Status ReadInto(const PtTensorInfo& t, const at::Tensor& dst) const;
  // A new tensor with `t`'s contents.
  absl::StatusOr<at::Tensor> Read(const PtTensorInfo& t) const;
  // The whole storage record of `key` as a 1-D uint8 tensor (CRC-checked).
  absl::StatusOr<at::Tensor> ReadStorage(const std::string& key) const;

 private:
  struct Record {
    uint64_t data = 0;  // file offset of the bytes
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  struct File;

  // Reads the zip directory, checks the small records and unpickles.
  static absl::StatusOr<PtArchive> OpenArchive(const std::string& path,
                                               PyRef* top,
                                               core::PickleTrace* trace);
  absl::Status Corrupt(const std::string& what) const;
  // Reads `size` bytes of `record` at `offset` into `dst`; checks the CRC
  // when the whole record is read.
  absl::Status ReadRecord(const Record& record, const std::string& name,
                          char* dst) const;

  std::string path_;
  uint64_t file_size_ = 0;
  std::shared_ptr<File> file_;
  std::string prefix_;                      // "<archive>/"
  std::map<std::string, Record> storages_;  // by storage key
  std::vector<PtTensorInfo> tensors_;
  std::map<std::string, size_t> by_name_;
};

// The error text every unreadable-archive error carries after the path.
inline constexpr char kPtCorruptPrefix[] =
    "not a readable PyTorch zip/pickle file (truncated or corrupted?): ";

}  // namespace verl::ckpt

#endif  // VERL_CKPT_PT_ARCHIVE_H_
