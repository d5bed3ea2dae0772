// File: verl/rl/data/preprocess_test.cc
//
// Rows as verl's gsm8k.py / math_dataset.py write them (expected values
// follow those scripts line by line), and the records they stop on.
#include "verl/rl/data/preprocess.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::rl {
namespace {

using core::testing::StatusIs;
using nlohmann::json;
constexpr absl::StatusCode kInvalid = absl::StatusCode::kInvalidArgument;

TEST(PreprocessTest, Gsm8kRowMatchesVerl) {
  json rec = {{"question", "Natalia sold 48 clips. How many?"},
              {"answer", "She sold 48+24 = 72 clips.\n#### 1,072"}};
  auto row = ConvertGsm8kRecord(rec, "train", 3);
  ASSERT_TRUE(row.ok()) << row.status();
  const json expected = {
      {"data_source", "openai/gsm8k"},
      {"prompt",
       {{{"role", "user"},
         {"content",
          "Natalia sold 48 clips. How many? Let's think step by step and "
          "output the final answer after \"####\"."}}}},
      {"ability", "math"},
      {"reward_model", {{"style", "rule"}, {"ground_truth", "1072"}}},
      {"extra_info",
       {{"split", "train"},
        {"index", 3},
        {"answer", rec["answer"]},
        {"question", rec["question"]}}}};
  EXPECT_EQ(*row, expected);

  auto neg = ConvertGsm8kRecord({{"question", "q"}, {"answer", "x\n#### -3.5"}},
                                "test", 0);
  ASSERT_TRUE(neg.ok());
  EXPECT_EQ((*neg)["reward_model"]["ground_truth"], "-3.5");
}

TEST(PreprocessTest, Gsm8kBadRecords) {
  EXPECT_THAT(
      ConvertGsm8kRecord({{"answer", "#### 1"}}, "train", 0),
      StatusIs(kInvalid, "record 0: missing string field \"question\""));
  EXPECT_THAT(
      ConvertGsm8kRecord({{"question", "q"}, {"answer", "42"}}, "train", 5),
      StatusIs(kInvalid, "record 5: answer has no \"#### <number>\""));
  EXPECT_THAT(
      ConvertGsm8kRecord({{"question", "q"}, {"answer", "#### -"}}, "train", 6),
      StatusIs(kInvalid, "record 6"));
  EXPECT_THAT(ConvertGsm8kRecord(json::array(), "train", 7),
              StatusIs(kInvalid, "record 7: not a JSON object"));
}

TEST(PreprocessTest, MathRowMatchesVerl) {
  json rec = {{"problem", "What is $\\frac{1}{2}+\\frac{1}{2}$?"},
              {"level", "Level 1"},
              {"type", "Algebra"},
              {"solution",
               "We have \\boxed{2} first, then $\\frac12+\\frac12 = "
               "\\boxed{\\frac{2}{2}}$."}};
  auto row = ConvertMathRecord(rec, "test", 11);
  ASSERT_TRUE(row.ok()) << row.status();
  const json expected = {
      {"level", "Level 1"},
      {"type", "Algebra"},
      {"data_source", "DigitalLearningGmbH/MATH-lighteval"},
      {"prompt",
       {{{"role", "user"},
         {"content",
          "What is $\\frac{1}{2}+\\frac{1}{2}$? Let's think step by step and "
          "output the final answer within \\boxed{}."}}}},
      {"ability", "math"},
      // The last boxed answer, nested braces kept.
      {"reward_model", {{"style", "rule"}, {"ground_truth", "\\frac{2}{2}"}}},
      {"extra_info", {{"split", "test"}, {"index", 11}}}};
  EXPECT_EQ(*row, expected);
  // "\boxed 5" (space form) as verl's remove_boxed.
  auto spaced = ConvertMathRecord(
      {{"problem", "p"}, {"solution", "so \\boxed 5"}}, "train", 0);
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  EXPECT_EQ((*spaced)["reward_model"]["ground_truth"], "5");
}

TEST(PreprocessTest, MathBadRecords) {
  EXPECT_THAT(
      ConvertMathRecord({{"problem", "p"}}, "train", 2),
      StatusIs(kInvalid, "record 2: missing string field \"solution\""));
  EXPECT_THAT(
      ConvertMathRecord({{"problem", "p"}, {"solution", "no box"}}, "train", 4),
      StatusIs(kInvalid, "record 4: solution has no final \\boxed{...}"));
  // \fbox is found by last_boxed_only_string but verl's remove_boxed asserts.
  EXPECT_THAT(ConvertMathRecord({{"problem", "p"}, {"solution", "\\fbox{3}"}},
                                "train", 8),
              StatusIs(kInvalid, "record 8"));
}

}  // namespace
}  // namespace verl::rl
