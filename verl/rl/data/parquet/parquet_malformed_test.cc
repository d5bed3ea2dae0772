// Malformed Parquet files (table in parquet_test_util.cc): each fails with
// one error line naming the file and, for data errors, the row group and
// column, never a crash. Run once under --config=asan as well.
#include <string>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_test_util.h"

namespace verl::rl::parquet {
namespace {

using ::verl::core::testing::StatusIs;

TEST(ParquetMalformedTest, SmallFileIsValid) {
  auto r =
      ParquetReader::FromBytes(testing::SmallParquetFile(), "good.parquet");
  ASSERT_TRUE(r.ok()) << r.status();
  auto rows = r->ReadAll();
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 6u);
  EXPECT_EQ((*rows)[5]["m"][0]["content"], "5");
}

TEST(ParquetMalformedTest, EachCaseFailsWithOneClearLine) {
  const auto cases = testing::MalformedCases();
  ASSERT_GE(cases.size(), 15u);
  for (const testing::MalformedCase& c : cases) {
    absl::Status s;
    auto r = ParquetReader::FromBytes(c.bytes, "bad.parquet");
    if (!r.ok()) {
      s = r.status();
    } else {
      s = r->ReadAll().status();
    }
    // The code differs between cases; each case's message is checked below.
    ASSERT_FALSE(s.ok()) << c.name;
    const std::string msg(s.message());
    EXPECT_EQ(msg.rfind("bad.parquet: ", 0), 0u) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.want), std::string::npos) << c.name << ": " << msg;
    if (!c.column.empty()) {
      EXPECT_NE(msg.find("column " + c.column + ":"), std::string::npos)
          << c.name << ": " << msg;
    }
    EXPECT_EQ(msg.find('\n'), std::string::npos) << c.name << ": " << msg;
  }
}

TEST(ParquetMalformedTest, MissingFileNamesThePath) {
  auto r = ParquetReader::Open("/nonexistent/train.parquet");
  ASSERT_THAT(r,
              StatusIs(absl::StatusCode::kNotFound,
                       "/nonexistent/train.parquet: cannot open for reading"));
  EXPECT_EQ(r.status().message(),
            "/nonexistent/train.parquet: cannot open for reading");
}

}  // namespace
}  // namespace verl::rl::parquet
