// Reader behaviours the fixtures do not reach: the legacy 2-level LIST
// forms (a repeated group named "array" or "<name>_tuple" is the element
// itself) and row-group streaming bounds.
#include "verl/rl/data/parquet/parquet_reader.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/rl/data/parquet/parquet_test_util.h"
#include "verl/rl/data/parquet/parquet_writer.h"

namespace verl::rl::parquet {
namespace {

using nlohmann::json;

ThriftValue& Field(ThriftValue& v, int16_t id) {
  for (auto& [fid, f] : v.fields) {
    if (fid == id) return f;
  }
  ADD_FAILURE() << "no field " << id;
  return v;
}

// Renames the repeated group of list column `l` (schema element 2) and the
// matching path_in_schema entries.
std::string RenameListGroup(const std::string& file, const std::string& name) {
  return testing::RewriteFooter(file, [&](ThriftValue& footer) {
    Field(Field(footer, 2).items[2], 4).bin = name;
    for (ThriftValue& rg : Field(footer, 4).items) {
      ThriftValue& meta = Field(Field(rg, 1).items[0], 3);
      Field(meta, 3).items[1].bin = name;
    }
  });
}

TEST(ParquetReaderTest, LegacyTwoLevelListsKeepTheRepeatedGroup) {
  const std::vector<json> rows = {
      json{{"l", {1, 2}}}, json{{"l", json::array()}}, json{{"l", nullptr}}};
  auto file = SerializeParquet(rows, {Codec::kUncompressed, false});
  ASSERT_TRUE(file.ok()) << file.status();
  const json three_level = json::array(
      {json{{"l", {1, 2}}}, json{{"l", json::array()}}, json{{"l", nullptr}}});
  const json legacy =
      json::array({json{{"l", {{{"element", 1}}, {{"element", 2}}}}},
                   json{{"l", json::array()}}, json{{"l", nullptr}}});
  for (const auto& [group, want] :
       {std::make_pair("list", three_level), std::make_pair("bag", three_level),
        std::make_pair("array", legacy), std::make_pair("l_tuple", legacy)}) {
    auto r = ParquetReader::FromBytes(RenameListGroup(*file, group));
    ASSERT_TRUE(r.ok()) << r.status();
    auto got = r->ReadAll();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(json(*got), want) << group;
  }
}

TEST(ParquetReaderTest, Utf8IsCheckedStrictly) {
  const std::vector<std::pair<std::string, bool>> cases = {
      {"plain ascii", true},
      {"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80", true},  // é ✓ 😀
      {"\xc3", false},                                      // truncated
      {"\xc0\xaf", false},                                  // overlong /
      {"\xed\xa0\x80", false},                              // surrogate
      {"\xf4\x90\x80\x80", false},                          // > U+10FFFF
      {"\xff", false}};
  for (const auto& [text, valid] : cases) {
    auto file =
        SerializeParquet({json{{"s", text}}}, {Codec::kUncompressed, false});
    ASSERT_TRUE(file.ok());
    auto r = ParquetReader::FromBytes(*file);
    ASSERT_TRUE(r.ok());
    auto rows = r->ReadAll();
    EXPECT_EQ(rows.ok(), valid) << text;
    if (valid && rows.ok()) {
      EXPECT_EQ((*rows)[0]["s"], text);
    }
  }
}

TEST(ParquetReaderTest, RowGroupsReadOneAtATime) {
  std::vector<json> rows;
  for (int i = 0; i < 10; ++i) rows.push_back({{"i", i}});
  auto file = SerializeParquet(rows, {Codec::kSnappy, true, 4});
  ASSERT_TRUE(file.ok());
  auto r = ParquetReader::FromBytes(*file, "x.parquet");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->num_row_groups(), 3);
  auto last = r->ReadRowGroup(2);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(*last, (std::vector<json>{{{"i", 8}}, {{"i", 9}}}));
  auto past = r->ReadRowGroup(3);
  EXPECT_EQ(past.status().message(), "x.parquet: no row group 3 (file has 3)");
}

}  // namespace
}  // namespace verl::rl::parquet
