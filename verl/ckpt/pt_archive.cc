// File: verl/ckpt/pt_archive.cc
#include "verl/ckpt/pt_archive.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/ckpt/pt_pickle.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

using Kind = PyObj::Kind;

uint64_t Le(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  }
  return v;
}

absl::StatusOr<at::ScalarType> StorageDtype(const std::string& cls) {
  static const std::map<std::string, at::ScalarType>* types =
      new std::map<std::string, at::ScalarType>{
          {"DoubleStorage", at::kDouble},
          {"FloatStorage", at::kFloat},
          {"HalfStorage", at::kHalf},
          {"BFloat16Storage", at::kBFloat16},
          {"LongStorage", at::kLong},
          {"IntStorage", at::kInt},
          {"ShortStorage", at::kShort},
          {"CharStorage", at::kChar},
          {"ByteStorage", at::kByte},
          {"UntypedStorage", at::kByte},
          {"BoolStorage", at::kBool},
          {"ComplexFloatStorage", at::kComplexFloat},
          {"ComplexDoubleStorage", at::kComplexDouble}};
  auto it = types->find(cls);
  if (it == types->end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unsupported storage class torch.", cls));
  }
  return it->second;
}

bool IsContiguous(const PtTensorInfo& t) {
  int64_t expect = 1;
  for (size_t d = t.shape.size(); d-- > 0;) {
    if (t.shape[d] != 1 && t.stride[d] != expect) return false;
    expect *= t.shape[d];
  }
  return true;
}

constexpr uint64_t kChunk = 4 << 20;  // pread + CRC granularity

}  // namespace

int64_t PtTensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

struct PtArchive::File {
  int fd = -1;
  ~File() {
    if (fd >= 0) ::close(fd);
  }
};

absl::Status PtArchive::Corrupt(const std::string& what) const {
  return absl::DataLossError(absl::StrCat(path_, ": ", kPtCorruptPrefix, what));
}

absl::Status PtArchive::ReadRecord(const Record& record,
                                   const std::string& name, char* dst) const {
  uLong crc = crc32(0L, Z_NULL, 0);
  for (uint64_t done = 0; done < record.size;) {
    const uint64_t n = std::min(kChunk, record.size - done);
    uint64_t got = 0;
    while (got < n) {
      const ssize_t r = ::pread(file_->fd, dst + done + got, n - got,
                                static_cast<off_t>(record.data + done + got));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return Corrupt(
            absl::StrCat("cannot read record ", name, ": ",
                         r == 0 ? "end of file" : std::strerror(errno)));
      }
      got += static_cast<uint64_t>(r);
    }
    crc = crc32(crc, reinterpret_cast<const Bytef*>(dst + done),
                static_cast<uInt>(n));
    done += n;
  }
  if (static_cast<uint32_t>(crc) != record.crc) {
    return Corrupt("CRC-32 mismatch in record " + name);
  }
  return absl::OkStatus();
}

absl::StatusOr<PtArchive> PtArchive::OpenArchive(const std::string& path,
                                                 PyRef* top_out,
                                                 core::PickleTrace* trace) {
  PtArchive a;
  a.path_ = path;
  a.file_ = std::make_shared<File>();
  a.file_->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (a.file_->fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("cannot open ", path));
    }
    return absl::InternalError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(a.file_->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  a.file_size_ = static_cast<uint64_t>(st.st_size);
  const uint64_t size = a.file_size_;
  auto pread_all = [&](uint64_t at, uint64_t n,
                       std::string* out) -> absl::Status {
    if (at > size || n > size - at) return a.Corrupt("record out of range");
    out->resize(n);
    uint64_t got = 0;
    while (got < n) {
      const ssize_t k = ::pread(a.file_->fd, out->data() + got, n - got,
                                static_cast<off_t>(at + got));
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return a.Corrupt("short read");
      got += k;
    }
    return absl::OkStatus();
  };
  if (size < 22) return a.Corrupt("file too short");
  // End of central directory: the last 22 bytes plus a comment of < 64 KiB.
  const uint64_t tail_at = size > 65557 ? size - 65557 : 0;
  std::string tail;
  VERL_RETURN_IF_ERROR(pread_all(tail_at, size - tail_at, &tail));
  size_t eocd = std::string::npos;
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (Le(tail, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos) {
    return a.Corrupt("no zip end-of-directory record");
  }
  uint64_t entries = Le(tail, eocd + 10, 2);
  uint64_t cd_size = Le(tail, eocd + 12, 4);
  uint64_t cd_offset = Le(tail, eocd + 16, 4);
  if (entries == 0xFFFF || cd_offset == 0xFFFFFFFF || cd_size == 0xFFFFFFFF) {
    if (eocd < 20 || Le(tail, eocd - 20, 4) != 0x07064b50) {
      return a.Corrupt("bad zip64 locator");
    }
    std::string z;
    VERL_RETURN_IF_ERROR(pread_all(Le(tail, eocd - 20 + 8, 8), 56, &z));
    if (Le(z, 0, 4) != 0x06064b50) return a.Corrupt("bad zip64 end record");
    entries = Le(z, 32, 8);
    cd_size = Le(z, 40, 8);
    cd_offset = Le(z, 48, 8);
  }
  std::string cd;
  VERL_RETURN_IF_ERROR(pread_all(cd_offset, cd_size, &cd));
  std::map<std::string, Record> records;
  size_t p = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > cd.size() || Le(cd, p, 4) != 0x02014b50) {
      return a.Corrupt("bad central directory");
    }
    const uint64_t method = Le(cd, p + 10, 2);
    Record r;
    r.crc = static_cast<uint32_t>(Le(cd, p + 16, 4));
    r.size = Le(cd, p + 24, 4);
    const uint64_t name_len = Le(cd, p + 28, 2), extra_len = Le(cd, p + 30, 2),
                   comment_len = Le(cd, p + 32, 2);
    uint64_t local = Le(cd, p + 42, 4);
    if (p + 46 + name_len + extra_len > cd.size()) {
      return a.Corrupt("bad central directory entry");
    }
    const std::string name = cd.substr(p + 46, name_len);
    for (size_t x = p + 46 + name_len;
         x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = Le(cd, x, 2), len = Le(cd, x + 2, 2);
      if (id == 1) {  // zip64 sizes / offset that did not fit 32 bits
        size_t q = x + 4;
        const size_t end = std::min<size_t>(x + 4 + len, cd.size());
        if (r.size == 0xFFFFFFFF && q + 8 <= end) {
          r.size = Le(cd, q, 8);
          q += 8;
        }
        if (Le(cd, p + 20, 4) == 0xFFFFFFFF) q += 8;
        if (local == 0xFFFFFFFF && q + 8 <= end) local = Le(cd, q, 8);
      }
      x += 4 + len;
    }
    if (method != 0) return a.Corrupt("compressed record " + name);
    std::string lh;
    VERL_RETURN_IF_ERROR(pread_all(local, 30, &lh));
    if (Le(lh, 0, 4) != 0x04034b50) {
      return a.Corrupt("bad local header of " + name);
    }
    r.data = local + 30 + Le(lh, 26, 2) + Le(lh, 28, 2);
    if (r.data > size || r.size > size - r.data) {
      return a.Corrupt("record " + name + " is cut off");
    }
    records[name] = r;
    p += 46 + name_len + extra_len + comment_len;
  }
  // The archive folder: the one holding data.pkl.
  for (const auto& [name, r] : records) {
    if (absl::EndsWith(name, "/data.pkl") &&
        name.find('/') == name.size() - 9) {
      a.prefix_ = name.substr(0, name.size() - 8);
      break;
    }
  }
  if (a.prefix_.empty()) return a.Corrupt("no data.pkl record");
  // Small records (pickle, version, byteorder) are checked now; tensor
  // storages when they are read.
  const std::string data_dir = a.prefix_ + "data/";
  std::string pickle;
  for (const auto& [name, r] : records) {
    if (absl::StartsWith(name, data_dir)) {
      a.storages_[name.substr(data_dir.size())] = r;
      continue;
    }
    if (r.size > (64u << 20)) continue;
    std::string bytes(r.size, '\0');
    VERL_RETURN_IF_ERROR(a.ReadRecord(r, name, bytes.data()));
    if (name == a.prefix_ + "data.pkl") pickle = std::move(bytes);
    if (name == a.prefix_ + "byteorder" && bytes != "little") {
      return absl::UnimplementedError(
          absl::StrCat(path, ": byteorder '", bytes,
                       "' (only little-endian files are supported)"));
    }
  }
  auto top = UnpickleTorchSave(pickle, "", trace);
  if (!top.ok()) {
    if (absl::IsDataLoss(top.status())) {
      return a.Corrupt(std::string(top.status().message()));
    }
    return absl::Status(top.status().code(),
                        absl::StrCat(path, ": ", top.status().message()));
  }
  *top_out = *top;
  return a;
}

absl::StatusOr<PyRef> PtArchive::LoadObject(const std::string& path) {
  PyRef top;
  VERL_ASSIGN_OR_RETURN(PtArchive archive, OpenArchive(path, &top, nullptr));
  (void)archive;
  return top;
}

absl::StatusOr<PtArchive> PtArchive::OpenObject(const std::string& path,
                                                PyRef* top,
                                                core::PickleTrace* trace) {
  return OpenArchive(path, top, trace);
}

absl::StatusOr<PtArchive> PtArchive::Open(const std::string& path) {
  PyRef top;
  VERL_ASSIGN_OR_RETURN(PtArchive a, OpenArchive(path, &top, nullptr));
  const PyObj& dict = *top;
  if (dict.kind != Kind::kDict) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": expected a dict, found ", core::PyTypeName(dict)));
  }
  for (size_t k = 0; k + 1 < dict.items.size(); k += 2) {
    const PyObj& key = *dict.items[k];
    if (key.kind != Kind::kStr) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": dict key of type ", core::PyTypeName(key),
                       ", expected a string"));
    }
    VERL_ASSIGN_OR_RETURN(PtTensorInfo t,
                          a.Describe(key.s, *dict.items[k + 1]));
    if (a.by_name_.count(t.name)) continue;
    a.by_name_[t.name] = a.tensors_.size();
    a.tensors_.push_back(std::move(t));
  }
  return a;
}

absl::StatusOr<PtTensorInfo> PtArchive::Describe(const std::string& name,
                                                 const PyObj& value) const {
  const std::string data_dir = prefix_ + "data/";
  const PtTensorRef* tensor = value.As<PtTensorRef>();
  if (tensor == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": entry '", name, "' holds ",
                     core::PyTypeName(value), ", expected a plain tensor"));
  }
  const PtStorageRef& storage = *tensor->storage;
  PtTensorInfo t;
  t.name = name;
  auto dtype = StorageDtype(storage.cls);
  if (!dtype.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": tensor '", t.name, "': ", dtype.status().message()));
  }
  t.dtype = *dtype;
  t.shape = tensor->size;
  t.stride = tensor->stride;
  t.storage_offset = tensor->offset;
  t.storage_key = storage.key;
  auto rec = storages_.find(t.storage_key);
  if (rec == storages_.end()) {
    return Corrupt(absl::StrCat("tensor '", t.name, "': no record ", data_dir,
                                t.storage_key));
  }
  const uint64_t elem = c10::elementSize(t.dtype);
  // The storage must fit its record and the tensor its storage.
  bool valid = t.storage_offset >= 0, empty = false;
  __int128 last = t.storage_offset;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    if (t.shape[d] < 0 || t.stride[d] < 0) {
      valid = false;
    } else if (t.shape[d] == 0) {
      empty = true;
    } else {
      last += static_cast<__int128>(t.shape[d] - 1) * t.stride[d];
    }
  }
  const bool fits = valid &&
                    static_cast<__int128>(storage.numel) * elem <=
                        static_cast<__int128>(rec->second.size) &&
                    (empty || last < static_cast<__int128>(storage.numel));
  if (!fits) {
    return Corrupt(absl::StrCat(
        "tensor '", t.name, "' (shape [", absl::StrJoin(t.shape, ", "),
        "]) does not fit its storage record ", data_dir, t.storage_key));
  }
  return t;
}

const PtTensorInfo* PtArchive::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

absl::StatusOr<at::Tensor> PtArchive::ReadStorage(
    const std::string& key) const {
  auto it = storages_.find(key);
  if (it == storages_.end()) {
    return Corrupt(absl::StrCat("no record ", prefix_, "data/", key));
  }
  at::Tensor bytes =
      at::empty({static_cast<int64_t>(it->second.size)}, at::kByte);
  VERL_RETURN_IF_ERROR(ReadRecord(it->second, prefix_ + "data/" + key,
                                  static_cast<char*>(bytes.data_ptr())));
  return bytes;
}

absl::Status PtArchive::ReadInto(const PtTensorInfo& t,
                                 const at::Tensor& dst) const {
  if (!dst.defined() || !dst.is_contiguous() || !dst.device().is_cpu() ||
      dst.scalar_type() != t.dtype || dst.sizes().vec() != t.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": tensor '", t.name,
                     "': destination does not match its shape/dtype"));
  }
  auto it = storages_.find(t.storage_key);
  if (it == storages_.end()) {
    return Corrupt(absl::StrCat("no record ", prefix_, "data/", t.storage_key));
  }
  const uint64_t nbytes =
      static_cast<uint64_t>(t.numel()) * c10::elementSize(t.dtype);
  if (t.storage_offset == 0 && IsContiguous(t) && nbytes == it->second.size) {
    return ReadRecord(it->second, prefix_ + "data/" + t.storage_key,
                      static_cast<char*>(dst.data_ptr()));
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor bytes, ReadStorage(t.storage_key));
  if (t.numel() == 0) return absl::OkStatus();
  const at::Tensor typed = at::from_blob(
      bytes.data_ptr(),
      {static_cast<int64_t>(bytes.numel() / c10::elementSize(t.dtype))},
      at::TensorOptions().dtype(t.dtype));
  dst.copy_(typed.as_strided(t.shape, t.stride, t.storage_offset));
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> PtArchive::Read(const PtTensorInfo& t) const {
  at::Tensor out = at::empty(t.shape, at::TensorOptions().dtype(t.dtype));
  VERL_RETURN_IF_ERROR(ReadInto(t, out));
  return out;
}

}  // namespace verl::ckpt
