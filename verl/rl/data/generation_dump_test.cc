#include "verl/rl/data/generation_dump.h"

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using ::verl::core::testing::StatusIs;

GenerationRecords TwoRecords() {
  GenerationRecords r;
  r.inputs = {"1+1=?", "2+2=?"};
  r.outputs = {"#### 2", "#### 5"};
  r.gts = {"2", "4"};
  r.scores = {1.0, 0.0};
  r.extra["acc"] = {true, false};
  r.extra["ignored"] = {1};  // wrong length: skipped as verl does
  return r;
}

TEST(GenerationDumpTest, LinesHaveVerlFields) {
  auto lines = GenerationLines(TwoRecords(), 7);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[1],
            nlohmann::json::parse(R"({"input":"2+2=?","output":"#### 5",
              "gts":"4","score":0.0,"step":7,"acc":false})"));
  EXPECT_FALSE((*lines)[0].contains("ignored"));
}

TEST(GenerationDumpTest, MismatchedColumnsAreAnError) {
  GenerationRecords r = TwoRecords();
  r.scores.pop_back();
  auto lines = GenerationLines(r, 1);
  ASSERT_THAT(
      lines,
      StatusIs(absl::StatusCode::kInvalidArgument,
               "generation dump: 2 inputs but 2 outputs, 2 gts, 1 scores"));
  EXPECT_NE(lines.status().message().find("1 scores"), std::string::npos);
}

TEST(GenerationDumpTest, AppendConcatenatesColumns) {
  GenerationRecords all;
  AppendRecords(TwoRecords(), &all);
  AppendRecords(TwoRecords(), &all);
  auto lines = GenerationLines(all, 2);
  ASSERT_TRUE(lines.ok()) << lines.status();
  ASSERT_EQ(lines->size(), 4u);
  EXPECT_EQ((*lines)[3]["acc"], false);
  EXPECT_EQ((*lines)[2]["input"], "1+1=?");
}

TEST(GenerationDumpTest, WritesStepFile) {
  const std::string dir =
      std::string(std::getenv("TEST_TMPDIR")) + "/dumps/rollout";
  ASSERT_TRUE(DumpGenerations(dir, 3, TwoRecords()).ok());
  auto rows = core::ReadJsonl(dir + "/3.jsonl");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0]["output"], "#### 2");
  EXPECT_EQ((*rows)[0]["step"], 3);
}

}  // namespace
}  // namespace verl::rl
