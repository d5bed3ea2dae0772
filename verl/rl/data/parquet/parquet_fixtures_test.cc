// Reads Parquet files written by two independent writers (hyparquet-writer
// and parquet-wasm's arrow-rs; testdata/make_fixtures.mjs) and compares every
// row with the JSON the writers were given: snappy, zstd, gzip, brotli and
// uncompressed; data pages v1 and v2; dictionary, plain and DELTA encodings;
// several row groups; verl's nested row schema with nulls.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_test_util.h"

namespace verl::rl::parquet {
namespace {

using testing::HexBinary;
using testing::Testdata;

void ExpectRows(const std::string& file, const std::string& rows_json,
                int min_row_groups) {
  auto want = core::ReadJsonFile(Testdata(rows_json));
  ASSERT_TRUE(want.ok()) << want.status();
  auto reader = ParquetReader::Open(Testdata(file));
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_GE(reader->num_row_groups(), min_row_groups) << file;
  EXPECT_EQ(reader->num_rows(), static_cast<int64_t>(want->size()));
  size_t row = 0;
  for (int g = 0; g < reader->num_row_groups(); ++g) {
    auto rows = reader->ReadRowGroup(g);
    ASSERT_TRUE(rows.ok()) << rows.status();
    for (const nlohmann::json& r : *rows) {
      ASSERT_LT(row, want->size());
      EXPECT_EQ(HexBinary(r), (*want)[row])
          << file << " row " << row << "\n got: " << HexBinary(r).dump()
          << "\nwant: " << (*want)[row].dump();
      ++row;
    }
  }
  EXPECT_EQ(row, want->size()) << file;
}

class VerlRowsTest
    : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(VerlRowsTest, EveryRowMatchesTheWritersInput) {
  ExpectRows(GetParam().first, "rows.json", GetParam().second);
}

INSTANTIATE_TEST_SUITE_P(
    IndependentWriters, VerlRowsTest,
    ::testing::Values(std::make_pair("hyparquet_snappy.parquet", 3),
                      std::make_pair("hyparquet_uncompressed.parquet", 3),
                      std::make_pair("arrow_zstd_dict.parquet", 4),
                      std::make_pair("arrow_gzip_plain.parquet", 3),
                      std::make_pair("arrow_brotli_v2.parquet", 1),
                      std::make_pair("arrow_snappy_v2_plain.parquet", 1),
                      std::make_pair("arrow_uncompressed_delta.parquet", 3)));

TEST(ParquetFixturesTest, DeltaEncodedFlatColumns) {
  ExpectRows("hyparquet_delta.parquet", "delta_rows.json", 2);
}

// MAP (string keys -> object), lists of lists with nulls and empties,
// REQUIRED columns and UINT_32 values above 2^31.
TEST(ParquetFixturesTest, MapsNestedListsRequiredAndUnsigned) {
  ExpectRows("hyparquet_map_nested.parquet", "map_rows.json", 2);
}

TEST(ParquetFixturesTest, FooterAndCodecsAreWhatTheWritersSaid) {
  const std::vector<std::pair<const char*, Codec>> files = {
      {"hyparquet_snappy.parquet", Codec::kSnappy},
      {"arrow_zstd_dict.parquet", Codec::kZstd},
      {"arrow_gzip_plain.parquet", Codec::kGzip},
      {"arrow_brotli_v2.parquet", Codec::kBrotli},
      {"hyparquet_uncompressed.parquet", Codec::kUncompressed}};
  for (const auto& [file, codec] : files) {
    auto r = ParquetReader::Open(Testdata(file));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->metadata().row_groups[0].columns[0].meta.codec, codec) << file;
    // data_source, prompt.role, prompt.content, ability, reward_model x2,
    // extra_info x5, images x2.
    EXPECT_EQ(r->schema().leaves().size(), 13u) << file;
    EXPECT_EQ(r->schema().leaf(1).path, "prompt.list.element.role");
    EXPECT_EQ(r->schema().leaf(1).def_level, 4);
    EXPECT_EQ(r->schema().leaf(1).rep_level, 1);
  }
}

TEST(ParquetFixturesTest, StreamsRowsAcrossRowGroups) {
  int n = 0;
  auto s = ForEachParquetRow(Testdata("arrow_zstd_dict.parquet"),
                             [&](nlohmann::json&& row) {
                               EXPECT_TRUE(row["prompt"].is_array());
                               ++n;
                               return absl::OkStatus();
                             });
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(n, 13);
  auto all = ReadParquetRows(Testdata("hyparquet_snappy.parquet"));
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 13u);
  EXPECT_EQ((*all)[1]["prompt"][0]["role"], "system");
}

}  // namespace
}  // namespace verl::rl::parquet
