// File: verl/ckpt/gguf/gguf.cc
#include "verl/ckpt/gguf/gguf.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <c10/util/Half.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace verl::ckpt {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kVersion = 3;
constexpr uint64_t kAlignment = 32;
constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8BlockBytes = 34;  // fp16 scale + 32 int8
constexpr size_t kMaxNameBytes = 63;   // llama.cpp's GGML_MAX_NAME - 1
constexpr uint32_t kMaxDims = 4;

template <typename T>
void Put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(T));
}
void PutString(std::string& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out += s;
}

// One metadata item's bytes: a scalar as is, a string with its length.
template <typename T>
void PutItem(std::string& out, const T& v) {
  Put(out, v);
}
void PutItem(std::string& out, const std::string& s) { PutString(out, s); }

// A metadata value of `type` holding `v`.
template <typename T>
GgufValue Encoded(GgufValueType type, const T& v) {
  GgufValue out{type, {}};
  PutItem(out.payload, v);
  return out;
}

// An array of `element` values: the element type, the count, the items.
template <typename T>
GgufValue EncodedArray(GgufValueType element, const std::vector<T>& v) {
  GgufValue out{GgufValueType::kArray, {}};
  Put(out.payload, static_cast<uint32_t>(element));
  Put<uint64_t>(out.payload, v.size());
  for (const T& x : v) PutItem(out.payload, x);
  return out;
}

uint64_t AlignUp(uint64_t v) {
  return (v + kAlignment - 1) / kAlignment * kAlignment;
}

// Bytes of a tensor of `numel` elements (innermost dim checked by caller).
absl::StatusOr<uint64_t> TypeBytes(uint32_t type, int64_t numel) {
  switch (type) {
    case static_cast<uint32_t>(GgmlType::kF32):
      return numel * 4;
    case static_cast<uint32_t>(GgmlType::kF16):
    case static_cast<uint32_t>(GgmlType::kBF16):
      return numel * 2;
    case static_cast<uint32_t>(GgmlType::kQ8_0):
      return numel / kQ8Block * kQ8BlockBytes;
  }
  return absl::UnimplementedError(
      absl::StrCat("ggml type ", type,
                   " is not supported (f32, f16, bf16, "
                   "q8_0 are)"));
}

// ggml's quantize_row_q8_0_ref over a contiguous float32 tensor.
std::string QuantizeQ8_0(const at::Tensor& x) {
  const float* v = x.data_ptr<float>();
  const int64_t blocks = x.numel() / kQ8Block;
  std::string out(blocks * kQ8BlockBytes, '\0');
  for (int64_t b = 0; b < blocks; ++b) {
    const float* in = v + b * kQ8Block;
    float amax = 0.0f;
    for (int64_t j = 0; j < kQ8Block; ++j)
      amax = std::max(amax, std::fabs(in[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    char* block = out.data() + b * kQ8BlockBytes;
    const uint16_t d16 = c10::Half(d).x;
    std::memcpy(block, &d16, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      block[2 + j] =
          static_cast<char>(static_cast<int8_t>(std::roundf(in[j] * id)));
    }
  }
  return out;
}

at::Tensor DequantizeQ8_0(const char* data, const std::vector<int64_t>& shape,
                          int64_t numel) {
  at::Tensor out = at::empty(shape, at::kFloat);
  float* o = out.data_ptr<float>();
  for (int64_t b = 0; b < numel / kQ8Block; ++b) {
    const char* block = data + b * kQ8BlockBytes;
    c10::Half d;
    std::memcpy(&d.x, block, 2);
    for (int64_t j = 0; j < kQ8Block; ++j) {
      o[b * kQ8Block + j] =
          static_cast<float>(d) * static_cast<int8_t>(block[2 + j]);
    }
  }
  return out;
}

// Bounds-checked little-endian reader over the mapped file.
class Cursor {
 public:
  Cursor(absl::string_view data, const std::string& path)
      : data_(data), path_(path) {}
  uint64_t pos() const { return pos_; }

  template <typename T>
  absl::StatusOr<T> Get(const char* what) {
    if (data_.size() - pos_ < sizeof(T)) return Truncated(what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  absl::StatusOr<std::string> String(const char* what) {
    absl::StatusOr<uint64_t> n = Get<uint64_t>(what);
    if (!n.ok()) return n.status();
    if (*n > data_.size() - pos_) return Truncated(what);
    std::string s(data_.substr(pos_, *n));
    pos_ += *n;
    return s;
  }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": not a valid GGUF file: ", what, " (at byte ", pos_, ")"));
  }

 private:
  absl::Status Truncated(const char* what) const {
    return Error(absl::StrCat("truncated ", what));
  }
  absl::string_view data_;
  std::string path_;
  uint64_t pos_ = 0;
};

absl::StatusOr<nlohmann::json> ReadScalar(Cursor& c, uint32_t type) {
  switch (static_cast<GgufValueType>(type)) {
#define VERL_GGUF_SCALAR(kind, T)                     \
  case GgufValueType::kind: {                         \
    absl::StatusOr<T> v = c.Get<T>("metadata value"); \
    if (!v.ok()) return v.status();                   \
    return nlohmann::json(*v);                        \
  }
    VERL_GGUF_SCALAR(kUint8, uint8_t)
    VERL_GGUF_SCALAR(kInt8, int8_t)
    VERL_GGUF_SCALAR(kUint16, uint16_t)
    VERL_GGUF_SCALAR(kInt16, int16_t)
    VERL_GGUF_SCALAR(kUint32, uint32_t)
    VERL_GGUF_SCALAR(kInt32, int32_t)
    VERL_GGUF_SCALAR(kFloat32, float)
    VERL_GGUF_SCALAR(kUint64, uint64_t)
    VERL_GGUF_SCALAR(kInt64, int64_t)
    VERL_GGUF_SCALAR(kFloat64, double)
#undef VERL_GGUF_SCALAR
    case GgufValueType::kBool: {
      absl::StatusOr<uint8_t> v = c.Get<uint8_t>("metadata value");
      if (!v.ok()) return v.status();
      if (*v > 1) return c.Error("bool value is not 0 or 1");
      return nlohmann::json(*v == 1);
    }
    case GgufValueType::kString: {
      absl::StatusOr<std::string> v = c.String("metadata string");
      if (!v.ok()) return v.status();
      return nlohmann::json(*v);
    }
    default:
      return c.Error(absl::StrCat("unknown metadata value type ", type));
  }
}

absl::StatusOr<nlohmann::json> ReadValue(Cursor& c, uint32_t type,
                                         uint64_t file_size) {
  if (type != static_cast<uint32_t>(GgufValueType::kArray)) {
    return ReadScalar(c, type);
  }
  absl::StatusOr<uint32_t> elem = c.Get<uint32_t>("array type");
  if (!elem.ok()) return elem.status();
  absl::StatusOr<uint64_t> n = c.Get<uint64_t>("array length");
  if (!n.ok()) return n.status();
  if (*elem == static_cast<uint32_t>(GgufValueType::kArray)) {
    return c.Error("nested arrays are not supported");
  }
  if (*n > file_size - c.pos()) return c.Error("array longer than the file");
  nlohmann::json out = nlohmann::json::array();
  for (uint64_t i = 0; i < *n; ++i) {
    absl::StatusOr<nlohmann::json> v = ReadScalar(c, *elem);
    if (!v.ok()) return v.status();
    out.push_back(*std::move(v));
  }
  return out;
}

// The whole file mapped read-only.
class MappedFile {
 public:
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(
      const std::string& path) {
    std::unique_ptr<MappedFile> f(new MappedFile);
    f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (f->fd_ < 0) {
      return absl::NotFoundError(
          absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
    }
    struct stat st;
    if (::fstat(f->fd_, &st) != 0) {
      return absl::InternalError(absl::StrCat(path, ": fstat failed"));
    }
    f->size_ = static_cast<size_t>(st.st_size);
    if (f->size_ > 0) {
      void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, f->fd_, 0);
      if (p == MAP_FAILED) {
        return absl::InternalError(absl::StrCat(path, ": mmap failed"));
      }
      f->data_ = static_cast<const char*>(p);
    }
    return f;
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<char*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  absl::string_view bytes() const { return {data_, size_}; }

 private:
  MappedFile() = default;
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace

absl::StatusOr<GgmlType> ParseGgmlType(const std::string& name) {
  if (name == "f32") return GgmlType::kF32;
  if (name == "f16") return GgmlType::kF16;
  if (name == "bf16") return GgmlType::kBF16;
  if (name == "q8_0") return GgmlType::kQ8_0;
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported GGUF tensor type '", name, "' (f32, f16, bf16, q8_0)"));
}

std::string GgmlTypeName(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
      return "f32";
    case GgmlType::kF16:
      return "f16";
    case GgmlType::kBF16:
      return "bf16";
    case GgmlType::kQ8_0:
      return "q8_0";
  }
  return "?";
}

GgufValue GgufValue::Uint32(uint32_t v) {
  return Encoded(GgufValueType::kUint32, v);
}
GgufValue GgufValue::Int32(int32_t v) {
  return Encoded(GgufValueType::kInt32, v);
}
GgufValue GgufValue::Uint64(uint64_t v) {
  return Encoded(GgufValueType::kUint64, v);
}
GgufValue GgufValue::Float32(float v) {
  return Encoded(GgufValueType::kFloat32, v);
}
GgufValue GgufValue::Bool(bool v) {
  return Encoded(GgufValueType::kBool, static_cast<uint8_t>(v ? 1 : 0));
}
GgufValue GgufValue::String(const std::string& v) {
  return Encoded(GgufValueType::kString, v);
}
GgufValue GgufValue::StringArray(const std::vector<std::string>& v) {
  return EncodedArray(GgufValueType::kString, v);
}
GgufValue GgufValue::Int32Array(const std::vector<int32_t>& v) {
  return EncodedArray(GgufValueType::kInt32, v);
}
GgufValue GgufValue::Float32Array(const std::vector<float>& v) {
  GgufValue out{GgufValueType::kArray, {}};
  Put(out.payload, static_cast<uint32_t>(GgufValueType::kFloat32));
  Put<uint64_t>(out.payload, v.size());
  for (float x : v) Put(out.payload, x);
  return out;
}

absl::StatusOr<std::unique_ptr<GgufWriter>> GgufWriter::Create(
    const std::string& path, const GgufMetadata& metadata,
    const std::vector<GgufTensorSpec>& tensors) {
  std::unique_ptr<GgufWriter> w(new GgufWriter);
  w->specs_ = tensors;
  std::string header;
  Put(header, kMagic);
  Put(header, kVersion);
  Put<uint64_t>(header, tensors.size());
  Put<uint64_t>(header, metadata.size());
  for (const auto& [key, value] : metadata) {
    PutString(header, key);
    Put(header, static_cast<uint32_t>(value.type));
    header += value.payload;
  }
  std::vector<uint64_t> relative;
  uint64_t data_bytes = 0;
  std::map<std::string, int> seen;
  for (const GgufTensorSpec& t : tensors) {
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", t.name, "': ", why));
    };
    if (t.name.empty() || t.name.size() > kMaxNameBytes) {
      return bad("name must have 1..63 bytes");
    }
    if (seen[t.name]++) return bad("listed twice");
    if (t.shape.empty() || t.shape.size() > kMaxDims) {
      return bad("GGUF tensors have 1..4 dimensions");
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d <= 0) return bad("dimensions must be positive");
      numel *= d;
    }
    if (t.type == GgmlType::kQ8_0 && t.shape.back() % kQ8Block != 0) {
      return bad(absl::StrCat("q8_0 needs the innermost dimension (",
                              t.shape.back(), ") to be a multiple of 32"));
    }
    PutString(header, t.name);
    Put<uint32_t>(header, t.shape.size());
    for (auto it = t.shape.rbegin(); it != t.shape.rend(); ++it) {
      Put<uint64_t>(header, *it);  // ne[0] is the innermost dimension
    }
    Put(header, static_cast<uint32_t>(t.type));
    Put<uint64_t>(header, data_bytes);
    relative.push_back(data_bytes);
    absl::StatusOr<uint64_t> bytes =
        TypeBytes(static_cast<uint32_t>(t.type), numel);
    if (!bytes.ok()) return bad(std::string(bytes.status().message()));
    data_bytes = AlignUp(data_bytes + *bytes);
  }
  const uint64_t data_start = AlignUp(header.size());
  header.resize(data_start, '\0');
  absl::StatusOr<std::unique_ptr<core::AtomicFileWriter>> file =
      core::AtomicFileWriter::Create(path);
  if (!file.ok()) return file.status();
  w->file_ = *std::move(file);
  absl::Status s = w->file_->Resize(data_start + data_bytes);
  if (s.ok()) s = w->file_->WriteAt(0, header);
  if (!s.ok()) return s;
  for (uint64_t r : relative) w->offsets_.push_back(data_start + r);
  w->written_.assign(tensors.size(), false);
  return w;
}

absl::Status GgufWriter::Write(const std::string& name,
                               const at::Tensor& tensor) {
  size_t i = 0;
  while (i < specs_.size() && specs_[i].name != name) ++i;
  if (i == specs_.size() || written_[i]) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_->path(), ": tensor '", name, "' is not expected (or twice)"));
  }
  const GgufTensorSpec& spec = specs_[i];
  if (!tensor.defined() || !tensor.is_floating_point() ||
      tensor.sizes().vec() != spec.shape) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_->path(), ": tensor '", name,
                     "' is not a floating tensor of its declared shape"));
  }
  at::Tensor t = tensor.cpu();
  std::string bytes;
  switch (spec.type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      const at::ScalarType st = spec.type == GgmlType::kF32   ? at::kFloat
                                : spec.type == GgmlType::kF16 ? at::kHalf
                                                              : at::kBFloat16;
      t = t.to(st).contiguous();
      bytes.assign(static_cast<const char*>(t.data_ptr()), t.nbytes());
      break;
    }
    case GgmlType::kQ8_0:
      bytes = QuantizeQ8_0(t.to(at::kFloat).contiguous());
      break;
  }
  absl::Status s = file_->WriteAt(offsets_[i], bytes);
  if (!s.ok()) return s;
  written_[i] = true;
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  for (size_t i = 0; i < specs_.size(); ++i) {
    if (!written_[i]) {
      return absl::FailedPreconditionError(absl::StrCat(
          file_->path(), ": tensor '", specs_[i].name, "' was never written"));
    }
  }
  return file_->Commit();
}

absl::StatusOr<GgufFile> ReadGguf(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
  if (!mapped.ok()) return mapped.status();
  const absl::string_view bytes = (*mapped)->bytes();
  Cursor c(bytes, path);
  GgufFile out;
#define VERL_GGUF_GET(var, T, what)       \
  absl::StatusOr<T> var = c.Get<T>(what); \
  if (!var.ok()) return var.status();
  VERL_GGUF_GET(magic, uint32_t, "magic")
  if (*magic != kMagic) return c.Error("bad magic (expected \"GGUF\")");
  VERL_GGUF_GET(version, uint32_t, "version")
  if (*version != 2 && *version != 3) {
    return c.Error(absl::StrCat("unsupported version ", *version));
  }
  out.version = *version;
  VERL_GGUF_GET(n_tensors, uint64_t, "tensor count")
  VERL_GGUF_GET(n_kv, uint64_t, "metadata count")
  // Every entry takes at least 8 bytes: counts past the file are corrupt.
  if (*n_tensors > bytes.size() / 8 || *n_kv > bytes.size() / 8) {
    return c.Error("counts larger than the file");
  }
  uint64_t alignment = kAlignment;
  for (uint64_t i = 0; i < *n_kv; ++i) {
    absl::StatusOr<std::string> key = c.String("metadata key");
    if (!key.ok()) return key.status();
    VERL_GGUF_GET(type, uint32_t, "metadata type")
    absl::StatusOr<nlohmann::json> value = ReadValue(c, *type, bytes.size());
    if (!value.ok()) return value.status();
    if (out.metadata.contains(*key)) {
      return c.Error(absl::StrCat("duplicate key '", *key, "'"));
    }
    if (*key == "general.alignment") {
      if (*type != static_cast<uint32_t>(GgufValueType::kUint32) ||
          value->get<uint32_t>() == 0 ||
          (value->get<uint32_t>() & (value->get<uint32_t>() - 1)) != 0) {
        return c.Error("general.alignment must be a power-of-two uint32");
      }
      alignment = value->get<uint32_t>();
    }
    out.metadata_types.emplace_back(*key, static_cast<GgufValueType>(*type));
    out.metadata[*key] = *std::move(value);
  }
  for (uint64_t i = 0; i < *n_tensors; ++i) {
    GgufTensorInfo t;
    absl::StatusOr<std::string> name = c.String("tensor name");
    if (!name.ok()) return name.status();
    t.name = *name;
    VERL_GGUF_GET(n_dims, uint32_t, "tensor dimension count")
    if (*n_dims == 0 || *n_dims > kMaxDims) {
      return c.Error(absl::StrCat("tensor '", t.name, "' has ", *n_dims,
                                  " dimensions (1..4)"));
    }
    int64_t numel = 1;
    for (uint32_t d = 0; d < *n_dims; ++d) {
      VERL_GGUF_GET(dim, uint64_t, "tensor dimension")
      if (*dim == 0 || *dim > (uint64_t{1} << 40) ||
          static_cast<uint64_t>(numel) > (uint64_t{1} << 62) / *dim) {
        return c.Error(absl::StrCat("tensor '", t.name,
                                    "' has an invalid dimension ", *dim));
      }
      numel *= static_cast<int64_t>(*dim);
      t.shape.insert(t.shape.begin(), static_cast<int64_t>(*dim));
    }
    VERL_GGUF_GET(type, uint32_t, "tensor type")
    VERL_GGUF_GET(offset, uint64_t, "tensor offset")
    t.type = *type;
    t.offset = *offset;
    if (*type == static_cast<uint32_t>(GgmlType::kQ8_0) &&
        t.shape.back() % kQ8Block != 0) {
      return c.Error(absl::StrCat("q8_0 tensor '", t.name,
                                  "' has a row length not divisible by 32"));
    }
    absl::StatusOr<uint64_t> size = TypeBytes(*type, numel);
    t.bytes = size.ok() ? *size : 0;  // unknown types: listed, not readable
    out.tensors.push_back(std::move(t));
  }
#undef VERL_GGUF_GET
  const uint64_t data_start = (c.pos() + alignment - 1) / alignment * alignment;
  for (GgufTensorInfo& t : out.tensors) {
    if (t.offset % alignment != 0) {
      return c.Error(absl::StrCat("tensor '", t.name, "' offset ", t.offset,
                                  " is not aligned to ", alignment));
    }
    t.offset += data_start;
    if (t.offset > bytes.size() || t.bytes > bytes.size() - t.offset) {
      return c.Error(absl::StrCat("tensor '", t.name,
                                  "' data lies past the end of the file"));
    }
  }
  return out;
}

absl::StatusOr<at::Tensor> ReadGgufTensor(const std::string& path,
                                          const GgufFile& file,
                                          const std::string& name) {
  for (const GgufTensorInfo& t : file.tensors) {
    if (t.name != name) continue;
    absl::StatusOr<std::unique_ptr<MappedFile>> mapped = MappedFile::Open(path);
    if (!mapped.ok()) return mapped.status();
    const absl::string_view bytes = (*mapped)->bytes();
    if (t.offset > bytes.size() || t.bytes > bytes.size() - t.offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "' lies past the end"));
    }
    const char* data = bytes.data() + t.offset;
    int64_t numel = 1;
    for (int64_t d : t.shape) numel *= d;
    switch (t.type) {
      case static_cast<uint32_t>(GgmlType::kF32):
      case static_cast<uint32_t>(GgmlType::kF16):
      case static_cast<uint32_t>(GgmlType::kBF16): {
        const at::ScalarType st =
            t.type == static_cast<uint32_t>(GgmlType::kF32)   ? at::kFloat
            : t.type == static_cast<uint32_t>(GgmlType::kF16) ? at::kHalf
                                                              : at::kBFloat16;
        return at::from_blob(const_cast<char*>(data), t.shape,
                             at::TensorOptions().dtype(st))
            .to(at::kFloat, /*non_blocking=*/false, /*copy=*/true);
      }
      case static_cast<uint32_t>(GgmlType::kQ8_0):
        return DequantizeQ8_0(data, t.shape, numel);
      default:
        return absl::UnimplementedError(absl::StrCat(
            path, ": tensor '", name, "' has unsupported ggml type ", t.type));
    }
  }
  return absl::NotFoundError(absl::StrCat(path, ": no tensor '", name, "'"));
}

}  // namespace verl::ckpt
