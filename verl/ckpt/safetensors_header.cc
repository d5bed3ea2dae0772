#include "verl/ckpt/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace verl::ckpt {
namespace {

using Json = nlohmann::json;

struct DtypeDesc {
  StDtype dtype;
  const char* name;
  size_t size;
};

constexpr DtypeDesc kDtypes[] = {
    {StDtype::kBool, "BOOL", 1},      {StDtype::kU8, "U8", 1},
    {StDtype::kI8, "I8", 1},          {StDtype::kF8E4M3, "F8_E4M3", 1},
    {StDtype::kF8E5M2, "F8_E5M2", 1}, {StDtype::kI16, "I16", 2},
    {StDtype::kU16, "U16", 2},        {StDtype::kF16, "F16", 2},
    {StDtype::kBF16, "BF16", 2},      {StDtype::kI32, "I32", 4},
    {StDtype::kU32, "U32", 4},        {StDtype::kF32, "F32", 4},
    {StDtype::kI64, "I64", 8},        {StDtype::kU64, "U64", 8},
    {StDtype::kF64, "F64", 8},
};

const DtypeDesc& Desc(StDtype dtype) {
  for (const DtypeDesc& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  return kDtypes[0];  // unreachable: every enumerator is listed
}

// Deepest JSON nesting a valid header has (root / tensor / shape array).
constexpr int kMaxJsonDepth = 4;

// Thrown from the parser callback to stop parsing at the first problem.
struct HeaderJsonError {
  std::string message;
};

absl::Status Invalid(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

absl::Status InvalidTensor(absl::string_view source, const std::string& name,
                           absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": tensor '", name, "': ", what));
}

// Parses the header JSON, rejecting duplicate keys and deep nesting (which the
// plain parser would accept silently or recurse on).
absl::StatusOr<Json> ParseJsonStrict(absl::string_view text,
                                     absl::string_view source) {
  std::vector<std::set<std::string>> keys;
  auto callback = [&keys](int depth, Json::parse_event_t event,
                          Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          throw HeaderJsonError{"JSON nesting too deep for a header"};
        }
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.empty() &&
            !keys.back().insert(parsed.get<std::string>()).second) {
          throw HeaderJsonError{
              absl::StrCat("duplicate key '", parsed.get<std::string>(), "'")};
        }
        break;
      default:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const HeaderJsonError& e) {
    return Invalid(source, absl::StrCat("bad JSON header: ", e.message));
  } catch (const Json::exception& e) {
    return Invalid(source, absl::StrCat("bad JSON header: ", e.what()));
  }
}

// Reads a JSON non-negative integer that fits in int64.
absl::StatusOr<uint64_t> ReadIndex(const Json& v, absl::string_view what) {
  if (v.is_number_unsigned()) {
    uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " ", x, " overflows int64"));
    }
    return x;
  }
  if (v.is_number_integer()) {
    return absl::InvalidArgumentError(
        absl::StrCat("negative ", what, " ", v.get<int64_t>()));
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be a non-negative integer, got ", v.dump()));
}

absl::StatusOr<StTensorInfo> ParseTensorInfo(const std::string& name,
                                             const Json& v) {
  StTensorInfo info;
  info.name = name;
  if (!v.is_object()) {
    return absl::InvalidArgumentError("entry is not a JSON object");
  }
  auto dtype = v.find("dtype");
  auto shape = v.find("shape");
  auto offsets = v.find("data_offsets");
  if (dtype == v.end() || shape == v.end() || offsets == v.end()) {
    return absl::InvalidArgumentError(
        "entry needs 'dtype', 'shape' and 'data_offsets'");
  }
  if (!dtype->is_string()) {
    return absl::InvalidArgumentError("'dtype' is not a string");
  }
  auto parsed_dtype = ParseStDtype(dtype->get<std::string>());
  if (!parsed_dtype.ok()) return parsed_dtype.status();
  info.dtype = *parsed_dtype;
  if (!shape->is_array()) {
    return absl::InvalidArgumentError("'shape' is not an array");
  }
  for (const Json& d : *shape) {
    auto dim = ReadIndex(d, "dimension");
    if (!dim.ok()) return dim.status();
    info.shape.push_back(static_cast<int64_t>(*dim));
  }
  if (!offsets->is_array() || offsets->size() != 2) {
    return absl::InvalidArgumentError(
        "'data_offsets' is not an array of two integers");
  }
  auto begin = ReadIndex((*offsets)[0], "data offset");
  if (!begin.ok()) return begin.status();
  auto end = ReadIndex((*offsets)[1], "data offset");
  if (!end.ok()) return end.status();
  info.begin = *begin;
  info.end = *end;
  return info;
}

// Byte size of `shape` x `dtype`, or an error on overflow / negative dims.
absl::StatusOr<uint64_t> TensorBytes(const std::vector<int64_t>& shape,
                                     StDtype dtype) {
  uint64_t n = StDtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) {
      return absl::InvalidArgumentError(absl::StrCat("negative dimension ", d));
    }
    if (__builtin_mul_overflow(n, static_cast<uint64_t>(d), &n)) {
      return absl::InvalidArgumentError("shape x dtype size overflows");
    }
  }
  return n;
}

}  // namespace

const char* StDtypeName(StDtype dtype) { return Desc(dtype).name; }

size_t StDtypeSize(StDtype dtype) { return Desc(dtype).size; }

absl::StatusOr<StDtype> ParseStDtype(absl::string_view name) {
  for (const DtypeDesc& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  std::string known;
  for (const DtypeDesc& d : kDtypes) {
    absl::StrAppend(&known, known.empty() ? "" : ", ", d.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name, "' (known: ", known, ")"));
}

absl::StatusOr<StHeader> ParseStHeader(absl::string_view file,
                                       absl::string_view source) {
  if (file.size() < 8) {
    return Invalid(source, absl::StrCat("truncated file: ", file.size(),
                                        " bytes, need at least 8"));
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) {
    n = (n << 8) | static_cast<uint8_t>(file[i]);
  }
  if (n > kMaxHeaderSize) {
    return Invalid(source, absl::StrCat("header length ", n,
                                        " exceeds the limit ", kMaxHeaderSize));
  }
  if (n > file.size() - 8) {
    return Invalid(source,
                   absl::StrCat("header length ", n, " beyond end of file (",
                                file.size(), " bytes; truncated file?)"));
  }
  absl::string_view text = file.substr(8, n);
  if (text.empty() || text[0] != '{') {
    return Invalid(source, "header does not start with '{'");
  }
  auto json = ParseJsonStrict(text, source);
  if (!json.ok()) return json.status();
  if (!json->is_object()) {
    return Invalid(source, "header is not a JSON object");
  }

  StHeader header;
  header.data_start = 8 + n;
  header.data_size = file.size() - header.data_start;
  for (const auto& [key, value] : json->items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) {
        return Invalid(source, "__metadata__ is not a JSON object");
      }
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string()) {
          return Invalid(source, absl::StrCat("__metadata__ value of '", mk,
                                              "' is not a string"));
        }
        header.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    auto info = ParseTensorInfo(key, value);
    if (!info.ok()) return InvalidTensor(source, key, info.status().message());
    header.tensors.push_back(std::move(*info));
  }

  // The reference's validation: sorted by offsets, each tensor starts where
  // the previous one ended, sizes match, and the buffer is fully covered.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const StTensorInfo& a, const StTensorInfo& b) {
              return std::tie(a.begin, a.end, a.name) <
                     std::tie(b.begin, b.end, b.name);
            });
  uint64_t expected = 0;
  for (const StTensorInfo& t : header.tensors) {
    if (t.end < t.begin) {
      return InvalidTensor(source, t.name,
                           absl::StrCat("data_offsets [", t.begin, ", ", t.end,
                                        ") end before begin"));
    }
    if (t.end > header.data_size) {
      return InvalidTensor(
          source, t.name,
          absl::StrCat("data_offsets [", t.begin, ", ", t.end,
                       ") out of range of the data buffer (", header.data_size,
                       " bytes; truncated file?)"));
    }
    if (t.begin != expected) {
      return InvalidTensor(
          source, t.name,
          absl::StrCat(t.begin < expected ? "overlaps the previous tensor"
                                          : "hole before the tensor",
                       " (data_offsets begin ", t.begin, ", expected ",
                       expected, ")"));
    }
    auto bytes = TensorBytes(t.shape, t.dtype);
    if (!bytes.ok())
      return InvalidTensor(source, t.name, bytes.status().message());
    if (*bytes != t.num_bytes()) {
      return InvalidTensor(
          source, t.name,
          absl::StrCat("size mismatch: shape x ", StDtypeName(t.dtype),
                       " needs ", *bytes, " bytes, data_offsets span ",
                       t.num_bytes()));
    }
    expected = t.end;
  }
  if (expected != header.data_size) {
    return Invalid(source,
                   absl::StrCat("data buffer has ", header.data_size - expected,
                                " trailing bytes not covered by any tensor"));
  }
  return header;
}

absl::StatusOr<uint64_t> LayoutStTensors(std::vector<StTensorInfo>* tensors) {
  std::set<std::string> names;
  for (const StTensorInfo& t : *tensors) {
    if (t.name == kMetadataKey) {
      return absl::InvalidArgumentError(
          "tensor name '__metadata__' is reserved");
    }
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("duplicate tensor name '", t.name, "'"));
    }
  }
  std::sort(tensors->begin(), tensors->end(),
            [](const StTensorInfo& a, const StTensorInfo& b) {
              size_t sa = StDtypeSize(a.dtype), sb = StDtypeSize(b.dtype);
              if (sa != sb) return sa > sb;
              return a.name < b.name;
            });
  uint64_t offset = 0;
  for (StTensorInfo& t : *tensors) {
    auto bytes = TensorBytes(t.shape, t.dtype);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", t.name, "': ", bytes.status().message()));
    }
    t.begin = offset;
    if (__builtin_add_overflow(offset, *bytes, &offset)) {
      return absl::InvalidArgumentError("total tensor size overflows");
    }
    t.end = offset;
  }
  return offset;
}

absl::StatusOr<std::string> SerializeStHeader(
    const std::vector<StTensorInfo>& tensors,
    const std::map<std::string, std::string>& metadata) {
  Json root = Json::object();
  if (!metadata.empty()) root[kMetadataKey] = metadata;
  for (const StTensorInfo& t : tensors) {
    root[t.name] = {{"dtype", StDtypeName(t.dtype)},
                    {"shape", t.shape},
                    {"data_offsets", {t.begin, t.end}}};
  }
  std::string text;
  try {
    text = root.dump();
  } catch (const Json::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor name or metadata is not valid UTF-8: ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += text;
  return out;
}

}  // namespace verl::ckpt
