// File: verl/core/atomic_file.cc
#include "verl/core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"

namespace verl::core {
absl::StatusOr<std::unique_ptr<AtomicFileWriter>> AtomicFileWriter::Create(
    const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  std::unique_ptr<AtomicFileWriter> w(new AtomicFileWriter);
  w->path_ = path;
  w->tmp_ = absl::StrCat(path, ".tmp.", ::getpid(), ".", counter++);
  w->fd_ =
      ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return ErrnoError("cannot create", w->tmp_);
  return w;
}

AtomicFileWriter::~AtomicFileWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

absl::Status AtomicFileWriter::Append(absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + ": committed");
  while (!data.empty()) {
    const ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write failed", tmp_);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::WriteAt(uint64_t offset,
                                       absl::string_view data) {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + ": committed");
  while (!data.empty()) {
    const ssize_t n =
        ::pwrite(fd_, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write failed", tmp_);
    data.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Resize(uint64_t size) {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + ": committed");
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return ErrnoError("ftruncate failed", tmp_);
  }
  return absl::OkStatus();
}

absl::Status AtomicFileWriter::Commit() {
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + ": committed");
  absl::Status status;
  if (::fsync(fd_) != 0) status = ErrnoError("fsync failed", tmp_);
  if (::close(fd_) != 0 && status.ok()) {
    status = ErrnoError("close failed", tmp_);
  }
  fd_ = -1;
  if (status.ok() && ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    status = ErrnoError("rename failed", path_);
  }
  if (!status.ok()) {
    ::unlink(tmp_.c_str());
    return status;
  }
  return FsyncPath(ParentDir(path_));
}

}  // namespace verl::core
