#include "verl/rl/data/parquet/parquet_test_util.h"

#include <cstring>
#include <functional>

#include "gtest/gtest.h"
#include "verl/rl/data/parquet/parquet_writer.h"
#include "verl/rl/data/parquet/thrift_compact.h"

namespace verl::rl::parquet::testing {

std::string Testdata(const std::string& name) {
  return "verl/rl/data/parquet/testdata/" + name;
}

nlohmann::json HexBinary(const nlohmann::json& j) {
  if (j.is_binary()) {
    static const char kHex[] = "0123456789abcdef";
    std::string s = "hex:";
    for (uint8_t b : j.get_binary()) {
      s += kHex[b >> 4];
      s += kHex[b & 15];
    }
    return s;
  }
  if (j.is_array() || j.is_object()) {
    nlohmann::json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = HexBinary(*it);
    return out;
  }
  return j;
}

nlohmann::json UnhexBinary(const nlohmann::json& j) {
  if (j.is_string() && j.get_ref<const std::string&>().rfind("hex:", 0) == 0) {
    const std::string& s = j.get_ref<const std::string&>();
    std::vector<uint8_t> b;
    for (size_t i = 4; i + 1 < s.size(); i += 2) {
      b.push_back(std::stoi(s.substr(i, 2), nullptr, 16));
    }
    return nlohmann::json::binary(std::move(b));
  }
  if (j.is_array() || j.is_object()) {
    nlohmann::json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = UnhexBinary(*it);
    return out;
  }
  return j;
}

}  // namespace verl::rl::parquet::testing

namespace verl::rl::parquet::testing {
namespace {

using T = ThriftType;

// Mutable field `id` of a struct (must exist).
ThriftValue& F(ThriftValue& v, int16_t id) {
  for (auto& [fid, f] : v.fields) {
    if (fid == id) return f;
  }
  static ThriftValue missing;
  ADD_FAILURE() << "no field " << id;
  return missing;
}

struct Parts {
  std::string data;  // magic + column chunks
  ThriftValue footer;
};

Parts Split(const std::string& file) {
  uint32_t n;
  std::memcpy(&n, file.data() + file.size() - 8, 4);
  Parts p;
  p.data = file.substr(0, file.size() - 8 - n);
  auto v = DecodeThriftStruct(file.substr(file.size() - 8 - n, n));
  EXPECT_TRUE(v.ok()) << v.status();
  p.footer = *v;
  return p;
}

std::string Join(const std::string& data, const std::string& footer) {
  const uint32_t n = footer.size();
  return data + footer + std::string(reinterpret_cast<const char*>(&n), 4) +
         "PAR1";
}

// Column c's ColumnMetaData in row group g.
ThriftValue& Meta(ThriftValue& footer, int g, int c) {
  return F(F(footer, 4).items[g], 1).items[c].fields[1].second;
}

// Replaces the page header at `offset` by `edit(header)` re-encoded.
std::string EditPage(const std::string& file, int64_t offset,
                     const std::function<void(ThriftValue&)>& edit) {
  size_t used = 0;
  auto h = DecodeThriftStruct(absl::string_view(file).substr(offset), &used);
  EXPECT_TRUE(h.ok()) << h.status();
  edit(*h);
  return file.substr(0, offset) + EncodeThriftStruct(*h) +
         file.substr(offset + used);
}

int64_t Offset(const std::string& file, int g, int c, int16_t which) {
  Parts p = Split(file);
  return F(Meta(p.footer, g, c), which).i;
}

}  // namespace

std::string RewriteFooter(const std::string& file,
                          const std::function<void(ThriftValue&)>& edit) {
  Parts p = Split(file);
  edit(p.footer);
  return Join(p.data, EncodeThriftStruct(p.footer));
}

std::string SmallParquetFile() {
  std::vector<nlohmann::json> rows;
  for (int i = 0; i < 6; ++i) {
    rows.push_back(
        {{"q", i % 2 ? "odd" : "even"},
         {"n", i * 3},
         {"m", {{{"role", "user"}, {"content", std::to_string(i)}}}}});
  }
  auto bytes = SerializeParquet(rows, {Codec::kSnappy, true, 3});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return *bytes;
}

std::vector<MalformedCase> MalformedCases() {
  const std::string good = SmallParquetFile();
  std::vector<MalformedCase> cases;
  auto add = [&](std::string name, std::string bytes, std::string want,
                 std::string column = "") {
    cases.push_back({std::move(name), std::move(bytes), std::move(want),
                     std::move(column)});
  };
  // Footer-level damage. Leaves (keys sorted): 0 m.list.element.content,
  // 1 m.list.element.role, 2 n, 3 q.
  add("empty file", "", "not a Parquet file");
  add("bad leading magic", "XAR1" + good.substr(4), "bad magic");
  add("bad trailing magic", good.substr(0, good.size() - 1) + "X", "bad magic");
  add("truncated footer", good.substr(0, 4) + good.substr(good.size() - 30),
      "footer");
  add("footer length past the start",
      good.substr(0, good.size() - 8) + std::string("\xff\xff\x00\x00", 4) +
          "PAR1",
      "footer length 65535 is larger than the file allows");
  {
    Parts p = Split(good);
    F(p.footer, 3) = ThriftValue::Binary("six");  // num_rows as binary
    add("thrift field of the wrong type",
        Join(p.data, EncodeThriftStruct(p.footer)),
        "FileMetaData: field num_rows (3) has wire type binary, expected i64");
  }
  {
    Parts p = Split(good);
    F(p.footer, 2).items[0].fields.clear();  // root without a name
    add("schema element without name",
        Join(p.data, EncodeThriftStruct(p.footer)),
        "SchemaElement[0]: required field name (4) is missing");
  }
  {
    Parts p = Split(good);
    F(F(p.footer, 2).items[0], 5).i = 9;  // root claims 9 children
    add("num_children past the schema",
        Join(p.data, EncodeThriftStruct(p.footer)), "children, only");
  }
  {
    Parts p = Split(good);
    // q's chunk ends one byte after its first page header.
    size_t used = 0;
    EXPECT_TRUE(
        DecodeThriftStruct(
            absl::string_view(good).substr(Offset(good, 0, 3, 11)), &used)
            .ok());
    F(Meta(p.footer, 0, 3), 7).i = used + 1;
    add("page size past the end of the chunk",
        Join(p.data, EncodeThriftStruct(p.footer)),
        "runs past the end of the column chunk", "q");
  }
  {
    Parts p = Split(good);
    F(Meta(p.footer, 1, 2), 9).i = 1 << 30;  // n's data page past the file
    F(Meta(p.footer, 1, 2), 11).i = 1 << 30;
    add("column chunk outside the file",
        Join(p.data, EncodeThriftStruct(p.footer)),
        "lies outside the data region", "n");
  }
  {
    Parts p = Split(good);
    F(Meta(p.footer, 0, 2), 4).i = 5;  // LZ4
    add("unsupported codec", Join(p.data, EncodeThriftStruct(p.footer)),
        "codec LZ4 is not supported", "n");
  }
  {
    Parts p = Split(good);
    F(F(p.footer, 4).items[0], 3).i = 40;  // row group claims 40 rows
    add("row count beyond the columns",
        Join(p.data, EncodeThriftStruct(p.footer)), "num_rows 40 exceeds");
  }
  {
    // A STRING column holding bytes that are not UTF-8 (pyarrow's to_pylist
    // fails on them too; JSON strings cannot hold them).
    auto bytes =
        SerializeParquet({nlohmann::json{{"s", std::string("caf\xc3")}},
                          nlohmann::json{{"s", "ok"}}},
                         {Codec::kUncompressed, false});
    EXPECT_TRUE(bytes.ok());
    add("invalid UTF-8 in a STRING column", *bytes,
        "a string is not valid UTF-8", "s");
  }
  // Page-level damage.
  add("dictionary index out of range",
      EditPage(good, Offset(good, 0, 3, 11),
               [](ThriftValue& h) { F(F(h, 7), 1).i = 1; }),
      "dictionary index 1 out of range (dictionary has 1 entries)", "q");
  add("page header field of the wrong type",
      EditPage(good, Offset(good, 0, 2, 9),
               [](ThriftValue& h) { F(h, 2) = ThriftValue::Binary("x"); }),
      "PageHeader: field uncompressed_page_size (2) has wire type binary", "n");
  add("page header with unknown page type",
      EditPage(good, Offset(good, 0, 2, 9),
               [](ThriftValue& h) { F(h, 1).i = 7; }),
      "type = 7 is not a known value", "n");
  add("data page with an unknown encoding",
      EditPage(good, Offset(good, 0, 2, 9),
               [](ThriftValue& h) { F(F(h, 5), 2).i = 1; }),
      "encoding GROUP_VAR_INT (1) is not supported", "n");
  add("uncompressed size that disagrees with snappy",
      EditPage(good, Offset(good, 0, 2, 9),
               [](ThriftValue& h) { F(h, 2).i += 1; }),
      "SNAPPY page decompressed to", "n");
  {
    std::string bytes = good;
    const int64_t at = Offset(good, 0, 2, 9);
    size_t used = 0;
    EXPECT_TRUE(
        DecodeThriftStruct(absl::string_view(good).substr(at), &used).ok());
    for (size_t k = at + used; k < at + used + 4; ++k) bytes[k] = '\xff';
    add("corrupt snappy data", bytes, "SNAPPY page", "n");
  }
  return cases;
}

}  // namespace verl::rl::parquet::testing
