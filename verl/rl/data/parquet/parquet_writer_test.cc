// The project's Parquet writer: its files read back (by the project's reader
// and, when node is installed, by hyparquet and parquet-wasm/arrow-rs) to the
// rows that were written, under every codec, with and without dictionaries,
// in several row groups and pages; its schema is pyarrow's for verl rows.
#include "verl/rl/data/parquet/parquet_writer.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_test_util.h"

namespace verl::rl::parquet {
namespace {

using ::verl::core::testing::StatusIs;

using nlohmann::json;
using testing::HexBinary;
using testing::Testdata;
using testing::UnhexBinary;

std::vector<json> VerlRows() {
  auto rows = core::ReadJsonFile(Testdata("rows.json"));
  EXPECT_TRUE(rows.ok()) << rows.status();
  std::vector<json> out;
  for (const json& r : *rows) out.push_back(UnhexBinary(r));
  return out;
}

std::vector<json> ReadBack(const std::string& bytes) {
  auto reader = ParquetReader::FromBytes(bytes, "written");
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return {};
  auto rows = reader->ReadAll();
  EXPECT_TRUE(rows.ok()) << rows.status();
  return rows.ok() ? *rows : std::vector<json>{};
}

TEST(ParquetWriterTest, RoundTripsVerlRowsUnderEveryOption) {
  const std::vector<json> rows = VerlRows();
  for (Codec codec :
       {Codec::kUncompressed, Codec::kSnappy, Codec::kGzip, Codec::kZstd}) {
    for (bool dict : {true, false}) {
      for (int64_t group : {int64_t{3}, int64_t{10000}}) {
        for (int64_t page : {int64_t{64}, int64_t{1} << 20}) {
          ParquetWriteOptions opt{codec, dict, group, page};
          auto bytes = SerializeParquet(rows, opt);
          ASSERT_TRUE(bytes.ok()) << bytes.status();
          const std::vector<json> back = ReadBack(*bytes);
          ASSERT_EQ(back.size(), rows.size());
          for (size_t r = 0; r < rows.size(); ++r) {
            EXPECT_EQ(back[r], rows[r])
                << CodecName(codec) << " dict=" << dict << " group=" << group
                << " page=" << page << " row " << r << "\n got "
                << HexBinary(back[r]).dump();
          }
        }
      }
    }
  }
}

TEST(ParquetWriterTest, SchemaIsPyarrowsForVerlRows) {
  auto bytes = SerializeParquet(VerlRows(), {Codec::kSnappy, true, 5});
  ASSERT_TRUE(bytes.ok());
  auto r = ParquetReader::FromBytes(*bytes);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->num_row_groups(), 3);
  std::vector<std::string> paths;
  for (int c = 0; c < static_cast<int>(r->schema().leaves().size()); ++c) {
    paths.push_back(r->schema().leaf(c).path);
  }
  // nlohmann::json objects are sorted, so columns come in key order.
  EXPECT_EQ(paths,
            (std::vector<std::string>{
                "ability", "data_source", "extra_info.answer",
                "extra_info.index", "extra_info.need_tools_kwargs",
                "extra_info.score", "extra_info.split",
                "images.list.element.bytes", "images.list.element.path",
                "prompt.list.element.content", "prompt.list.element.role",
                "reward_model.ground_truth", "reward_model.style"}));
  const Schema& s = r->schema();
  EXPECT_EQ(s.leaf(10).def_level, 4);
  EXPECT_EQ(s.leaf(10).rep_level, 1);
  EXPECT_EQ(*s.leaf(3).element.type, PhysicalType::kInt64);
  EXPECT_EQ(*s.leaf(5).element.type, PhysicalType::kDouble);
  EXPECT_EQ(*s.leaf(4).element.type, PhysicalType::kBoolean);
  EXPECT_EQ(s.leaf(7).element.logical, Logical::kNone);  // binary
  EXPECT_EQ(s.leaf(8).element.logical, Logical::kString);
  const ColumnMetaData& ds = r->metadata().row_groups[0].columns[0].meta;
  EXPECT_TRUE(ds.dictionary_page_offset.has_value());
}

TEST(ParquetWriterTest, ManyPagesAndRowGroups) {
  std::vector<json> rows;
  for (int i = 0; i < 3000; ++i) {
    rows.push_back({{"id", i},
                    {"text", std::string(i % 97, 'a' + i % 26)},
                    {"tags", i % 7 ? json::array({i, i + 1}) : json::array()},
                    {"nested",
                     {{"x", i % 5 ? json(i * 0.5) : json()},
                      {"deep", json::array({json::array({i})})}}}});
  }
  auto bytes = SerializeParquet(rows, {Codec::kZstd, true, 1024, 4096});
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  auto back = ReadBack(*bytes);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t r = 0; r < rows.size(); ++r) ASSERT_EQ(back[r], rows[r]) << r;
}

TEST(ParquetWriterTest, BadRowsNameRowAndColumn) {
  auto mixed = SerializeParquet({json{{"extra_info", {{"index", 1}}}},
                                 json{{"extra_info", {{"index", "one"}}}}});
  ASSERT_THAT(
      mixed, StatusIs(absl::StatusCode::kInvalidArgument,
                      "row 1: column extra_info.index holds both integer and"));
  EXPECT_EQ(mixed.status().message(),
            "row 1: column extra_info.index holds both integer and string "
            "values");
  auto not_object = SerializeParquet({json::array({1})});
  EXPECT_EQ(not_object.status().message(), "row 0 is not a JSON object");
  auto empty = SerializeParquet({json{{"a", 1}, {"kw", json::object()}}});
  EXPECT_NE(empty.status().message().find("kw is always an empty object"),
            std::string::npos);
}

// Independent readers: hyparquet (JavaScript) rows, parquet-wasm (arrow-rs)
// row count.
TEST(ParquetWriterTest, IndependentReadersReadTheWritersFiles) {
  const std::string script = Testdata("read_with_hyparquet.mjs");
  if (access("/usr/local/lib/node_modules/hyparquet", F_OK) != 0 ||
      core::testing::RunAndCapture("node --version").empty()) {
    GTEST_SKIP() << "node or the hyparquet npm package is missing "
                    "(tools/setup.sh installs them); independent read-back "
                    "skipped";
  }
  const std::string dir = core::testing::FreshTestDir("parquet_writer");
  ASSERT_TRUE(core::MakeDirs(dir).ok());
  const std::vector<json> rows = VerlRows();
  for (auto [codec, dict] : {std::make_pair(Codec::kSnappy, true),
                             std::make_pair(Codec::kUncompressed, false)}) {
    const std::string path = dir + "/rows.parquet";
    ASSERT_TRUE(WriteParquetFile(path, rows, {codec, dict, 4, 256}).ok());
    int rc = 0;
    const std::string out =
        core::testing::RunAndCapture("node " + script + " " + path, &rc);
    ASSERT_EQ(rc, 0) << out;
    const json got = json::parse(out);
    EXPECT_EQ(got["arrow_rows"], rows.size());
    ASSERT_EQ(got["rows"].size(), rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      EXPECT_EQ(got["rows"][r], HexBinary(rows[r])) << CodecName(codec) << r;
    }
  }
}

}  // namespace
}  // namespace verl::rl::parquet
