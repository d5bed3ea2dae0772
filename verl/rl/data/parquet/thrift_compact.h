// File: verl/rl/data/parquet/thrift_compact.h
//
// The Thrift compact protocol, which Parquet uses for its footer and page
// headers. Values decode into a small generic tree (ThriftValue); typed
// readers (parquet_format.cc) pull fields out of it through StructReader,
// which turns a missing required field or a field of the wrong wire type into
// one error naming the struct and field. Decoding is bounded: nesting depth,
// and list/map sizes that cannot exceed the remaining bytes.
#ifndef VERL_RL_DATA_PARQUET_THRIFT_COMPACT_H_
#define VERL_RL_DATA_PARQUET_THRIFT_COMPACT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::rl::parquet {

// Compact-protocol wire types (booleans are one kind, kBool, in the tree).
enum class ThriftType : uint8_t {
  kStop = 0,
  kBool = 1,  // wire 1 (true) or 2 (false)
  kI8 = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

const char* ThriftTypeName(ThriftType t);

struct ThriftValue {
  ThriftType type = ThriftType::kStruct;
  int64_t i = 0;                       // kBool (0/1), kI8..kI64
  double d = 0;                        // kDouble
  std::string bin;                     // kBinary
  ThriftType elem = ThriftType::kI32;  // kList/kSet element type
  std::vector<ThriftValue> items;      // kList/kSet items; kMap k,v,k,v...
  std::vector<std::pair<int16_t, ThriftValue>> fields;  // kStruct, by id order

  static ThriftValue Int(ThriftType t, int64_t v);
  static ThriftValue Bool(bool v);
  static ThriftValue Binary(std::string v);
  static ThriftValue List(ThriftType elem, std::vector<ThriftValue> items);
  static ThriftValue Struct() { return ThriftValue(); }
  // Appends a struct field (ids must be added in increasing order).
  ThriftValue& Add(int16_t id, ThriftValue v);
  const ThriftValue* Find(int16_t id) const;
};

// Decodes one struct starting at bytes[0]; *consumed (if set) receives its
// encoded length. Errors say what was malformed and at which byte offset.
absl::StatusOr<ThriftValue> DecodeThriftStruct(absl::string_view bytes,
                                               size_t* consumed = nullptr);

// Encodes a struct value (the inverse of DecodeThriftStruct).
std::string EncodeThriftStruct(const ThriftValue& v);

// Typed field access on a decoded struct. Every getter records the first
// problem (missing required field, wrong wire type, out-of-range integer) as
// "<what>.<name> (field <id>): ..." and returns a default; check status()
// once after reading all fields.
class StructReader {
 public:
  StructReader(const ThriftValue& v, std::string what);

  bool Has(int16_t id) const { return v_.Find(id) != nullptr; }
  int64_t I64(int16_t id, const char* name, bool required, int64_t dflt = 0);
  int32_t I32(int16_t id, const char* name, bool required, int32_t dflt = 0);
  bool Bool(int16_t id, const char* name, bool dflt);
  std::string Binary(int16_t id, const char* name, bool required);
  // A nested struct, or nullptr when absent (an error if required).
  const ThriftValue* Struct(int16_t id, const char* name, bool required);
  // A list whose elements have wire type `elem`; nullptr when absent.
  const std::vector<ThriftValue>* List(int16_t id, const char* name,
                                       bool required, ThriftType elem);
  // Records an error about this struct (e.g. a value out of its enum).
  void Fail(absl::string_view message);
  const absl::Status& status() const { return status_; }

 private:
  const ThriftValue* Get(int16_t id, const char* name, bool required,
                         ThriftType want);
  const ThriftValue& v_;
  std::string what_;
  absl::Status status_;
};

}  // namespace verl::rl::parquet

#endif  // VERL_RL_DATA_PARQUET_THRIFT_COMPACT_H_
