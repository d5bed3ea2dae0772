#include "verl/rl/data/parquet/thrift_compact.h"

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"

namespace verl::rl::parquet {
namespace {

constexpr int kMaxDepth = 32;

bool IsInt(ThriftType t) {
  return t == ThriftType::kI8 || t == ThriftType::kI16 ||
         t == ThriftType::kI32 || t == ThriftType::kI64;
}

// Reads compact-protocol values from a byte range.
class Decoder {
 public:
  explicit Decoder(absl::string_view b) : b_(b) {}
  size_t pos() const { return pos_; }

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat("thrift: ", what, " at byte ", pos_));
  }

  absl::StatusOr<uint64_t> Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= b_.size()) return Error("truncated varint");
      const uint8_t byte = static_cast<uint8_t>(b_[pos_++]);
      v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if (!(byte & 0x80)) return v;
    }
    return Error("varint longer than 10 bytes");
  }
  absl::StatusOr<int64_t> Zigzag() {
    auto u = Varint();
    if (!u.ok()) return u.status();
    return static_cast<int64_t>((*u >> 1) ^ (~(*u & 1) + 1));
  }
  absl::StatusOr<uint8_t> Byte() {
    if (pos_ >= b_.size()) return Error("truncated");
    return static_cast<uint8_t>(b_[pos_++]);
  }

  absl::StatusOr<ThriftType> WireType(uint8_t nibble) const {
    if (nibble == 2) return ThriftType::kBool;  // false
    if (nibble == 0 || nibble > 12) {
      return Error(absl::StrCat("unknown wire type ", nibble));
    }
    return static_cast<ThriftType>(nibble);
  }

  // Reads a value of type t. `bool_in_field` carries the value of a boolean
  // struct field, which lives in the field header's type nibble.
  absl::Status Value(ThriftType t, int depth, ThriftValue* out,
                     int bool_in_field = -1) {
    if (depth > kMaxDepth) return Error("nesting deeper than 32");
    out->type = t;
    switch (t) {
      case ThriftType::kBool: {
        if (bool_in_field >= 0) {
          out->i = bool_in_field;
          return absl::OkStatus();
        }
        auto byte = Byte();
        if (!byte.ok()) return byte.status();
        out->i = *byte == 1;
        return absl::OkStatus();
      }
      case ThriftType::kI8: {
        auto byte = Byte();
        if (!byte.ok()) return byte.status();
        out->i = static_cast<int8_t>(*byte);
        return absl::OkStatus();
      }
      case ThriftType::kI16:
      case ThriftType::kI32:
      case ThriftType::kI64: {
        auto v = Zigzag();
        if (!v.ok()) return v.status();
        out->i = *v;
        const int64_t lim = t == ThriftType::kI16   ? 32767
                            : t == ThriftType::kI32 ? 2147483647
                                                    : 0;
        if (lim && (out->i > lim || out->i < -lim - 1)) {
          return Error(absl::StrCat(ThriftTypeName(t), " out of range"));
        }
        return absl::OkStatus();
      }
      case ThriftType::kDouble: {
        if (b_.size() - pos_ < 8) return Error("truncated double");
        std::memcpy(&out->d, b_.data() + pos_, 8);
        pos_ += 8;
        return absl::OkStatus();
      }
      case ThriftType::kBinary: {
        auto n = Varint();
        if (!n.ok()) return n.status();
        if (*n > b_.size() - pos_) {
          return Error(absl::StrCat("binary of ", *n, " bytes past the end"));
        }
        out->bin.assign(b_.data() + pos_, *n);
        pos_ += *n;
        return absl::OkStatus();
      }
      case ThriftType::kList:
      case ThriftType::kSet: {
        auto head = Byte();
        if (!head.ok()) return head.status();
        uint64_t n = *head >> 4;
        if (n == 15) {
          auto big = Varint();
          if (!big.ok()) return big.status();
          n = *big;
        }
        auto et = WireType(*head & 0x0f);
        if (!et.ok()) return et.status();
        out->elem = *et;
        return Items(n, {*et}, depth, out);
      }
      case ThriftType::kMap: {
        auto n = Varint();
        if (!n.ok()) return n.status();
        if (*n == 0) return absl::OkStatus();
        auto kv = Byte();
        if (!kv.ok()) return kv.status();
        auto kt = WireType(*kv >> 4);
        if (!kt.ok()) return kt.status();
        auto vt = WireType(*kv & 0x0f);
        if (!vt.ok()) return vt.status();
        if (*n > (b_.size() - pos_) / 2) return Error("map size past the end");
        return Items(*n * 2, {*kt, *vt}, depth, out);
      }
      case ThriftType::kStruct:
        return Struct(depth, out);
      default:
        return Error("bad type");
    }
  }

 private:
  // n items cycling through `types` (one type for lists, key/value for maps).
  absl::Status Items(uint64_t n, std::vector<ThriftType> types, int depth,
                     ThriftValue* out) {
    // Every item takes at least one byte, which bounds hostile sizes.
    if (n > b_.size() - pos_) {
      return Error(absl::StrCat("container of ", n, " items past the end"));
    }
    out->items.resize(n);
    for (uint64_t k = 0; k < n; ++k) {
      if (auto s = Value(types[k % types.size()], depth + 1, &out->items[k]);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Struct(int depth, ThriftValue* out) {
    int64_t last_id = 0;
    while (true) {
      auto head = Byte();
      if (!head.ok()) return head.status();
      if (*head == 0) return absl::OkStatus();
      const uint8_t delta = *head >> 4;
      int64_t id;
      if (delta) {
        id = last_id + delta;
      } else {
        auto z = Zigzag();
        if (!z.ok()) return z.status();
        id = *z;
      }
      if (id < std::numeric_limits<int16_t>::min() ||
          id > std::numeric_limits<int16_t>::max()) {
        return Error("field id out of range");
      }
      const uint8_t nib = *head & 0x0f;
      auto t = WireType(nib);
      if (!t.ok()) return t.status();
      ThriftValue v;
      const int field_bool = nib == 1 ? 1 : nib == 2 ? 0 : -1;
      if (auto s = Value(*t, depth + 1, &v, field_bool); !s.ok()) return s;
      out->fields.emplace_back(static_cast<int16_t>(id), std::move(v));
      last_id = id;
    }
  }

  absl::string_view b_;
  size_t pos_ = 0;
};

class Encoder {
 public:
  std::string out;

  void Varint(uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  }
  void Zigzag(int64_t v) {
    Varint((static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63));
  }

  void Value(const ThriftValue& v) {
    switch (v.type) {
      case ThriftType::kBool:
        out.push_back(v.i ? 1 : 2);
        break;
      case ThriftType::kI8:
        out.push_back(static_cast<char>(v.i));
        break;
      case ThriftType::kI16:
      case ThriftType::kI32:
      case ThriftType::kI64:
        Zigzag(v.i);
        break;
      case ThriftType::kDouble: {
        char b[8];
        std::memcpy(b, &v.d, 8);
        out.append(b, 8);
        break;
      }
      case ThriftType::kBinary:
        Varint(v.bin.size());
        out += v.bin;
        break;
      case ThriftType::kList:
      case ThriftType::kSet: {
        const uint8_t et = static_cast<uint8_t>(v.elem);
        if (v.items.size() < 15) {
          out.push_back(static_cast<char>((v.items.size() << 4) | et));
        } else {
          out.push_back(static_cast<char>(0xf0 | et));
          Varint(v.items.size());
        }
        for (const ThriftValue& item : v.items) Value(item);
        break;
      }
      case ThriftType::kMap: {
        Varint(v.items.size() / 2);
        if (!v.items.empty()) {
          out.push_back(
              static_cast<char>((static_cast<uint8_t>(v.items[0].type) << 4) |
                                static_cast<uint8_t>(v.items[1].type)));
        }
        for (const ThriftValue& item : v.items) Value(item);
        break;
      }
      case ThriftType::kStruct: {
        int last = 0;
        for (const auto& [id, f] : v.fields) {
          uint8_t nib = static_cast<uint8_t>(f.type);
          if (f.type == ThriftType::kBool) nib = f.i ? 1 : 2;
          if (id > last && id - last <= 15) {
            out.push_back(static_cast<char>(((id - last) << 4) | nib));
          } else {
            out.push_back(static_cast<char>(nib));
            Zigzag(id);
          }
          if (f.type != ThriftType::kBool) Value(f);
          last = id;
        }
        out.push_back(0);
        break;
      }
      default:
        break;
    }
  }
};

}  // namespace

const char* ThriftTypeName(ThriftType t) {
  switch (t) {
    case ThriftType::kStop:
      return "stop";
    case ThriftType::kBool:
      return "bool";
    case ThriftType::kI8:
      return "i8";
    case ThriftType::kI16:
      return "i16";
    case ThriftType::kI32:
      return "i32";
    case ThriftType::kI64:
      return "i64";
    case ThriftType::kDouble:
      return "double";
    case ThriftType::kBinary:
      return "binary";
    case ThriftType::kList:
      return "list";
    case ThriftType::kSet:
      return "set";
    case ThriftType::kMap:
      return "map";
    case ThriftType::kStruct:
      return "struct";
  }
  return "unknown";
}

ThriftValue ThriftValue::Int(ThriftType t, int64_t v) {
  ThriftValue r;
  r.type = t;
  r.i = v;
  return r;
}

ThriftValue ThriftValue::Bool(bool v) { return Int(ThriftType::kBool, v); }

ThriftValue ThriftValue::Binary(std::string v) {
  ThriftValue r;
  r.type = ThriftType::kBinary;
  r.bin = std::move(v);
  return r;
}

ThriftValue ThriftValue::List(ThriftType elem, std::vector<ThriftValue> items) {
  ThriftValue r;
  r.type = ThriftType::kList;
  r.elem = elem;
  r.items = std::move(items);
  return r;
}

ThriftValue& ThriftValue::Add(int16_t id, ThriftValue v) {
  fields.emplace_back(id, std::move(v));
  return *this;
}

const ThriftValue* ThriftValue::Find(int16_t id) const {
  for (const auto& [fid, v] : fields) {
    if (fid == id) return &v;
  }
  return nullptr;
}

absl::StatusOr<ThriftValue> DecodeThriftStruct(absl::string_view bytes,
                                               size_t* consumed) {
  Decoder d(bytes);
  ThriftValue v;
  if (auto s = d.Value(ThriftType::kStruct, 0, &v); !s.ok()) return s;
  if (consumed) *consumed = d.pos();
  return v;
}

std::string EncodeThriftStruct(const ThriftValue& v) {
  Encoder e;
  e.Value(v);
  return std::move(e.out);
}

StructReader::StructReader(const ThriftValue& v, std::string what)
    : v_(v), what_(std::move(what)) {}

void StructReader::Fail(absl::string_view message) {
  if (status_.ok()) {
    status_ = absl::InvalidArgumentError(absl::StrCat(what_, ": ", message));
  }
}

const ThriftValue* StructReader::Get(int16_t id, const char* name,
                                     bool required, ThriftType want) {
  const ThriftValue* f = v_.Find(id);
  if (f == nullptr) {
    if (required) {
      Fail(absl::StrCat("required field ", name, " (", id, ") is missing"));
    }
    return nullptr;
  }
  const bool ok = f->type == want || (IsInt(want) && IsInt(f->type)) ||
                  (want == ThriftType::kList && f->type == ThriftType::kSet);
  if (!ok) {
    Fail(absl::StrCat("field ", name, " (", id, ") has wire type ",
                      ThriftTypeName(f->type), ", expected ",
                      ThriftTypeName(want)));
    return nullptr;
  }
  return f;
}

int64_t StructReader::I64(int16_t id, const char* name, bool required,
                          int64_t dflt) {
  const ThriftValue* f = Get(id, name, required, ThriftType::kI64);
  return f ? f->i : dflt;
}

int32_t StructReader::I32(int16_t id, const char* name, bool required,
                          int32_t dflt) {
  const ThriftValue* f = Get(id, name, required, ThriftType::kI32);
  if (f == nullptr) return dflt;
  if (f->i > std::numeric_limits<int32_t>::max() ||
      f->i < std::numeric_limits<int32_t>::min()) {
    Fail(absl::StrCat("field ", name, " (", id, ") = ", f->i,
                      " does not fit in i32"));
    return dflt;
  }
  return static_cast<int32_t>(f->i);
}

bool StructReader::Bool(int16_t id, const char* name, bool dflt) {
  const ThriftValue* f = Get(id, name, false, ThriftType::kBool);
  return f ? f->i != 0 : dflt;
}

std::string StructReader::Binary(int16_t id, const char* name, bool required) {
  const ThriftValue* f = Get(id, name, required, ThriftType::kBinary);
  return f ? f->bin : std::string();
}

const ThriftValue* StructReader::Struct(int16_t id, const char* name,
                                        bool required) {
  return Get(id, name, required, ThriftType::kStruct);
}

const std::vector<ThriftValue>* StructReader::List(int16_t id, const char* name,
                                                   bool required,
                                                   ThriftType elem) {
  const ThriftValue* f = Get(id, name, required, ThriftType::kList);
  if (f == nullptr) return nullptr;
  const bool ok =
      f->elem == elem || (IsInt(elem) && IsInt(f->elem)) || f->items.empty();
  if (!ok) {
    Fail(absl::StrCat("list ", name, " (", id, ") has ",
                      ThriftTypeName(f->elem), " elements, expected ",
                      ThriftTypeName(elem)));
    return nullptr;
  }
  return &f->items;
}

}  // namespace verl::rl::parquet
