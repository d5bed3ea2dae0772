// File: verl/ckpt/checkpoint_pt.cc
#include "verl/ckpt/checkpoint_pt.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#ifdef VERL_WITH_CUDA
#include <ATen/detail/CUDAHooksInterface.h>
#endif
#include <ATen/ops/empty.h>
#include <caffe2/serialize/inline_container.h>
#include <fcntl.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickle.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/ckpt/pt_archive.h"
#include "verl/ckpt/pt_pickle.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"

namespace verl::ckpt {
namespace {

// Writes `value` as torch.save does, streaming into a temp file that is
// fsynced and renamed. Aggregates are not type-tagged (no
// torch.jit._pickle.restore_type_tag), so torch.load(weights_only=True)
// accepts the file.
absl::Status SaveIValue(const std::string& path, const c10::IValue& value) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    return absl::InternalError(
        absl::StrCat("cannot create ", tmp, ": ", std::strerror(errno)));
  }
  bool write_ok = true;
  try {
    std::vector<char> pickle;
    torch::jit::Pickler pickler(
        [&](const char* buf, size_t n) {
          pickle.insert(pickle.end(), buf, buf + n);
        },
        nullptr, nullptr, nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(value);
    pickler.stop();
    caffe2::serialize::PyTorchStreamWriter writer(
        [&](const void* data, size_t n) -> size_t {
          const char* p = static_cast<const char*>(data);
          size_t left = n;
          while (write_ok && left > 0) {
            const ssize_t w = ::write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
              write_ok = false;
            else {
              p += w;
              left -= w;
            }
          }
          return n;
        });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(),
                                       pickler.tensorData(), writer);
    writer.writeEndOfFile();
  } catch (const std::exception& e) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return absl::InternalError(
        absl::StrCat(path, ": cannot serialize: ", e.what()));
  }
  if (!write_ok || ::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", err));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", err));
  }
  const size_t slash = path.rfind('/');
  return core::FsyncPath(slash == std::string::npos ? "."
                                                    : path.substr(0, slash));
}

uint64_t Le(absl::string_view b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) {
    v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  }
  return v;
}

// Checks the zip structure of a .pt file and every record's CRC-32 (LibTorch's
// reader skips CRC checks, so flipped bits would load silently).
absl::Status VerifyZip(absl::string_view b, const std::string& path) {
  auto corrupt = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat(path,
                     ": not a readable PyTorch zip/pickle file (truncated or "
                     "corrupted?): ",
                     what));
  };
  if (b.size() < 22) return corrupt("file too short");
  size_t eocd = std::string::npos;
  const size_t lowest = b.size() > 65557 ? b.size() - 65557 : 0;
  for (size_t i = b.size() - 22 + 1; i-- > lowest;) {
    if (Le(b, i, 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == std::string::npos)
    return corrupt("no zip end-of-directory record");
  uint64_t entries = Le(b, eocd + 10, 2);
  uint64_t cd_offset = Le(b, eocd + 16, 4);
  if (entries == 0xFFFF || cd_offset == 0xFFFFFFFF) {  // zip64
    if (eocd < 20 || Le(b, eocd - 20, 4) != 0x07064b50) {
      return corrupt("bad zip64 locator");
    }
    const uint64_t z = Le(b, eocd - 20 + 8, 8);
    if (z + 56 > b.size() || Le(b, z, 4) != 0x06064b50) {
      return corrupt("bad zip64 end record");
    }
    entries = Le(b, z + 32, 8);
    cd_offset = Le(b, z + 48, 8);
  }
  size_t p = cd_offset;
  for (uint64_t e = 0; e < entries; ++e) {
    if (p + 46 > b.size() || Le(b, p, 4) != 0x02014b50) {
      return corrupt("bad central directory");
    }
    const uint64_t method = Le(b, p + 10, 2);
    const uint32_t crc = static_cast<uint32_t>(Le(b, p + 16, 4));
    uint64_t size = Le(b, p + 24, 4);
    const uint64_t name_len = Le(b, p + 28, 2), extra_len = Le(b, p + 30, 2),
                   comment_len = Le(b, p + 32, 2);
    uint64_t local = Le(b, p + 42, 4);
    if (p + 46 + name_len + extra_len > b.size()) return corrupt("bad entry");
    const std::string name(b.substr(p + 46, name_len));
    // zip64 extra field: sizes / offset that did not fit 32 bits.
    for (size_t x = p + 46 + name_len;
         x + 4 <= p + 46 + name_len + extra_len;) {
      const uint64_t id = Le(b, x, 2), len = Le(b, x + 2, 2);
      if (id == 1) {
        size_t q = x + 4;
        if (size == 0xFFFFFFFF) {
          size = Le(b, q, 8);
          q += 8;
        }
        if (Le(b, p + 20, 4) == 0xFFFFFFFF) q += 8;
        if (local == 0xFFFFFFFF) local = Le(b, q, 8);
      }
      x += 4 + len;
    }
    if (method != 0) return corrupt("compressed record " + name);
    if (local + 30 > b.size() || Le(b, local, 4) != 0x04034b50) {
      return corrupt("bad local header of " + name);
    }
    const uint64_t data =
        local + 30 + Le(b, local + 26, 2) + Le(b, local + 28, 2);
    if (data + size > b.size())
      return corrupt("record " + name + " is cut off");
    uLong c = crc32(0L, Z_NULL, 0);
    for (uint64_t off = 0; off < size; off += (1u << 30)) {
      const uint64_t n = std::min<uint64_t>(size - off, 1u << 30);
      c = crc32(c, reinterpret_cast<const Bytef*>(b.data() + data + off),
                static_cast<uInt>(n));
    }
    if (static_cast<uint32_t>(c) != crc) {
      return corrupt("CRC-32 mismatch in record " + name);
    }
    p += 46 + name_len + extra_len + comment_len;
  }
  return absl::OkStatus();
}

// First line of an exception message (c10 appends backtraces).
std::string FirstLine(const char* what) {
  std::string s(what);
  const size_t nl = s.find('\n');
  return nl == std::string::npos ? s : s.substr(0, nl);
}

absl::StatusOr<c10::IValue> LoadIValue(const std::string& path) {
  // Read straight into the buffer pickle_load takes (no second copy).
  std::vector<char> bytes;
  {
    std::ifstream in(path, std::ios::binary | std::ios::ate);
    if (!in) {
      return absl::NotFoundError(absl::StrCat("cannot open ", path));
    }
    bytes.resize(static_cast<size_t>(in.tellg()));
    in.seekg(0);
    if (!in.read(bytes.data(), bytes.size())) {
      return absl::DataLossError(absl::StrCat("cannot read ", path));
    }
  }
  const absl::string_view contents(bytes.data(), bytes.size());
  VERL_RETURN_IF_ERROR(VerifyZip(contents, path));
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string msg = FirstLine(e.what());
    if (msg.find("unknown type") != std::string::npos ||
        msg.find("Unknown type") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          path,
          ": holds Python objects this reader cannot load (only plain "
          "tensors, dicts, strings and numbers are supported; e.g. DTensor "
          "shards must be saved as local tensors): ",
          msg));
    }
    return absl::DataLossError(
        absl::StrCat(path,
                     ": not a readable PyTorch zip/pickle file (truncated or "
                     "corrupted?): ",
                     msg));
  }
}

absl::StatusOr<c10::impl::GenericDict> AsDict(const c10::IValue& value,
                                              const std::string& what) {
  if (!value.isGenericDict()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a dict, found ", value.tagKind()));
  }
  return value.toGenericDict();
}

at::Tensor BytesTensor(const std::string& bytes) {
  at::Tensor t = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

absl::StatusOr<std::string> TensorBytes(const at::Tensor& t,
                                        const std::string& what) {
  if (!t.defined() || t.scalar_type() != at::kByte || t.dim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": expected a 1-D uint8 tensor"));
  }
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.numel());
}

absl::StatusOr<c10::IValue> JsonToIValue(const nlohmann::json& j,
                                         const std::string& where) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return c10::IValue();
    case nlohmann::json::value_t::boolean:
      return c10::IValue(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return c10::IValue(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      if (j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": integer beyond int64"));
      }
      return c10::IValue(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::json::value_t::number_float:
      return c10::IValue(j.get<double>());
    case nlohmann::json::value_t::string:
      return c10::IValue(j.get<std::string>());
    case nlohmann::json::value_t::array: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (size_t i = 0; i < j.size(); ++i) {
        VERL_ASSIGN_OR_RETURN(
            c10::IValue v,
            JsonToIValue(j[i], absl::StrCat(where, "[", i, "]")));
        list.push_back(std::move(v));
      }
      return c10::IValue(list);
    }
    case nlohmann::json::value_t::object: {
      c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
      for (const auto& [k, v] : j.items()) {
        VERL_ASSIGN_OR_RETURN(c10::IValue iv,
                              JsonToIValue(v, absl::StrCat(where, ".", k)));
        dict.insert(k, std::move(iv));
      }
      return c10::IValue(dict);
    }
    default:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unsupported JSON value"));
  }
}

}  // namespace

absl::Status SavePtJson(const std::string& path, const nlohmann::json& json) {
  VERL_ASSIGN_OR_RETURN(c10::IValue value, JsonToIValue(json, path));
  return SaveIValue(path, value);
}

absl::StatusOr<nlohmann::json> LoadPtJson(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(PyRef top, PtArchive::LoadObject(path));
  return core::PyToJson(*top, path);
}

absl::Status SavePtTensorDict(const std::string& path,
                              const PtTensorDict& tensors) {
  c10::Dict<std::string, at::Tensor> dict;
  for (const auto& [name, tensor] : tensors) {
    if (!tensor.defined()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor '", name, "' is undefined"));
    }
    dict.insert(name, tensor.detach().contiguous());
  }
  return SaveIValue(path, c10::IValue(dict));
}

absl::StatusOr<PtTensorDict> LoadPtTensorDict(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(PtArchive archive, PtArchive::Open(path));
  PtTensorDict out;
  // Storages shared by several tensors (views) are read once, as torch.load.
  std::map<std::string, int> uses;
  for (const PtTensorInfo& t : archive.tensors()) ++uses[t.storage_key];
  std::map<std::string, at::Tensor> shared;
  for (const PtTensorInfo& t : archive.tensors()) {
    if (uses[t.storage_key] == 1) {
      VERL_ASSIGN_OR_RETURN(out[t.name], archive.Read(t));
      continue;
    }
    at::Tensor& bytes = shared[t.storage_key];
    if (!bytes.defined()) {
      VERL_ASSIGN_OR_RETURN(bytes, archive.ReadStorage(t.storage_key));
    }
    const int64_t elem = c10::elementSize(t.dtype);
    out[t.name] = bytes.narrow(0, 0, bytes.numel() / elem * elem)
                      .view(t.dtype)
                      .as_strided(t.shape, t.stride, t.storage_offset);
  }
  return out;
}

absl::Status SavePtExtraState(const std::string& path,
                              const ExtraState& state) {
  c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
  if (state.lr_scheduler_step >= 0) {
    c10::Dict<std::string, int64_t> sched;
    sched.insert("last_epoch", state.lr_scheduler_step);
    top.insert("lr_scheduler", sched);
  } else {
    top.insert("lr_scheduler", c10::IValue());
  }
  c10::Dict<std::string, at::Tensor> rng;
  for (const auto& [name, t] : state.rng) rng.insert(name, t.contiguous());
  top.insert("rng", rng);
  top.insert("extra_json", state.user.dump());
  return SaveIValue(path, c10::IValue(top));
}

absl::StatusOr<ExtraState> LoadPtExtraState(const std::string& path) {
  VERL_ASSIGN_OR_RETURN(c10::IValue value, LoadIValue(path));
  VERL_ASSIGN_OR_RETURN(auto top, AsDict(value, path));
  ExtraState state;
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  if (top.contains("lr_scheduler") && !top.at("lr_scheduler").isNone()) {
    VERL_ASSIGN_OR_RETURN(
        auto sched, AsDict(top.at("lr_scheduler"), path + " lr_scheduler"));
    if (!sched.contains("last_epoch") || !sched.at("last_epoch").isInt()) {
      return bad("lr_scheduler has no integer last_epoch");
    }
    state.lr_scheduler_step = sched.at("last_epoch").toInt();
  }
  if (top.contains("rng")) {
    VERL_ASSIGN_OR_RETURN(auto rng, AsDict(top.at("rng"), path + " rng"));
    for (const auto& entry : rng) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        return bad("rng entries must map names to tensors");
      }
      state.rng[entry.key().toStringRef()] = entry.value().toTensor();
    }
  }
  if (top.contains("extra_json")) {
    if (!top.at("extra_json").isString()) return bad("extra_json is not a str");
    state.user = nlohmann::json::parse(top.at("extra_json").toStringRef(),
                                       nullptr, /*allow_exceptions=*/false);
    if (state.user.is_discarded()) return bad("extra_json is not valid JSON");
  }
  return state;
}

at::Tensor CpuRngState() {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

absl::Status RestoreCpuRngState(const at::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CPU RNG state: ", FirstLine(e.what())));
  }
  return absl::OkStatus();
}

#ifdef VERL_WITH_CUDA
at::Tensor CudaRngState() {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) return at::Tensor();
  at::Generator gen = hooks.getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(hooks.current_device()));
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

absl::Status RestoreCudaRngState(const at::Tensor& state) {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  if (!hooks.hasCUDA()) {
    return absl::FailedPreconditionError(
        "the checkpoint has a CUDA RNG state but no GPU is visible");
  }
  at::Generator gen = hooks.getDefaultCUDAGenerator(
      static_cast<c10::DeviceIndex>(hooks.current_device()));
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(state);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad CUDA RNG state: ", FirstLine(e.what())));
  }
  return absl::OkStatus();
}
#endif

at::Tensor Mt19937State(const std::mt19937& engine) {
  std::ostringstream out;
  out << engine;
  return BytesTensor(out.str());
}

absl::Status RestoreMt19937State(const at::Tensor& state,
                                 std::mt19937* engine) {
  VERL_ASSIGN_OR_RETURN(std::string bytes, TensorBytes(state, "mt19937 state"));
  std::istringstream in(bytes);
  std::mt19937 restored;
  in >> restored;
  if (in.fail()) return absl::InvalidArgumentError("bad mt19937 state");
  *engine = restored;
  return absl::OkStatus();
}

}  // namespace verl::ckpt
