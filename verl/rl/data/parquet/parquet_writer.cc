#include "verl/rl/data/parquet/parquet_writer.h"

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/file_util.h"
#include "verl/rl/data/parquet/parquet_codec.h"
#include "verl/rl/data/parquet/parquet_encoding.h"
#include "verl/rl/data/parquet/thrift_compact.h"

namespace verl::rl::parquet {
namespace {

using nlohmann::json;

constexpr char kMagic[] = "PAR1";
constexpr size_t kMaxDictionaryBytes = 1 << 20;

// The inferred type of one field (every field is nullable).
struct TypeNode {
  enum Kind { kNull, kBool, kInt, kDouble, kString, kBinary, kStruct, kList };
  Kind kind = kNull;
  std::vector<std::pair<std::string, TypeNode>> fields;  // kStruct, in order
  std::unique_ptr<TypeNode> elem;                        // kList
  int leaf = -1;                                         // leaf column index
};

const char* KindName(TypeNode::Kind k) {
  static const char* kNames[] = {"null",   "boolean", "integer", "number",
                                 "string", "binary",  "object",  "array"};
  return kNames[k];
}

TypeNode::Kind KindOf(const json& v) {
  switch (v.type()) {
    case json::value_t::boolean:
      return TypeNode::kBool;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return TypeNode::kInt;
    case json::value_t::number_float:
      return TypeNode::kDouble;
    case json::value_t::string:
      return TypeNode::kString;
    case json::value_t::binary:
      return TypeNode::kBinary;
    case json::value_t::object:
      return TypeNode::kStruct;
    case json::value_t::array:
      return TypeNode::kList;
    default:
      return TypeNode::kNull;
  }
}

// Widens `t` to hold `v`; integers and numbers unify to DOUBLE.
absl::Status Merge(TypeNode* t, const json& v, const std::string& path) {
  const TypeNode::Kind k = KindOf(v);
  if (k == TypeNode::kNull) return absl::OkStatus();
  const bool numeric =
      (k == TypeNode::kInt || k == TypeNode::kDouble) &&
      (t->kind == TypeNode::kInt || t->kind == TypeNode::kDouble);
  if (numeric) {
    if (k == TypeNode::kDouble) t->kind = TypeNode::kDouble;
  } else if (t->kind == TypeNode::kNull) {
    t->kind = k;
    if (k == TypeNode::kList) t->elem = std::make_unique<TypeNode>();
  } else if (t->kind != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("column ", path, " holds both ", KindName(t->kind),
                     " and ", KindName(k), " values"));
  }
  if (k == TypeNode::kStruct) {
    for (const auto& [key, val] : v.items()) {
      TypeNode* child = nullptr;
      for (auto& [name, f] : t->fields) {
        if (name == key) child = &f;
      }
      if (child == nullptr)
        child = &t->fields.emplace_back(key, TypeNode()).second;
      const std::string sub = path.empty() ? key : path + "." + key;
      if (auto s = Merge(child, val, sub); !s.ok()) return s;
    }
  } else if (k == TypeNode::kList) {
    for (const json& e : v) {
      if (auto s = Merge(t->elem.get(), e, path + "[]"); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

struct Leaf {
  std::string path;  // dotted, as in path_in_schema
  std::vector<std::string> path_in_schema;
  PhysicalType type;
  int max_def = 0;
  int max_rep = 0;
};

// Appends the schema elements of field `name` of type t.
absl::Status AddElements(const std::string& name, TypeNode* t,
                         std::vector<std::string> path, int def, int rep,
                         std::vector<SchemaElement>* out,
                         std::vector<Leaf>* leaves) {
  path.push_back(name);
  SchemaElement e;
  e.name = name;
  e.has_repetition = true;
  e.repetition = Repetition::kOptional;
  ++def;
  switch (t->kind) {
    case TypeNode::kStruct: {
      if (t->fields.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "column ", absl::StrJoin(path, "."),
            " is always an empty object; Parquet has no empty struct"));
      }
      e.num_children = t->fields.size();
      out->push_back(e);
      for (auto& [fname, f] : t->fields) {
        if (auto s = AddElements(fname, &f, path, def, rep, out, leaves);
            !s.ok()) {
          return s;
        }
      }
      return absl::OkStatus();
    }
    case TypeNode::kList: {
      e.num_children = 1;
      e.converted_type = kConvList;
      e.logical = Logical::kList;
      out->push_back(e);
      SchemaElement list;
      list.name = "list";
      list.has_repetition = true;
      list.repetition = Repetition::kRepeated;
      list.num_children = 1;
      out->push_back(list);
      path.push_back("list");
      return AddElements("element", t->elem.get(), path, def + 1, rep + 1, out,
                         leaves);
    }
    default:
      break;
  }
  switch (t->kind) {
    case TypeNode::kBool:
      e.type = PhysicalType::kBoolean;
      break;
    case TypeNode::kInt:
      e.type = PhysicalType::kInt64;
      break;
    case TypeNode::kDouble:
      e.type = PhysicalType::kDouble;
      break;
    case TypeNode::kBinary:
      e.type = PhysicalType::kByteArray;
      break;
    default:  // strings, and columns that are null in every row
      e.type = PhysicalType::kByteArray;
      e.converted_type = kConvUtf8;
      e.logical = Logical::kString;
  }
  t->leaf = leaves->size();
  out->push_back(e);
  leaves->push_back(Leaf{absl::StrJoin(path, "."), path, *e.type, def, rep});
  return absl::OkStatus();
}

struct LeafData {
  std::vector<int32_t> def, rep;
  ColumnValues values;
};

// Dremel shredding: appends the levels and values of field value `v` (null
// when absent) of type `t`, whose parent is defined at `def`.
void Shred(const TypeNode& t, const json* v, int rep, int def, int rep_depth,
           std::vector<LeafData>* cols) {
  const bool present = v != nullptr && !v->is_null();
  if (t.kind == TypeNode::kStruct) {
    for (const auto& [name, f] : t.fields) {
      const json* child = nullptr;
      if (present) {
        auto it = v->find(name);
        if (it != v->end()) child = &*it;
      }
      // An absent struct leaves its children at the parent's level.
      Shred(f, child, rep, present ? def + 1 : def, rep_depth, cols);
    }
    return;
  }
  if (t.kind == TypeNode::kList) {
    if (!present || v->empty()) {
      Shred(*t.elem, nullptr, rep, present ? def + 1 : def, rep_depth, cols);
      return;
    }
    for (size_t i = 0; i < v->size(); ++i) {
      Shred(*t.elem, &(*v)[i], i == 0 ? rep : rep_depth + 1, def + 2,
            rep_depth + 1, cols);
    }
    return;
  }
  LeafData& c = (*cols)[t.leaf];
  c.rep.push_back(rep);
  if (!present) {
    c.def.push_back(def);
    return;
  }
  c.def.push_back(def + 1);
  switch (t.kind) {
    case TypeNode::kBool:
      c.values.ints.push_back(v->get<bool>());
      break;
    case TypeNode::kInt:
      c.values.ints.push_back(v->get<int64_t>());
      break;
    case TypeNode::kDouble:
      c.values.floats.push_back(v->get<double>());
      break;
    case TypeNode::kString:
      c.values.bytes.push_back(v->get<std::string>());
      break;
    case TypeNode::kBinary: {
      const auto& b = v->get_binary();
      c.values.bytes.emplace_back(b.begin(), b.end());
      break;
    }
    default:
      break;
  }
}

// Bytes value k of a leaf takes when PLAIN-encoded (page-size estimate).
size_t PlainSize(const Leaf& leaf, const ColumnValues& v, size_t k) {
  switch (leaf.type) {
    case PhysicalType::kBoolean:
      return 1;
    case PhysicalType::kByteArray:
      return 4 + v.bytes[k].size();
    default:
      return 8;
  }
}

class ChunkWriter {
 public:
  ChunkWriter(const Leaf& leaf, const ParquetWriteOptions& opt,
              std::string* file)
      : leaf_(leaf), opt_(opt), file_(*file) {}

  // Appends the column chunk of `d` to the file; fills `cc`.
  absl::Status Write(const LeafData& d, ColumnChunk* cc) {
    ColumnMetaData& m = cc->meta;
    m.type = leaf_.type;
    m.path_in_schema = leaf_.path_in_schema;
    m.codec = opt_.codec;
    m.num_values = d.def.size();
    m.encodings = {Encoding::kPlain, Encoding::kRle};
    std::vector<int32_t> indices;
    ColumnValues dict;
    if (opt_.dictionary && leaf_.type != PhysicalType::kBoolean &&
        BuildDictionary(d.values, &dict, &indices)) {
      m.encodings.push_back(Encoding::kRleDictionary);
      m.dictionary_page_offset = file_.size();
      PageHeader h;
      h.type = PageType::kDictionaryPage;
      h.num_values = dict.size();
      std::string body;
      EncodePlain(leaf_.type, dict, 0, dict.size(), &body);
      if (auto s = AddPage(h, body, &m); !s.ok()) return s;
    }
    m.data_page_offset = file_.size();
    // Pages end at row starts (rep == 0) once they reach page_bytes.
    size_t level = 0, value = 0;
    while (level < d.def.size()) {
      const size_t first_level = level, first_value = value;
      size_t bytes = 0;
      while (level < d.def.size()) {
        if (level > first_level && d.rep[level] == 0 &&
            bytes >= static_cast<size_t>(opt_.page_bytes)) {
          break;
        }
        if (d.def[level] == leaf_.max_def) {
          bytes += PlainSize(leaf_, d.values, value++);
        }
        bytes += 1;
        ++level;
      }
      if (auto s =
              DataPage(d, indices, first_level, level, first_value, value, &m);
          !s.ok()) {
        return s;
      }
    }
    cc->file_offset = m.data_page_offset;
    return absl::OkStatus();
  }

 private:
  // Dictionary of distinct values, or false when it would be too large.
  bool BuildDictionary(const ColumnValues& v, ColumnValues* dict,
                       std::vector<int32_t>* indices) {
    std::map<std::string, int32_t> seen;
    size_t dict_bytes = 0;
    for (size_t k = 0; k < v.size(); ++k) {
      std::string key;
      EncodePlain(leaf_.type, v, k, k + 1, &key);
      auto [it, added] = seen.emplace(key, dict->size());
      if (added) {
        dict->AppendFrom(v, k);
        dict_bytes += key.size();
        if (dict_bytes > kMaxDictionaryBytes) return false;
      }
      indices->push_back(it->second);
    }
    return true;
  }

  absl::Status DataPage(const LeafData& d, const std::vector<int32_t>& indices,
                        size_t l0, size_t l1, size_t v0, size_t v1,
                        ColumnMetaData* m) {
    std::string body;
    auto levels = [&](const std::vector<int32_t>& lv, int max) {
      if (max == 0) return;
      const std::string enc = EncodeRleHybrid(
          std::vector<int32_t>(lv.begin() + l0, lv.begin() + l1),
          BitWidth(max));
      const uint32_t n = enc.size();
      body.append(reinterpret_cast<const char*>(&n), 4);
      body += enc;
    };
    levels(d.rep, leaf_.max_rep);
    levels(d.def, leaf_.max_def);
    PageHeader h;
    h.type = PageType::kDataPage;
    h.num_values = l1 - l0;
    if (m->dictionary_page_offset) {
      h.encoding = Encoding::kRleDictionary;
      int32_t max_index = 0;
      for (size_t k = v0; k < v1; ++k)
        max_index = std::max(max_index, indices[k]);
      const int width = BitWidth(max_index);
      body.push_back(static_cast<char>(width));
      body += EncodeRleHybrid(
          std::vector<int32_t>(indices.begin() + v0, indices.begin() + v1),
          width);
    } else {
      h.encoding = Encoding::kPlain;
      EncodePlain(leaf_.type, d.values, v0, v1, &body);
    }
    return AddPage(h, body, m);
  }

  absl::Status AddPage(PageHeader h, const std::string& body,
                       ColumnMetaData* m) {
    if (body.size() > static_cast<size_t>(kMaxPageBytes32)) {
      return absl::InvalidArgumentError(
          absl::StrCat("column ", leaf_.path, ": a single row needs a ",
                       body.size(), "-byte page"));
    }
    auto packed = Compress(opt_.codec, body);
    if (!packed.ok()) return packed.status();
    h.uncompressed_page_size = body.size();
    h.compressed_page_size = packed->size();
    const std::string header = SerializePageHeader(h);
    file_ += header;
    file_ += *packed;
    m->total_uncompressed_size += header.size() + body.size();
    m->total_compressed_size += header.size() + packed->size();
    return absl::OkStatus();
  }

  static constexpr int64_t kMaxPageBytes32 = (int64_t{1} << 31) - 1;
  const Leaf& leaf_;
  const ParquetWriteOptions& opt_;
  std::string& file_;
};

}  // namespace

absl::StatusOr<std::string> SerializeParquet(
    const std::vector<nlohmann::json>& rows,
    const ParquetWriteOptions& options) {
  if (options.row_group_rows <= 0 || options.page_bytes <= 0) {
    return absl::InvalidArgumentError(
        "row_group_rows and page_bytes must be positive");
  }
  TypeNode root;
  root.kind = TypeNode::kStruct;
  for (size_t r = 0; r < rows.size(); ++r) {
    if (!rows[r].is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", r, " is not a JSON object"));
    }
    if (auto s = Merge(&root, rows[r], ""); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", r, ": ", s.message()));
    }
  }
  if (root.fields.empty()) {
    return absl::InvalidArgumentError("no columns: every row is empty");
  }
  FileMetaData md;
  md.created_by = "verl-cpp parquet writer";
  md.num_rows = rows.size();
  SchemaElement schema_root;
  schema_root.name = "schema";
  schema_root.num_children = root.fields.size();
  md.schema.push_back(schema_root);
  std::vector<Leaf> leaves;
  for (auto& [name, f] : root.fields) {
    if (auto s = AddElements(name, &f, {}, 0, 0, &md.schema, &leaves);
        !s.ok()) {
      return s;
    }
  }
  std::string file = kMagic;
  for (size_t begin = 0; begin < rows.size(); begin += options.row_group_rows) {
    const size_t end = std::min(rows.size(), begin + options.row_group_rows);
    std::vector<LeafData> cols(leaves.size());
    for (size_t r = begin; r < end; ++r) {
      for (const auto& [name, f] : root.fields) {
        auto it = rows[r].find(name);
        Shred(f, it == rows[r].end() ? nullptr : &*it, 0, 0, 0, &cols);
      }
    }
    RowGroup rg;
    rg.num_rows = end - begin;
    for (size_t c = 0; c < leaves.size(); ++c) {
      ColumnChunk cc;
      if (auto s = ChunkWriter(leaves[c], options, &file).Write(cols[c], &cc);
          !s.ok()) {
        return s;
      }
      rg.total_byte_size += cc.meta.total_uncompressed_size;
      rg.columns.push_back(std::move(cc));
    }
    md.row_groups.push_back(std::move(rg));
  }
  const std::string footer = SerializeFileMetaData(md);
  file += footer;
  const uint32_t n = footer.size();
  file.append(reinterpret_cast<const char*>(&n), 4);
  file += kMagic;
  return file;
}

absl::Status WriteParquetFile(const std::string& path,
                              const std::vector<nlohmann::json>& rows,
                              const ParquetWriteOptions& options) {
  auto bytes = SerializeParquet(rows, options);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(),
                        absl::StrCat(path, ": ", bytes.status().message()));
  }
  return core::WriteFileAtomic(path, *bytes);
}

}  // namespace verl::rl::parquet
