// Dataset files by extension: the same rows written as .parquet and .jsonl
// read back equal; a JSONL row that is not an object and a corrupt .parquet
// fail naming the file.
#include "verl/rl/data/parquet/dataset_file.h"

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::rl::parquet {
namespace {

using ::verl::core::testing::StatusIs;

using nlohmann::json;

TEST(DatasetFileTest, ParquetAndJsonlRoundTripTheSameRows) {
  const std::string dir = core::testing::FreshTestDir("dataset_file");
  ASSERT_TRUE(core::MakeDirs(dir).ok());
  std::vector<json> rows;
  for (int i = 0; i < 5; ++i) {
    rows.push_back(
        {{"data_source", "openai/gsm8k"},
         {"prompt", {{{"role", "user"}, {"content", "q" + std::to_string(i)}}}},
         {"reward_model",
          {{"style", "rule"}, {"ground_truth", std::to_string(i)}}},
         {"extra_info", {{"index", i}, {"split", "train"}}}});
  }
  for (const char* name : {"/d.parquet", "/d.jsonl"}) {
    ASSERT_TRUE(WriteDatasetFile(dir + name, rows).ok());
    auto back = ReadDatasetFile(dir + name);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, rows) << name;
  }
  auto head = core::ReadFile(dir + "/d.parquet");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->substr(0, 4), "PAR1");
  EXPECT_TRUE(IsParquetPath("a/b.parquet"));
  EXPECT_FALSE(IsParquetPath("a/b.parquet.jsonl"));
}

TEST(DatasetFileTest, CorruptParquetNamesTheFile) {
  const std::string dir = core::testing::FreshTestDir("dataset_file_bad");
  ASSERT_TRUE(core::MakeDirs(dir).ok());
  ASSERT_TRUE(
      core::WriteFileAtomic(dir + "/x.parquet", "PAR1 not really").ok());
  auto r = ReadDatasetFile(dir + "/x.parquet");
  ASSERT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                          "not a Parquet file: bad magic"));
  EXPECT_EQ(r.status().message().rfind(dir + "/x.parquet: ", 0), 0u)
      << r.status();
}

}  // namespace
}  // namespace verl::rl::parquet
