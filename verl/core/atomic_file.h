// File: verl/core/atomic_file.h
//
// AtomicFileWriter: how every writer of user-visible files avoids leaving a
// half-written file under the final name (WriteFileAtomic, safetensors,
// GGUF).
#ifndef VERL_CORE_ATOMIC_FILE_H_
#define VERL_CORE_ATOMIC_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::core {

// The writers' common core: a temporary sibling of `path` (unique per
// process and call) written sequentially (Append) or at offsets (WriteAt);
// Commit() fsyncs it, renames it over `path` and fsyncs the folder. Until
// Commit() succeeds `path` is untouched; destruction without Commit()
// removes the temporary.
class AtomicFileWriter {
 public:
  static absl::StatusOr<std::unique_ptr<AtomicFileWriter>> Create(
      const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  absl::Status Append(absl::string_view data);
  absl::Status WriteAt(uint64_t offset, absl::string_view data);
  // Sets the file size (e.g. to lay out tensors written later with WriteAt).
  absl::Status Resize(uint64_t size);
  absl::Status Commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  AtomicFileWriter() = default;
  std::string path_, tmp_;
  int fd_ = -1;
};

}  // namespace verl::core

#endif  // VERL_CORE_ATOMIC_FILE_H_
