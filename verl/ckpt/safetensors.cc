#include "verl/ckpt/safetensors.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

using core::ErrnoError;
using core::ParentDir;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; big-endian hosts need swaps");

struct DtypePair {
  StDtype st;
  at::ScalarType torch;
};

constexpr DtypePair kDtypePairs[] = {
    {StDtype::kF32, at::kFloat},     {StDtype::kF16, at::kHalf},
    {StDtype::kBF16, at::kBFloat16}, {StDtype::kF64, at::kDouble},
    {StDtype::kI64, at::kLong},      {StDtype::kI32, at::kInt},
    {StDtype::kI16, at::kShort},     {StDtype::kI8, at::kChar},
    {StDtype::kU8, at::kByte},       {StDtype::kBool, at::kBool},
};

// A tensor ready to be written: CPU, contiguous, with its header entry.
struct PreparedFile {
  std::string header;                // length prefix + padded JSON
  std::vector<at::Tensor> in_order;  // data order
};

absl::StatusOr<PreparedFile> Prepare(const TensorMap& tensors,
                                     const StMetadata& metadata) {
  std::vector<StTensorInfo> infos;
  std::map<std::string, at::Tensor> ready;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' is undefined"));
    }
    auto dtype = FromScalarType(tensor.scalar_type());
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "': ", dtype.status().message()));
    }
    at::Tensor t = tensor.detach();
    if (!t.device().is_cpu()) t = t.cpu();
    t = t.contiguous();
    infos.push_back({name, *dtype, t.sizes().vec()});
    ready[name] = std::move(t);
  }
  VERL_ASSIGN_OR_RETURN(uint64_t total, LayoutStTensors(&infos));
  (void)total;
  PreparedFile out;
  VERL_ASSIGN_OR_RETURN(out.header, SerializeStHeader(infos, metadata));
  for (const StTensorInfo& info : infos) {
    out.in_order.push_back(ready.at(info.name));
  }
  return out;
}

size_t NumBytes(const at::Tensor& t) { return t.numel() * t.element_size(); }

absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write failed", path);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

// Owns the bytes behind a reader: an mmap (munmapped when the last reader or
// tensor view goes away) or an in-memory string.
struct SafetensorsReader::Storage {
  void* map = nullptr;
  size_t map_size = 0;
  std::string owned;

  ~Storage() {
    if (map != nullptr) ::munmap(map, map_size);
  }
  absl::string_view bytes() const {
    if (map != nullptr) {
      return absl::string_view(static_cast<const char*>(map), map_size);
    }
    return owned;
  }
};

absl::StatusOr<at::ScalarType> ToScalarType(StDtype dtype) {
  for (const DtypePair& p : kDtypePairs) {
    if (p.st == dtype) return p.torch;
  }
  return absl::UnimplementedError(absl::StrCat(
      "dtype ", StDtypeName(dtype), " has no LibTorch 1.13 scalar type"));
}

absl::StatusOr<StDtype> FromScalarType(at::ScalarType type) {
  for (const DtypePair& p : kDtypePairs) {
    if (p.torch == type) return p.st;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "scalar type ", c10::toString(type), " cannot be stored in safetensors"));
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::Make(
    std::shared_ptr<const Storage> storage, std::string source) {
  VERL_ASSIGN_OR_RETURN(StHeader header,
                        ParseStHeader(storage->bytes(), source));
  SafetensorsReader reader;
  reader.storage_ = std::move(storage);
  reader.header_ = std::move(header);
  reader.source_ = std::move(source);
  for (size_t i = 0; i < reader.header_.tensors.size(); ++i) {
    reader.by_name_[reader.header_.tensors[i].name] = i;
  }
  return reader;
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::Open(
    const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    return ErrnoError("cannot open", path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("fstat failed", path);
    ::close(fd);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  auto storage = std::make_shared<Storage>();
  if (st.st_size > 0) {
    // Private + writable: views can be written to (copy-on-write pages)
    // without ever changing the file.
    void* map =
        ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (map == MAP_FAILED) {
      absl::Status s = ErrnoError("mmap failed", path);
      ::close(fd);
      return s;
    }
    storage->map = map;
    storage->map_size = static_cast<size_t>(st.st_size);
  }
  ::close(fd);
  return Make(std::move(storage), path);
}

absl::StatusOr<SafetensorsReader> SafetensorsReader::FromBytes(
    std::string bytes, std::string source) {
  auto storage = std::make_shared<Storage>();
  storage->owned = std::move(bytes);
  return Make(std::move(storage), std::move(source));
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, index] : by_name_) out.push_back(name);
  return out;
}

absl::string_view SafetensorsReader::file_bytes() const {
  return storage_->bytes();
}

absl::StatusOr<at::Tensor> SafetensorsReader::Get(const std::string& name,
                                                  bool copy) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(
        absl::StrCat(source_, ": no tensor '", name, "'"));
  }
  const StTensorInfo& info = header_.tensors[it->second];
  auto type = ToScalarType(info.dtype);
  if (!type.ok()) {
    return absl::UnimplementedError(absl::StrCat(
        source_, ": tensor '", name, "': ", type.status().message()));
  }
  try {
    return View(info, *type, copy);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        source_, ": tensor '", name, "': ", e.what_without_backtrace()));
  }
}

at::Tensor SafetensorsReader::View(const StTensorInfo& info,
                                   at::ScalarType type, bool copy) const {
  const auto options = at::TensorOptions().dtype(type);
  const char* data = storage_->bytes().data() + header_.data_start + info.begin;
  const bool aligned =
      reinterpret_cast<uintptr_t>(data) % StDtypeSize(info.dtype) == 0;
  if (!copy && aligned && info.num_bytes() > 0) {
    std::shared_ptr<const Storage> keep = storage_;
    return at::from_blob(
        const_cast<char*>(data), info.shape, [keep](void*) {}, options);
  }
  at::Tensor out = at::empty(info.shape, options);
  if (info.num_bytes() > 0) std::memcpy(out.data_ptr(), data, info.num_bytes());
  return out;
}

absl::StatusOr<TensorMap> SafetensorsReader::GetAll(bool copy) const {
  TensorMap out;
  for (const auto& [name, index] : by_name_) {
    VERL_ASSIGN_OR_RETURN(out[name], Get(name, copy));
  }
  return out;
}

absl::StatusOr<TensorMap> LoadSafetensors(const std::string& path,
                                          StMetadata* metadata) {
  VERL_ASSIGN_OR_RETURN(SafetensorsReader reader,
                        SafetensorsReader::Open(path));
  if (metadata != nullptr) *metadata = reader.metadata();
  return reader.GetAll();
}

absl::StatusOr<std::string> SerializeSafetensors(const TensorMap& tensors,
                                                 const StMetadata& metadata) {
  VERL_ASSIGN_OR_RETURN(PreparedFile file, Prepare(tensors, metadata));
  std::string out = std::move(file.header);
  for (const at::Tensor& t : file.in_order) {
    out.append(static_cast<const char*>(t.data_ptr()), NumBytes(t));
  }
  return out;
}

absl::Status SaveSafetensors(const std::string& path, const TensorMap& tensors,
                             const StMetadata& metadata) {
  auto file = Prepare(tensors, metadata);
  if (!file.ok()) return Annotate(file.status(), path);
  std::random_device rd;
  const std::string tmp =
      absl::StrCat(path, ".tmp.", ::getpid(), ".", rd() % 1000000);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("cannot create", tmp);
  absl::Status status =
      WriteAll(fd, file->header.data(), file->header.size(), tmp);
  for (const at::Tensor& t : file->in_order) {
    if (!status.ok()) break;
    status =
        WriteAll(fd, static_cast<const char*>(t.data_ptr()), NumBytes(t), tmp);
  }
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("fsync failed", tmp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("close failed", tmp);
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    status = ErrnoError("rename failed", path);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return core::FsyncPath(ParentDir(path));
}

absl::StatusOr<std::unique_ptr<SafetensorsStreamWriter>>
SafetensorsStreamWriter::Create(const std::string& path,
                                const std::vector<Entry>& entries,
                                const StMetadata& metadata) {
  std::unique_ptr<SafetensorsStreamWriter> w(new SafetensorsStreamWriter);
  w->path_ = path;
  for (const Entry& e : entries) {
    auto dtype = FromScalarType(e.dtype);
    if (!dtype.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": tensor '", e.name, "': ", dtype.status().message()));
    }
    w->infos_.push_back({e.name, *dtype, e.shape});
  }
  auto total = LayoutStTensors(&w->infos_);
  if (!total.ok()) return Annotate(total.status(), path);
  auto header = SerializeStHeader(w->infos_, metadata);
  if (!header.ok()) return Annotate(header.status(), path);
  for (size_t i = 0; i < w->infos_.size(); ++i) {
    w->by_name_[w->infos_[i].name] = i;
  }
  w->written_.assign(w->infos_.size(), false);
  w->data_start_ = header->size();
  std::random_device rd;
  w->tmp_ = absl::StrCat(path, ".tmp.", ::getpid(), ".", rd() % 1000000);
  w->fd_ =
      ::open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return ErrnoError("cannot create", w->tmp_);
  VERL_RETURN_IF_ERROR(
      WriteAll(w->fd_, header->data(), header->size(), w->tmp_));
  if (::ftruncate(w->fd_, static_cast<off_t>(w->data_start_ + *total)) != 0) {
    return ErrnoError("ftruncate failed", w->tmp_);
  }
  return w;
}

SafetensorsStreamWriter::~SafetensorsStreamWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(tmp_.c_str());
  }
}

std::vector<std::string> SafetensorsStreamWriter::DataOrder() const {
  std::vector<std::string> out;
  for (const StTensorInfo& info : infos_) out.push_back(info.name);
  return out;
}

absl::Status SafetensorsStreamWriter::Write(const std::string& name,
                                            const at::Tensor& tensor) {
  auto it = by_name_.find(name);
  if (fd_ < 0 || it == by_name_.end() || written_[it->second]) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", name,
        fd_ < 0 ? "' written after Finish" : "' is not expected (or twice)"));
  }
  const StTensorInfo& info = infos_[it->second];
  auto dtype = FromScalarType(tensor.scalar_type());
  if (!tensor.defined() || !dtype.ok() || *dtype != info.dtype ||
      tensor.sizes().vec() != info.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": tensor '", name,
                     "' does not match its declared dtype/shape"));
  }
  at::Tensor t = tensor.device().is_cpu() ? tensor : tensor.cpu();
  t = t.contiguous();
  const char* data = static_cast<const char*>(t.data_ptr());
  uint64_t done = 0, size = NumBytes(t);
  while (done < size) {
    const ssize_t n =
        ::pwrite(fd_, data + done, size - done,
                 static_cast<off_t>(data_start_ + info.begin + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoError("write failed", tmp_);
    done += static_cast<uint64_t>(n);
  }
  written_[it->second] = true;
  return absl::OkStatus();
}

absl::Status SafetensorsStreamWriter::Finish() {
  for (size_t i = 0; i < infos_.size(); ++i) {
    if (!written_[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          path_, ": tensor '", infos_[i].name, "' was never written"));
    }
  }
  if (fd_ < 0) return absl::FailedPreconditionError(path_ + ": finished");
  absl::Status status;
  if (::fsync(fd_) != 0) status = ErrnoError("fsync failed", tmp_);
  if (::close(fd_) != 0 && status.ok())
    status = ErrnoError("close failed", tmp_);
  fd_ = -1;
  if (status.ok() && ::rename(tmp_.c_str(), path_.c_str()) != 0) {
    status = ErrnoError("rename failed", path_);
  }
  if (!status.ok()) {
    ::unlink(tmp_.c_str());
    return status;
  }
  return core::FsyncPath(ParentDir(path_));
}

}  // namespace verl::ckpt
