// File: verl/core/batch_wire.cc
//
// Wire format:
//   magic "VBAT" | u32 version | i64 batch_size | u64 len + CBOR(meta_info)
//   | u32 n_tensors  { u32 len + name | u8 dtype | u32 ndim | i64 sizes[ndim]
//                      | u64 nbytes | raw contiguous bytes }
//   | u32 n_columns  { u32 len + name | u64 len + CBOR(array of rows) }
// All integers little-endian. The reader checks every length against what is
// left, so corrupt input yields an error, never a crash or a huge allocation.
#include "verl/core/batch_wire.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"
#include "verl/core/status.h"

namespace verl {
namespace core {
namespace {

using Json = Batch::Json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "Batch wire format assumes a little-endian host");

constexpr char kMagic[4] = {'V', 'B', 'A', 'T'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxDims = 64;
constexpr int kMaxJsonDepth = 256;

// Stable dtype codes for the wire format (independent of c10's enum order).
// Must cover every dtype Batch::SupportsDtype accepts (batch_wire_test checks).
struct DtypeCode {
  at::ScalarType type;
  uint8_t code;
};
constexpr DtypeCode kDtypeCodes[] = {
    {at::kBool, 1},    {at::kByte, 2},          {at::kChar, 3},
    {at::kShort, 4},   {at::kInt, 5},           {at::kLong, 6},
    {at::kHalf, 7},    {at::kBFloat16, 8},      {at::kFloat, 9},
    {at::kDouble, 10}, {at::kComplexFloat, 11}, {at::kComplexDouble, 12},
};

uint8_t CodeOf(at::ScalarType type) {
  for (const DtypeCode& d : kDtypeCodes) {
    if (d.type == type) return d.code;
  }
  LOG(FATAL) << "Batch holds dtype " << c10::toString(type)
             << " that the wire format has no code for";
}

std::optional<at::ScalarType> TypeOf(uint8_t code) {
  for (const DtypeCode& d : kDtypeCodes) {
    if (d.code == code) return d.type;
  }
  return std::nullopt;
}

// CPU, contiguous, conj/neg bits resolved: the bytes that go on the wire.
at::Tensor Materialize(const at::Tensor& t) {
  return t.cpu().resolve_conj().resolve_neg().contiguous();
}

uint64_t NumBytes(const at::Tensor& t) {
  return static_cast<uint64_t>(t.numel()) * t.element_size();
}

// ---- Little-endian writer / bounds-checked reader ---------------------------

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void PutBytes(std::string* out, const void* data, uint64_t n, bool wide) {
  if (wide) {
    Put<uint64_t>(out, n);
  } else {
    Put<uint32_t>(out, static_cast<uint32_t>(n));
  }
  if (n > 0) out->append(static_cast<const char*>(data), n);
}

class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}

  size_t left() const { return bytes_.size() - pos_; }
  size_t pos() const { return pos_; }

  template <typename T>
  absl::Status Get(T* v, absl::string_view what) {
    absl::string_view raw;
    VERL_RETURN_IF_ERROR(Take(sizeof(T), &raw, what));
    std::memcpy(v, raw.data(), sizeof(T));
    return absl::OkStatus();
  }

  absl::Status Take(uint64_t n, absl::string_view* out,
                    absl::string_view what) {
    if (n > left()) {
      return absl::DataLossError(absl::StrCat(
          "DeserializeBatch: truncated input reading ", what, " at offset ",
          pos_, " (need ", n, " bytes, ", left(), " left)"));
    }
    *out = bytes_.substr(pos_, n);
    pos_ += n;
    return absl::OkStatus();
  }

  // A length-prefixed blob (u32 or u64 length).
  template <typename Len>
  absl::Status Blob(absl::string_view* out, absl::string_view what) {
    Len n = 0;
    VERL_RETURN_IF_ERROR(Get(&n, absl::StrCat(what, " length")));
    return Take(n, out, what);
  }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

// SAX handler for CBOR that bounds the nesting depth and container lengths
// (nlohmann's reader recurses per level and reserves nothing, so these two
// limits make malformed input harmless).
class BoundedSax {
 public:
  BoundedSax(Json* root, size_t input_size)
      : dom_(*root, /*allow_exceptions=*/false), input_size_(input_size) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(Json::number_integer_t v) {
    return dom_.number_integer(v);
  }
  bool number_unsigned(Json::number_unsigned_t v) {
    return dom_.number_unsigned(v);
  }
  bool number_float(Json::number_float_t v, const Json::string_t& s) {
    return dom_.number_float(v, s);
  }
  bool string(Json::string_t& v) { return dom_.string(v); }
  bool binary(Json::binary_t& v) { return dom_.binary(v); }
  bool start_object(size_t len) { return Enter(len) && dom_.start_object(len); }
  bool key(Json::string_t& v) { return dom_.key(v); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool start_array(size_t len) { return Enter(len) && dom_.start_array(len); }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <typename Exception>
  bool parse_error(size_t pos, const std::string& token, const Exception& e) {
    error_ = e.what();
    return false;
  }

  const std::string& error() const { return error_; }

 private:
  bool Enter(size_t len) {
    if (++depth_ > kMaxJsonDepth) {
      error_ = absl::StrCat("nesting deeper than ", kMaxJsonDepth);
      return false;
    }
    if (len != static_cast<size_t>(-1) && len > input_size_) {
      error_ = absl::StrCat("container length ", len, " exceeds input size");
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  size_t input_size_;
  int depth_ = 0;
  std::string error_;
};

absl::StatusOr<Json> ParseCbor(absl::string_view bytes,
                               absl::string_view what) {
  Json result;
  BoundedSax sax(&result, bytes.size());
  bool ok = false;
  try {
    ok = Json::sax_parse(bytes.begin(), bytes.end(), &sax,
                         Json::input_format_t::cbor, /*strict=*/true);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(
        "DeserializeBatch: malformed CBOR in ", what, ": ", e.what()));
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat("DeserializeBatch: malformed CBOR in ", what, ": ",
                     sax.error().empty() ? "parse stopped" : sax.error()));
  }
  return result;
}

// Product of the sizes with dims of 0 counted as 1, or nullopt on overflow.
std::optional<int64_t> BoundedNumel(const std::vector<int64_t>& sizes,
                                    int64_t element_size) {
  int64_t n = element_size;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(n, std::max<int64_t>(s, 1), &n)) {
      return std::nullopt;
    }
  }
  return n;
}

absl::StatusOr<std::pair<std::string, at::Tensor>> ReadTensor(
    Reader* r, int64_t batch_size, uint32_t index) {
  const std::string what = absl::StrCat("tensor #", index);
  absl::string_view name;
  VERL_RETURN_IF_ERROR(r->Blob<uint32_t>(&name, absl::StrCat(what, " name")));
  const std::string key(name);
  const std::string ctx = absl::StrCat("tensor '", key, "'");
  uint8_t code = 0;
  VERL_RETURN_IF_ERROR(r->Get(&code, absl::StrCat(ctx, " dtype")));
  std::optional<at::ScalarType> type = TypeOf(code);
  if (!type) {
    return absl::DataLossError(absl::StrCat(
        "DeserializeBatch: ", ctx, " has unknown dtype code ", int{code}));
  }
  uint32_t ndim = 0;
  VERL_RETURN_IF_ERROR(r->Get(&ndim, absl::StrCat(ctx, " ndim")));
  if (ndim == 0 || ndim > kMaxDims) {
    return absl::DataLossError(
        absl::StrCat("DeserializeBatch: ", ctx, " has bad ndim ", ndim));
  }
  std::vector<int64_t> sizes(ndim);
  for (uint32_t d = 0; d < ndim; ++d) {
    VERL_RETURN_IF_ERROR(r->Get(&sizes[d], absl::StrCat(ctx, " sizes")));
    if (sizes[d] < 0) {
      return absl::DataLossError(absl::StrCat("DeserializeBatch: ", ctx,
                                              " has negative size ", sizes[d]));
    }
  }
  if (sizes[0] != batch_size) {
    return absl::DataLossError(
        absl::StrCat("DeserializeBatch: ", ctx, " has ", sizes[0],
                     " rows but the batch size is ", batch_size));
  }
  const int64_t element_size = c10::elementSize(*type);
  std::optional<int64_t> bound = BoundedNumel(sizes, element_size);
  uint64_t nbytes = 0;
  VERL_RETURN_IF_ERROR(r->Get(&nbytes, absl::StrCat(ctx, " byte count")));
  int64_t numel = 1;  // cannot overflow once `bound` exists
  if (bound) {
    for (int64_t s : sizes) numel *= s;
  }
  if (!bound || nbytes != static_cast<uint64_t>(numel) * element_size) {
    return absl::DataLossError(
        absl::StrCat("DeserializeBatch: ", ctx, " byte count ", nbytes,
                     " does not match its shape [", absl::StrJoin(sizes, ", "),
                     "] and dtype ", c10::toString(*type)));
  }
  absl::string_view data;
  VERL_RETURN_IF_ERROR(r->Take(nbytes, &data, absl::StrCat(ctx, " data")));
  if (*type == at::kBool) {
    for (char c : data) {
      if (c != 0 && c != 1) {
        return absl::DataLossError(absl::StrCat(
            "DeserializeBatch: ", ctx, " holds a bool byte other than 0/1"));
      }
    }
  }
  at::Tensor t;
  try {
    t = at::empty(sizes, at::TensorOptions().dtype(*type));
  } catch (const c10::Error& e) {
    return absl::DataLossError(absl::StrCat("DeserializeBatch: ", ctx, ": ",
                                            e.what_without_backtrace()));
  }
  if (nbytes > 0) std::memcpy(t.data_ptr(), data.data(), nbytes);
  return std::make_pair(key, std::move(t));
}

}  // namespace

std::string SerializeBatch(const Batch& batch) {
  const std::vector<uint8_t> meta = Json::to_cbor(batch.meta_info());
  std::vector<std::pair<const std::string*, at::Tensor>> dense;
  std::vector<std::pair<const std::string*, std::vector<uint8_t>>> columns;
  uint64_t total = sizeof(kMagic) + 4 + 8 + 8 + meta.size() + 4 + 4;
  for (const auto& kv : batch.tensors()) {
    dense.emplace_back(&kv.first, Materialize(kv.second));
    total += 4 + kv.first.size() + 1 + 4 + 8 * kv.second.dim() + 8 +
             NumBytes(dense.back().second);
  }
  for (const auto& kv : batch.non_tensors()) {
    columns.emplace_back(&kv.first, Json::to_cbor(Json(kv.second)));
    total += 4 + kv.first.size() + 8 + columns.back().second.size();
  }

  std::string out;
  out.reserve(total);
  out.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(&out, kVersion);
  Put<int64_t>(&out, batch.size());
  PutBytes(&out, meta.data(), meta.size(), /*wide=*/true);
  Put<uint32_t>(&out, static_cast<uint32_t>(dense.size()));
  for (const auto& [name, t] : dense) {
    PutBytes(&out, name->data(), name->size(), /*wide=*/false);
    Put<uint8_t>(&out, CodeOf(t.scalar_type()));
    Put<uint32_t>(&out, static_cast<uint32_t>(t.dim()));
    for (int64_t s : t.sizes()) Put<int64_t>(&out, s);
    PutBytes(&out, t.data_ptr(), NumBytes(t), /*wide=*/true);
  }
  Put<uint32_t>(&out, static_cast<uint32_t>(columns.size()));
  for (const auto& [name, cbor] : columns) {
    PutBytes(&out, name->data(), name->size(), /*wide=*/false);
    PutBytes(&out, cbor.data(), cbor.size(), /*wide=*/true);
  }
  DCHECK_EQ(out.size(), total);
  return out;
}

absl::StatusOr<Batch> DeserializeBatch(absl::string_view bytes) {
  Reader r(bytes);
  absl::string_view magic;
  VERL_RETURN_IF_ERROR(r.Take(sizeof(kMagic), &magic, "magic"));
  if (magic != absl::string_view(kMagic, sizeof(kMagic))) {
    return absl::InvalidArgumentError(
        "DeserializeBatch: bad magic (not a serialized Batch)");
  }
  uint32_t version = 0;
  VERL_RETURN_IF_ERROR(r.Get(&version, "version"));
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("DeserializeBatch: unsupported version ", version,
                     " (expected ", kVersion, ")"));
  }
  int64_t size = 0;
  VERL_RETURN_IF_ERROR(r.Get(&size, "batch size"));
  if (size < 0) {
    return absl::DataLossError(
        absl::StrCat("DeserializeBatch: negative batch size ", size));
  }
  absl::string_view blob;
  VERL_RETURN_IF_ERROR(r.Blob<uint64_t>(&blob, "meta_info"));
  VERL_ASSIGN_OR_RETURN(Json meta, ParseCbor(blob, "meta_info"));
  if (!meta.is_object()) {
    return absl::DataLossError(
        "DeserializeBatch: meta_info is not a JSON object");
  }

  std::map<std::string, at::Tensor> tensors;
  uint32_t count = 0;
  VERL_RETURN_IF_ERROR(r.Get(&count, "tensor count"));
  for (uint32_t i = 0; i < count; ++i) {
    auto entry = ReadTensor(&r, size, i);
    VERL_RETURN_IF_ERROR(entry.status());
    if (!tensors.emplace(std::move(*entry)).second) {
      return absl::DataLossError("DeserializeBatch: duplicate tensor name");
    }
  }
  std::map<std::string, std::vector<Json>> columns;
  VERL_RETURN_IF_ERROR(r.Get(&count, "non-tensor column count"));
  for (uint32_t i = 0; i < count; ++i) {
    VERL_RETURN_IF_ERROR(r.Blob<uint32_t>(
        &blob, absl::StrCat("non-tensor column #", i, " name")));
    const std::string key(blob);
    const std::string ctx = absl::StrCat("non-tensor column '", key, "'");
    VERL_RETURN_IF_ERROR(r.Blob<uint64_t>(&blob, ctx));
    VERL_ASSIGN_OR_RETURN(Json rows, ParseCbor(blob, ctx));
    if (!rows.is_array() || static_cast<int64_t>(rows.size()) != size) {
      return absl::DataLossError(absl::StrCat(
          "DeserializeBatch: ", ctx, " is not an array of ", size, " rows"));
    }
    std::vector<Json> values(std::make_move_iterator(rows.begin()),
                             std::make_move_iterator(rows.end()));
    if (!columns.emplace(key, std::move(values)).second) {
      return absl::DataLossError(
          absl::StrCat("DeserializeBatch: duplicate ", ctx));
    }
  }
  if (r.left() != 0) {
    return absl::DataLossError(absl::StrCat("DeserializeBatch: ", r.left(),
                                            " trailing bytes after the batch"));
  }
  if (tensors.empty() && columns.empty() && size != 0) {
    return absl::DataLossError(absl::StrCat("DeserializeBatch: batch size ",
                                            size, " without columns"));
  }
  // Every column was checked against `size` above, so this cannot fail on
  // sizes; it re-checks dtypes and builds the batch through its public API.
  return Batch::FromColumns(std::move(tensors), std::move(columns),
                            std::move(meta));
}

}  // namespace core
}  // namespace verl
