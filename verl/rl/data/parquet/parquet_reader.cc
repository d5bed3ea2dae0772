#include "verl/rl/data/parquet/parquet_reader.h"

#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/rl/data/parquet/parquet_column.h"

namespace verl::rl::parquet {
namespace {

using nlohmann::json;

constexpr char kMagic[] = "PAR1";

absl::Status Corrupt(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF), as
// a JSON string must be: the JSONL reader rejects the same rows.
bool IsValidUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const uint8_t c = s[i];
    int n;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      n = 1, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      n = 2, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      n = 3, cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;
    for (int k = 1; k <= n; ++k) {
      const uint8_t d = s[i + k];
      if ((d & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3f);
    }
    static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

// Converts the k-th decoded value of a leaf column to JSON.
json LeafValue(const SchemaElement& e, const ColumnValues& v, size_t k) {
  switch (*e.type) {
    case PhysicalType::kBoolean:
      return json(v.ints[k] != 0);
    case PhysicalType::kInt32:
    case PhysicalType::kInt64: {
      const int64_t i = v.ints[k];
      if (e.logical == Logical::kDecimal) {
        return json(static_cast<double>(i) * std::pow(10.0, -e.scale));
      }
      if (e.logical == Logical::kUnsignedInt) {
        return json(*e.type == PhysicalType::kInt32
                        ? static_cast<uint64_t>(static_cast<uint32_t>(i))
                        : static_cast<uint64_t>(i));
      }
      return json(i);
    }
    case PhysicalType::kFloat:
    case PhysicalType::kDouble:
      return json(v.floats[k]);
    case PhysicalType::kInt96: {
      // 8 bytes nanoseconds of the day, then 4 bytes Julian day.
      int64_t nanos;
      int32_t day;
      std::memcpy(&nanos, v.bytes[k].data(), 8);
      std::memcpy(&day, v.bytes[k].data() + 8, 4);
      return json((static_cast<int64_t>(day) - 2440588) * 86400000000000LL +
                  nanos);
    }
    case PhysicalType::kByteArray:
    case PhysicalType::kFixedLenByteArray: {
      const std::string& b = v.bytes[k];
      if (e.logical == Logical::kString || e.logical == Logical::kEnum ||
          e.logical == Logical::kJson) {
        return json(b);
      }
      return json::binary(std::vector<uint8_t>(b.begin(), b.end()));
    }
  }
  return json();
}

// Dremel record assembly over one row group's decoded leaf columns.
class Assembler {
 public:
  Assembler(const Schema& s, std::vector<ColumnData>* cols)
      : s_(s), cols_(*cols), level_(cols->size(), 0), value_(cols->size(), 0) {}

  absl::StatusOr<json> Row() {
    for (size_t c = 0; c < cols_.size(); ++c) {
      if (level_[c] >= cols_[c].def.size()) {
        return Fail(c, "fewer values than the row group has rows");
      }
      if (cols_[c].rep[level_[c]] != 0) {
        return Fail(c, "repetition level at a row start is not 0");
      }
    }
    json row = json::object();
    for (int child : s_.root().children) {
      auto v = Field(child);
      if (!v.ok()) return v.status();
      row[s_.node(child).element.name] = *std::move(v);
    }
    return row;
  }

  absl::Status Finish() {
    for (size_t c = 0; c < cols_.size(); ++c) {
      if (level_[c] != cols_[c].def.size() ||
          value_[c] != cols_[c].values.size()) {
        return Fail(c, "more values than the row group's rows use");
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fail(size_t column, absl::string_view what) const {
    return Corrupt(absl::StrCat("column ", s_.leaf(column).path, ": ", what));
  }

  absl::Status Need(int column) const {
    return level_[column] < cols_[column].def.size()
               ? absl::OkStatus()
               : Fail(column, "values end inside a record");
  }

  // A child field: an array when the node is repeated.
  absl::StatusOr<json> Field(int id) {
    const SchemaNode& n = s_.node(id);
    if (!n.repeated()) return Value(id);
    const int first = n.leaf_begin;
    if (auto st = Need(first); !st.ok()) return st;
    json arr = json::array();
    if (cols_[first].def[level_[first]] < n.def_level) {
      if (auto st = Skip(n); !st.ok()) return st;  // empty list
      return arr;
    }
    while (true) {
      auto v = Value(id);
      if (!v.ok()) return v.status();
      arr.push_back(*std::move(v));
      if (level_[first] >= cols_[first].def.size()) break;
      const int rep = cols_[first].rep[level_[first]];
      if (rep > n.rep_level) return Fail(first, "bad repetition level");
      if (rep < n.rep_level) break;
      if (cols_[first].def[level_[first]] < n.def_level) {
        return Fail(first, "an undefined element repeats");
      }
    }
    return arr;
  }

  // One instance of a node (a repeated node's element, or a single field).
  absl::StatusOr<json> Value(int id) {
    const SchemaNode& n = s_.node(id);
    const int first = n.leaf_begin;
    if (auto st = Need(first); !st.ok()) return st;
    const int def = cols_[first].def[level_[first]];
    if (def < n.def_level) {
      if (!n.optional()) return Fail(first, "null in a required field");
      if (auto st = Skip(n); !st.ok()) return st;
      return json();
    }
    if (n.is_leaf()) {
      const size_t k = value_[first]++;
      ++level_[first];
      if (k >= cols_[first].values.size()) {
        return Fail(first, "fewer values than its definition levels say");
      }
      json v = LeafValue(n.element, cols_[first].values, k);
      if (v.is_string() && !IsValidUtf8(v.get_ref<const std::string&>())) {
        return Fail(first, "a string is not valid UTF-8");
      }
      return v;
    }
    json obj = json::object();
    for (int child : n.children) {
      auto v = Field(child);
      if (!v.ok()) return v.status();
      obj[s_.node(child).element.name] = *std::move(v);
    }
    return ApplyAnnotation(n, std::move(obj));
  }

  // Applies LIST / MAP annotations to an assembled group.
  json ApplyAnnotation(const SchemaNode& n, json obj) const {
    const Logical l = n.element.logical;
    if ((l != Logical::kList && l != Logical::kMap) || n.children.size() != 1) {
      return obj;
    }
    const SchemaNode& r = s_.node(n.children[0]);
    if (!r.repeated()) return obj;
    json items = std::move(obj[r.element.name]);
    if (l == Logical::kList) {
      if (!n.list_unwraps) return items;
      const std::string& elem = s_.node(r.children[0]).element.name;
      json out = json::array();
      for (json& item : items) out.push_back(std::move(item[elem]));
      return out;
    }
    if (r.children.size() == 2) {
      const std::string& key = s_.node(r.children[0]).element.name;
      const std::string& val = s_.node(r.children[1]).element.name;
      json out = json::object();
      for (json& kv : items) {
        if (!kv[key].is_string()) return items;
        out[kv[key].get<std::string>()] = std::move(kv[val]);
      }
      return out;
    }
    return items;
  }

  // Consumes the single level entry each leaf below `n` has for a null or
  // empty instance of `n`.
  absl::Status Skip(const SchemaNode& n) {
    for (int c = n.leaf_begin; c < n.leaf_end; ++c) {
      if (auto st = Need(c); !st.ok()) return st;
      if (cols_[c].def[level_[c]] >= n.def_level) {
        return Fail(c, "nesting disagrees with its sibling columns");
      }
      ++level_[c];
    }
    return absl::OkStatus();
  }

  const Schema& s_;
  std::vector<ColumnData>& cols_;
  std::vector<size_t> level_;
  std::vector<size_t> value_;
};

}  // namespace

absl::StatusOr<ParquetReader> ParquetReader::Open(const std::string& path) {
  ParquetReader r;
  r.name_ = path;
  r.file_ = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*r.file_) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open for reading"));
  }
  r.file_->seekg(0, std::ios::end);
  r.size_ = static_cast<uint64_t>(r.file_->tellg());
  if (auto s = r.Init(); !s.ok()) return s;
  return r;
}

absl::StatusOr<ParquetReader> ParquetReader::FromBytes(std::string bytes,
                                                       std::string name) {
  ParquetReader r;
  r.name_ = std::move(name);
  r.bytes_ = std::move(bytes);
  r.size_ = r.bytes_.size();
  if (auto s = r.Init(); !s.ok()) return s;
  return r;
}

absl::StatusOr<std::string> ParquetReader::ReadAt(uint64_t offset,
                                                  uint64_t size) {
  if (offset > size_ || size > size_ - offset) {
    return Corrupt(absl::StrCat("byte range [", offset, ", ", offset + size,
                                ") is past the end of the file (", size_,
                                " bytes)"));
  }
  if (!file_) return bytes_.substr(offset, size);
  std::string out(size, '\0');
  file_->clear();
  file_->seekg(offset);
  file_->read(out.data(), size);
  if (!*file_) {
    return absl::InternalError(
        absl::StrCat("read of ", size, " bytes at ", offset, " failed"));
  }
  return out;
}

absl::Status ParquetReader::Init() {
  auto error = [&](const absl::Status& s) {
    return absl::Status(s.code(), absl::StrCat(name_, ": ", s.message()));
  };
  if (size_ < 12) {
    return error(Corrupt(absl::StrCat("not a Parquet file: ", size_,
                                      " bytes is shorter than the 12-byte "
                                      "header and footer")));
  }
  auto head = ReadAt(0, 4);
  auto tail = ReadAt(size_ - 8, 8);
  if (!head.ok()) return error(head.status());
  if (!tail.ok()) return error(tail.status());
  if (*head != kMagic || tail->substr(4) != kMagic) {
    return error(Corrupt(
        "not a Parquet file: bad magic (want PAR1 at the start and end)"));
  }
  uint32_t footer_len;
  std::memcpy(&footer_len, tail->data(), 4);
  if (footer_len > size_ - 12) {
    return error(Corrupt(absl::StrCat("footer length ", footer_len,
                                      " is larger than the file allows (",
                                      size_ - 12, " bytes); truncated?")));
  }
  data_end_ = size_ - 8 - footer_len;
  auto footer = ReadAt(data_end_, footer_len);
  if (!footer.ok()) return error(footer.status());
  auto md = ParseFileMetaData(*footer);
  if (!md.ok())
    return error(Corrupt(absl::StrCat("footer: ", md.status().message())));
  md_ = *std::move(md);
  auto schema = Schema::Build(md_.schema);
  if (!schema.ok()) return error(schema.status());
  schema_ = *std::move(schema);
  const size_t ncols = schema_.leaves().size();
  for (size_t g = 0; g < md_.row_groups.size(); ++g) {
    const RowGroup& rg = md_.row_groups[g];
    if (rg.columns.size() != ncols) {
      return error(
          Corrupt(absl::StrCat("row group ", g, " has ", rg.columns.size(),
                               " columns, the "
                               "schema has ",
                               ncols)));
    }
    for (size_t c = 0; c < ncols; ++c) {
      const SchemaNode& leaf = schema_.leaf(c);
      const ColumnChunk& cc = rg.columns[c];
      const std::string path = absl::StrJoin(cc.meta.path_in_schema, ".");
      if (path != leaf.path || cc.meta.type != *leaf.element.type) {
        return error(Corrupt(absl::StrCat(
            "row group ", g, " column ", c, " is ", path, " (",
            PhysicalTypeName(cc.meta.type), "), the schema says ", leaf.path,
            " (", PhysicalTypeName(*leaf.element.type), ")")));
      }
      if (!cc.file_path.empty()) {
        return error(
            Corrupt(absl::StrCat("column ", path, " lives in another file (",
                                 cc.file_path, "); not supported")));
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<nlohmann::json>> ParquetReader::ReadRowGroup(int g) {
  if (g < 0 || g >= num_row_groups()) {
    return absl::OutOfRangeError(absl::StrCat(
        name_, ": no row group ", g, " (file has ", num_row_groups(), ")"));
  }
  const RowGroup& rg = md_.row_groups[g];
  std::vector<ColumnData> cols;
  for (size_t c = 0; c < rg.columns.size(); ++c) {
    const ColumnMetaData& m = rg.columns[c].meta;
    const SchemaNode& leaf = schema_.leaf(c);
    auto error = [&](const absl::Status& s) {
      return absl::Status(s.code(),
                          absl::StrCat(name_, ": row group ", g, ", column ",
                                       leaf.path, ": ", s.message()));
    };
    int64_t start = m.data_page_offset;
    if (m.dictionary_page_offset && *m.dictionary_page_offset > 0 &&
        *m.dictionary_page_offset < start) {
      start = *m.dictionary_page_offset;
    }
    if (start < 4 || m.total_compressed_size < 0 ||
        static_cast<uint64_t>(start) > data_end_ ||
        static_cast<uint64_t>(m.total_compressed_size) > data_end_ - start) {
      return error(Corrupt(
          absl::StrCat("column chunk [", start, ", +", m.total_compressed_size,
                       ") lies outside the data region [4, ", data_end_, ")")));
    }
    auto bytes = ReadAt(start, m.total_compressed_size);
    if (!bytes.ok()) return error(bytes.status());
    auto data = ReadColumnChunk(*bytes, m, leaf.def_level, leaf.rep_level,
                                leaf.element.type_length);
    if (!data.ok()) return error(data.status());
    cols.push_back(*std::move(data));
  }
  auto error = [&](const absl::Status& s) {
    return absl::Status(
        s.code(), absl::StrCat(name_, ": row group ", g, ": ", s.message()));
  };
  if (rg.num_rows < 0 ||
      static_cast<uint64_t>(rg.num_rows) > cols.front().def.size()) {
    return error(
        Corrupt(absl::StrCat("num_rows ", rg.num_rows, " exceeds the column's ",
                             cols.front().def.size(), " values")));
  }
  Assembler a(schema_, &cols);
  std::vector<nlohmann::json> rows;
  rows.reserve(rg.num_rows);
  for (int64_t r = 0; r < rg.num_rows; ++r) {
    auto row = a.Row();
    if (!row.ok()) return error(row.status());
    rows.push_back(*std::move(row));
  }
  if (auto s = a.Finish(); !s.ok()) return error(s);
  return rows;
}

absl::StatusOr<std::vector<nlohmann::json>> ParquetReader::ReadAll() {
  std::vector<nlohmann::json> all;
  for (int g = 0; g < num_row_groups(); ++g) {
    auto rows = ReadRowGroup(g);
    if (!rows.ok()) return rows.status();
    for (auto& r : *rows) all.push_back(std::move(r));
  }
  return all;
}

absl::Status ForEachParquetRow(
    const std::string& path,
    const std::function<absl::Status(nlohmann::json&&)>& fn) {
  auto reader = ParquetReader::Open(path);
  if (!reader.ok()) return reader.status();
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    auto rows = reader->ReadRowGroup(g);
    if (!rows.ok()) return rows.status();
    for (auto& r : *rows) {
      if (auto s = fn(std::move(r)); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<nlohmann::json>> ReadParquetRows(
    const std::string& path) {
  auto reader = ParquetReader::Open(path);
  if (!reader.ok()) return reader.status();
  return reader->ReadAll();
}

}  // namespace verl::rl::parquet
