#include "verl/rl/data/parquet/parquet_format.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/rl/data/parquet/thrift_compact.h"

namespace verl::rl::parquet {
namespace {

using T = ThriftType;

ThriftValue I32(int64_t v) { return ThriftValue::Int(T::kI32, v); }
ThriftValue I64(int64_t v) { return ThriftValue::Int(T::kI64, v); }

// Reads an enum-valued i32 field, checking it against [0, max].
template <typename E>
E EnumField(StructReader& r, int16_t id, const char* name, bool required,
            int32_t max, E dflt) {
  const int32_t v = r.I32(id, name, required, static_cast<int32_t>(dflt));
  if (v < 0 || v > max) {
    r.Fail(absl::StrCat(name, " = ", v, " is not a known value"));
    return dflt;
  }
  return static_cast<E>(v);
}

Logical LogicalFrom(const ThriftValue* lt, const std::optional<int32_t>& ct) {
  if (lt != nullptr && !lt->fields.empty()) {
    switch (lt->fields.front().first) {
      case 1:
        return Logical::kString;
      case 2:
        return Logical::kMap;
      case 3:
        return Logical::kList;
      case 4:
        return Logical::kEnum;
      case 5:
        return Logical::kDecimal;
      case 10: {
        const ThriftValue* is_signed = lt->fields.front().second.Find(2);
        return is_signed && is_signed->type == T::kBool && !is_signed->i
                   ? Logical::kUnsignedInt
                   : Logical::kNone;
      }
      case 12:
        return Logical::kJson;
      default:
        return Logical::kOther;
    }
  }
  if (!ct) return Logical::kNone;
  switch (*ct) {
    case kConvUtf8:
      return Logical::kString;
    case kConvMap:
    case kConvMapKeyValue:
      return Logical::kMap;
    case kConvList:
      return Logical::kList;
    case kConvEnum:
      return Logical::kEnum;
    case kConvDecimal:
      return Logical::kDecimal;
    case kConvJson:
      return Logical::kJson;
    default:
      return *ct >= kConvUint8 && *ct <= kConvUint64 ? Logical::kUnsignedInt
                                                     : Logical::kOther;
  }
}

absl::StatusOr<SchemaElement> ParseSchemaElement(const ThriftValue& v,
                                                 size_t index) {
  StructReader r(v, absl::StrCat("SchemaElement[", index, "]"));
  SchemaElement e;
  e.name = r.Binary(4, "name", true);
  if (r.Has(1)) {
    e.type = EnumField(r, 1, "type", false, 7, PhysicalType::kInt32);
  }
  e.type_length = r.I32(2, "type_length", false);
  e.has_repetition = r.Has(3);
  e.repetition =
      EnumField(r, 3, "repetition_type", false, 2, Repetition::kRequired);
  e.num_children = r.I32(5, "num_children", false);
  if (r.Has(6)) e.converted_type = r.I32(6, "converted_type", false);
  e.scale = r.I32(7, "scale", false);
  e.precision = r.I32(8, "precision", false);
  e.logical = LogicalFrom(r.Struct(10, "logicalType", false), e.converted_type);
  if (!r.status().ok()) return r.status();
  return e;
}

absl::StatusOr<ColumnChunk> ParseColumnChunk(const ThriftValue& v,
                                             const std::string& what) {
  StructReader r(v, what);
  ColumnChunk c;
  c.file_path = r.Binary(1, "file_path", false);
  c.file_offset = r.I64(2, "file_offset", false);
  const ThriftValue* md = r.Struct(3, "meta_data", true);
  if (!r.status().ok()) return r.status();
  StructReader m(*md, what + ".meta_data");
  ColumnMetaData& cm = c.meta;
  cm.type = EnumField(m, 1, "type", true, 7, PhysicalType::kInt32);
  if (auto* encs = m.List(2, "encodings", true, T::kI32)) {
    for (const ThriftValue& e : *encs) {
      cm.encodings.push_back(static_cast<Encoding>(e.i));
    }
  }
  if (auto* path = m.List(3, "path_in_schema", true, T::kBinary)) {
    for (const ThriftValue& p : *path) cm.path_in_schema.push_back(p.bin);
  }
  cm.codec = EnumField(m, 4, "codec", true, 7, Codec::kUncompressed);
  cm.num_values = m.I64(5, "num_values", true);
  cm.total_uncompressed_size = m.I64(6, "total_uncompressed_size", true);
  cm.total_compressed_size = m.I64(7, "total_compressed_size", true);
  cm.data_page_offset = m.I64(9, "data_page_offset", true);
  if (m.Has(11)) {
    cm.dictionary_page_offset = m.I64(11, "dictionary_page_offset", false);
  }
  if (!m.status().ok()) return m.status();
  return c;
}

ThriftValue LogicalStruct(int16_t id) {
  ThriftValue lt;
  lt.Add(id, ThriftValue::Struct());
  return lt;
}

ThriftValue SchemaElementValue(const SchemaElement& e) {
  ThriftValue v;
  if (e.type) v.Add(1, I32(static_cast<int32_t>(*e.type)));
  if (e.type_length) v.Add(2, I32(e.type_length));
  if (e.has_repetition) v.Add(3, I32(static_cast<int32_t>(e.repetition)));
  v.Add(4, ThriftValue::Binary(e.name));
  if (e.num_children) v.Add(5, I32(e.num_children));
  if (e.converted_type) v.Add(6, I32(*e.converted_type));
  if (e.logical == Logical::kString) v.Add(10, LogicalStruct(1));
  if (e.logical == Logical::kList) v.Add(10, LogicalStruct(3));
  if (e.logical == Logical::kMap) v.Add(10, LogicalStruct(2));
  return v;
}

ThriftValue ColumnChunkValue(const ColumnChunk& c) {
  const ColumnMetaData& m = c.meta;
  ThriftValue md;
  md.Add(1, I32(static_cast<int32_t>(m.type)));
  std::vector<ThriftValue> encs, path;
  for (Encoding e : m.encodings) encs.push_back(I32(static_cast<int32_t>(e)));
  for (const std::string& p : m.path_in_schema) {
    path.push_back(ThriftValue::Binary(p));
  }
  md.Add(2, ThriftValue::List(T::kI32, std::move(encs)));
  md.Add(3, ThriftValue::List(T::kBinary, std::move(path)));
  md.Add(4, I32(static_cast<int32_t>(m.codec)));
  md.Add(5, I64(m.num_values));
  md.Add(6, I64(m.total_uncompressed_size));
  md.Add(7, I64(m.total_compressed_size));
  md.Add(9, I64(m.data_page_offset));
  if (m.dictionary_page_offset) md.Add(11, I64(*m.dictionary_page_offset));
  ThriftValue v;
  v.Add(2, I64(c.file_offset));
  v.Add(3, std::move(md));
  return v;
}

}  // namespace

const char* PhysicalTypeName(PhysicalType t) {
  static const char* kNames[] = {
      "BOOLEAN", "INT32",  "INT64",      "INT96",
      "FLOAT",   "DOUBLE", "BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY"};
  const int i = static_cast<int>(t);
  return i >= 0 && i < 8 ? kNames[i] : "UNKNOWN";
}

const char* EncodingName(Encoding e) {
  static const char* kNames[] = {"PLAIN",
                                 "GROUP_VAR_INT",
                                 "PLAIN_DICTIONARY",
                                 "RLE",
                                 "BIT_PACKED",
                                 "DELTA_BINARY_PACKED",
                                 "DELTA_LENGTH_BYTE_ARRAY",
                                 "DELTA_BYTE_ARRAY",
                                 "RLE_DICTIONARY",
                                 "BYTE_STREAM_SPLIT"};
  const int i = static_cast<int>(e);
  return i >= 0 && i < 10 ? kNames[i] : "UNKNOWN";
}

const char* CodecName(Codec c) {
  static const char* kNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO",
                                 "BROTLI",       "LZ4",    "ZSTD", "LZ4_RAW"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < 8 ? kNames[i] : "UNKNOWN";
}

absl::StatusOr<FileMetaData> ParseFileMetaData(absl::string_view bytes) {
  auto v = DecodeThriftStruct(bytes);
  if (!v.ok()) return v.status();
  StructReader r(*v, "FileMetaData");
  FileMetaData md;
  md.version = r.I32(1, "version", false, 1);
  const auto* schema = r.List(2, "schema", true, T::kStruct);
  md.num_rows = r.I64(3, "num_rows", true);
  const auto* groups = r.List(4, "row_groups", true, T::kStruct);
  const auto* kvs = r.List(5, "key_value_metadata", false, T::kStruct);
  md.created_by = r.Binary(6, "created_by", false);
  if (!r.status().ok()) return r.status();
  for (size_t i = 0; i < schema->size(); ++i) {
    auto e = ParseSchemaElement((*schema)[i], i);
    if (!e.ok()) return e.status();
    md.schema.push_back(*std::move(e));
  }
  for (size_t g = 0; g < groups->size(); ++g) {
    const std::string what = absl::StrCat("RowGroup[", g, "]");
    StructReader rg(groups->at(g), what);
    RowGroup group;
    const auto* cols = rg.List(1, "columns", true, T::kStruct);
    group.total_byte_size = rg.I64(2, "total_byte_size", true);
    group.num_rows = rg.I64(3, "num_rows", true);
    if (!rg.status().ok()) return rg.status();
    for (size_t c = 0; c < cols->size(); ++c) {
      auto chunk =
          ParseColumnChunk((*cols)[c], absl::StrCat(what, ".columns[", c, "]"));
      if (!chunk.ok()) return chunk.status();
      group.columns.push_back(*std::move(chunk));
    }
    md.row_groups.push_back(std::move(group));
  }
  if (kvs != nullptr) {
    for (const ThriftValue& kv : *kvs) {
      StructReader k(kv, "KeyValue");
      KeyValue entry{k.Binary(1, "key", true), k.Binary(2, "value", false)};
      if (!k.status().ok()) return k.status();
      md.key_value_metadata.push_back(std::move(entry));
    }
  }
  return md;
}

std::string SerializeFileMetaData(const FileMetaData& md) {
  ThriftValue v;
  v.Add(1, I32(md.version));
  std::vector<ThriftValue> schema, groups, kvs;
  for (const SchemaElement& e : md.schema) {
    schema.push_back(SchemaElementValue(e));
  }
  for (const RowGroup& g : md.row_groups) {
    std::vector<ThriftValue> cols;
    int64_t compressed = 0;
    for (const ColumnChunk& c : g.columns) {
      cols.push_back(ColumnChunkValue(c));
      compressed += c.meta.total_compressed_size;
    }
    ThriftValue rg;
    rg.Add(1, ThriftValue::List(T::kStruct, std::move(cols)));
    rg.Add(2, I64(g.total_byte_size));
    rg.Add(3, I64(g.num_rows));
    if (!g.columns.empty()) {
      const ColumnMetaData& first = g.columns.front().meta;
      rg.Add(
          5,
          I64(first.dictionary_page_offset.value_or(first.data_page_offset)));
    }
    rg.Add(6, I64(compressed));
    groups.push_back(std::move(rg));
  }
  for (const KeyValue& kv : md.key_value_metadata) {
    ThriftValue k;
    k.Add(1, ThriftValue::Binary(kv.key));
    k.Add(2, ThriftValue::Binary(kv.value));
    kvs.push_back(std::move(k));
  }
  v.Add(2, ThriftValue::List(T::kStruct, std::move(schema)));
  v.Add(3, I64(md.num_rows));
  v.Add(4, ThriftValue::List(T::kStruct, std::move(groups)));
  if (!kvs.empty()) v.Add(5, ThriftValue::List(T::kStruct, std::move(kvs)));
  if (!md.created_by.empty()) v.Add(6, ThriftValue::Binary(md.created_by));
  return EncodeThriftStruct(v);
}

absl::StatusOr<PageHeader> ParsePageHeader(absl::string_view bytes,
                                           size_t* consumed) {
  auto v = DecodeThriftStruct(bytes, consumed);
  if (!v.ok()) return v.status();
  StructReader r(*v, "PageHeader");
  PageHeader h;
  h.type = EnumField(r, 1, "type", true, 3, PageType::kDataPage);
  h.uncompressed_page_size = r.I32(2, "uncompressed_page_size", true);
  h.compressed_page_size = r.I32(3, "compressed_page_size", true);
  if (!r.status().ok()) return r.status();
  if (h.uncompressed_page_size < 0 || h.compressed_page_size < 0) {
    return absl::InvalidArgumentError("PageHeader: negative page size");
  }
  auto enc = [](StructReader& s, int16_t id, const char* name) {
    return static_cast<Encoding>(s.I32(id, name, true));
  };
  if (h.type == PageType::kDataPage) {
    const ThriftValue* d = r.Struct(5, "data_page_header", true);
    if (!r.status().ok()) return r.status();
    StructReader s(*d, "DataPageHeader");
    h.num_values = s.I32(1, "num_values", true);
    h.encoding = enc(s, 2, "encoding");
    h.definition_level_encoding = enc(s, 3, "definition_level_encoding");
    h.repetition_level_encoding = enc(s, 4, "repetition_level_encoding");
    if (!s.status().ok()) return s.status();
  } else if (h.type == PageType::kDictionaryPage) {
    const ThriftValue* d = r.Struct(7, "dictionary_page_header", true);
    if (!r.status().ok()) return r.status();
    StructReader s(*d, "DictionaryPageHeader");
    h.num_values = s.I32(1, "num_values", true);
    h.encoding = enc(s, 2, "encoding");
    if (!s.status().ok()) return s.status();
  } else if (h.type == PageType::kDataPageV2) {
    const ThriftValue* d = r.Struct(8, "data_page_header_v2", true);
    if (!r.status().ok()) return r.status();
    StructReader s(*d, "DataPageHeaderV2");
    h.num_values = s.I32(1, "num_values", true);
    h.num_nulls = s.I32(2, "num_nulls", true);
    h.num_rows = s.I32(3, "num_rows", true);
    h.encoding = enc(s, 4, "encoding");
    h.definition_levels_byte_length =
        s.I32(5, "definition_levels_byte_length", true);
    h.repetition_levels_byte_length =
        s.I32(6, "repetition_levels_byte_length", true);
    h.is_compressed = s.Bool(7, "is_compressed", true);
    if (!s.status().ok()) return s.status();
    if (h.definition_levels_byte_length < 0 ||
        h.repetition_levels_byte_length < 0) {
      return absl::InvalidArgumentError(
          "DataPageHeaderV2: negative level byte length");
    }
  }
  if (h.num_values < 0) {
    return absl::InvalidArgumentError("PageHeader: negative num_values");
  }
  return h;
}

std::string SerializePageHeader(const PageHeader& h) {
  ThriftValue v;
  v.Add(1, I32(static_cast<int32_t>(h.type)));
  v.Add(2, I32(h.uncompressed_page_size));
  v.Add(3, I32(h.compressed_page_size));
  ThriftValue d;
  d.Add(1, I32(h.num_values));
  d.Add(2, I32(static_cast<int32_t>(h.encoding)));
  if (h.type == PageType::kDataPage) {
    d.Add(3, I32(static_cast<int32_t>(h.definition_level_encoding)));
    d.Add(4, I32(static_cast<int32_t>(h.repetition_level_encoding)));
    v.Add(5, std::move(d));
  } else if (h.type == PageType::kDictionaryPage) {
    v.Add(7, std::move(d));
  }
  return EncodeThriftStruct(v);
}

}  // namespace verl::rl::parquet
