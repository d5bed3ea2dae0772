// File: verl/rl/rewards/reward_score/reward_score_test.cc
//
// Reward tables derived from verl's documented rules (gsm8k.py,
// math_reward.py / Hendrycks is_equiv, math_dapo.py / Minerva
// normalisation), including malformed outputs.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "verl/core/test_util.h"
#include "verl/rl/rewards/reward_score/arithmetic.h"
#include "verl/rl/rewards/reward_score/countdown.h"
#include "verl/rl/rewards/reward_score/default_compute_score.h"
#include "verl/rl/rewards/reward_score/geo3k.h"
#include "verl/rl/rewards/reward_score/geo_map.h"
#include "verl/rl/rewards/reward_score/gsm8k.h"
#include "verl/rl/rewards/reward_score/math_dapo.h"
#include "verl/rl/rewards/reward_score/math_reward.h"
#include "verl/rl/rewards/reward_score/multiples.h"
#include "verl/rl/rewards/reward_score/search_r1.h"

namespace verl::rl::reward {
namespace {

using ::verl::core::testing::StatusIs;

struct Case {
  std::string solution;
  std::string ground_truth;
  double expected;
};

TEST(Gsm8kTest, StrictTable) {
  const std::string pad(400, 'x');
  const std::vector<Case> cases = {
      {"So she has 72 apples.\n#### 72", "72", 1.0},
      {"#### 72.0", "72", 0.0},
      {"#### 1,234", "1234", 1.0},
      {"#### $72", "72", 0.0},  // '$' cannot follow "#### "
      {"The answer is 72", "72", 0.0},
      {"#### -5", "-5", 1.0},
      {"#### 70\n#### 72", "72", 1.0},  // last match wins
      {"#### 72\n#### 70", "72", 0.0},
      {"####72", "72", 0.0},
      {"#### 72.", "72", 0.0},
      {"#### 72 " + pad, "72", 0.0},  // outside the last 300 characters
      {"#### 72 " + std::string(250, 'x'), "72", 1.0},
      {"", "72", 0.0},
      {"#### 3.50", "3.50", 1.0},
      {"#### 1,000,000", "1000000", 1.0},
      {"####  72", "72", 0.0},
      {"answer #### 72 dollars", "72", 1.0},
      {"答案是 #### 72", "72", 1.0},
      {"#### 0", "0", 1.0},
      {"#### -0.5", "-0.5", 1.0},
      {"#### 7 2", "72", 0.0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Gsm8kComputeScore(c.solution, c.ground_truth), c.expected)
        << c.solution.substr(0, 40);
  }
  EXPECT_EQ(Gsm8kComputeScore("#### 5", "72", Gsm8kMethod::kStrict, 0.1), 0.1);
}

TEST(Gsm8kTest, FlexibleTable) {
  const std::vector<Case> cases = {
      {"I think it is 72", "72", 1.0},
      {"72 apples, then 5.", "72", 0.0},  // last token "5."
      {"The result is 72.", "72", 0.0},   // token "72." as in verl
      {"no numbers here", "72", 0.0},
      {"value -72", "-72", 1.0},
      {". .", "72", 0.0},
      {"1,234", "1,234", 1.0},  // flexible keeps commas
  };
  for (const Case& c : cases) {
    EXPECT_EQ(
        Gsm8kComputeScore(c.solution, c.ground_truth, Gsm8kMethod::kFlexible),
        c.expected)
        << c.solution;
  }
  EXPECT_FALSE(Gsm8kExtractSolution("none", Gsm8kMethod::kFlexible));
}

TEST(MathTest, HendrycksTable) {
  const std::vector<Case> cases = {
      {"\\boxed{72}", "72", 1.0},
      {"so \\boxed{\\frac{1}{2}}", "\\frac12", 1.0},
      {"\\boxed{0.5}", "\\frac{1}{2}", 1.0},
      {"\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", 1.0},
      {"\\boxed{3/4}", "\\frac{3}{4}", 1.0},
      {"\\boxed{10\\%}", "10", 1.0},
      {"\\boxed{90^\\circ}", "90", 1.0},
      {"\\boxed{\\$5}", "5", 1.0},
      {"\\boxed{x = 5}", "5", 1.0},
      {"\\boxed{\\left( 1, 2 \\right)}", "(1,2)", 1.0},
      {"\\boxed{\\sqrt2}", "\\sqrt{2}", 1.0},
      {"\\boxed{5 \\text{ cm}}", "5", 1.0},
      {"\\boxed{.5}", "\\frac{1}{2}", 1.0},
      {"\\boxed{71}", "72", 0.0},
      {"no box 72", "72", 0.0},
      {"\\boxed{72", "72", 0.0},  // unbalanced
      {"\\boxed{1} then \\boxed{2}", "2", 1.0},
      {"\\boxed{{2}}", "2", 0.0},
      {"\\fbox{72}", "72", 0.0},  // verl's remove_boxed rejects \fbox
      {"so \\boxed 72$ done", "72", 1.0},
      {"\\boxed{\\frac{1}{2}}", "1/2", 1.0},
      {"\\boxed{a/b}", "a/b", 1.0},           // normalisation fails → raw ==
      {"\\boxed{a/b}", "\\frac{a}{b}", 0.0},  // ... and raw strings differ
      {"\\boxed{2\\!000}", "2000", 1.0},
      {"\\boxed{\\tfrac{1}{3}}", "\\frac{1}{3}", 1.0},
      {"\\boxed{-3/4}", "\\frac{-3}{4}", 1.0},
      {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt3}{2}", 1.0},
      {"", "0", 0.0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(MathComputeScore(c.solution, c.ground_truth), c.expected)
        << c.solution << " vs " << c.ground_truth;
  }
}

TEST(MathTest, StripStringPieces) {
  EXPECT_EQ(StripString("\\frac12").value(), "\\frac{1}{2}");
  EXPECT_EQ(StripString("\\frac1{72}").value(), "\\frac{1}{72}");
  EXPECT_EQ(StripString("k = 3").value(), "3");
  EXPECT_FALSE(StripString("2\\frac").has_value());  // Python IndexError
  EXPECT_EQ(LastBoxedOnlyString("a \\boxed{x{y}} b").value(), "\\boxed{x{y}}");
}

struct DapoCase {
  std::string solution;
  std::string ground_truth;
  bool acc;
  std::string pred;
};

TEST(MathDapoTest, MinervaTable) {
  const std::vector<DapoCase> cases = {
      {"Answer: 72", "72", true, "72"},
      {"answer: 72", "72", true, "72"},
      {"ANSWER : 72", "72", true, "72"},
      {"Answer: 1,000", "1000", true, "1000"},
      {"Answer: $\\frac{1}{2}$", "\\frac{1}{2}", true, "\\frac{1}{2}"},
      {"Answer: \\frac12", "\\frac{1}{2}", true, "\\frac{1}{2}"},
      {"Answer: x = 5", "5", true, "5"},
      {"Answer: 5 dollars", "5", true, "5"},
      {"Answer: \\boxed{42}", "42", true, "42"},
      {"Answer: \\text{(A)}", "(A)", true, "(A)"},
      {"Answer: 41", "42", false, "41"},
      {"The answer is 42", "42", false, "[INVALID]"},
      {"", "42", false, "[INVALID]"},
      {"Answer: 1\nAnswer: 42", "42", true, "42"},
      {"Answer: 42\nsome more text", "42", true, "42"},
      {"Answer: 42" + std::string(300, 'x'), "42", false, "[INVALID]"},
      {"Answer: 90^\\circ", "90", true, "90"},
      {"Answer: \\sqrt2", "\\sqrt{2}", true, "\\sqrt{2}"},
      {"Answer: 3.5", "3.50", false, "3.5"},
      {"Answer: 10 \\text{ cm}", "10", true, "10"},
      {"Answer: 5 mph", "5", true, "5"},
      {"Answer: a 5", "5", true, "5"},
      {"Answer: 12 points.", "12", false, "12."},
      {"Answer:", "42", false, "[INVALID]"},  // nothing after the colon
  };
  for (const DapoCase& c : cases) {
    MathDapoResult r = MathDapoComputeScore(c.solution, c.ground_truth);
    EXPECT_EQ(r.acc, c.acc) << c.solution.substr(0, 40);
    EXPECT_EQ(r.score, c.acc ? 1.0 : -1.0);
    EXPECT_EQ(r.pred, c.pred) << c.solution.substr(0, 40);
  }
}

TEST(MathDapoTest, StrictBoxVerify) {
  EXPECT_TRUE(MathDapoComputeScore("so \\boxed{42}", "42", true).acc);
  EXPECT_FALSE(MathDapoComputeScore("so \\boxed{ 42}", "42", true).acc);
  EXPECT_EQ(MathDapoComputeScore("42", "42", true).pred, "[INVALID]");
}

TEST(Geo3kTest, FormatAndAccuracy) {
  EXPECT_NEAR(Geo3kComputeScore("<think>a</think> so \\boxed{30}", "30"), 1.0,
              1e-12);
  EXPECT_NEAR(Geo3kComputeScore("so \\boxed{30}", "30"), 0.9, 1e-12);
  EXPECT_NEAR(Geo3kComputeScore("<think>\nx\n</think>\\boxed{31}", "30"), 0.1,
              1e-12);
  EXPECT_NEAR(Geo3kComputeScore("<think>a</think>\\boxed{30.0}", "30"), 1.0,
              1e-12);
  EXPECT_NEAR(Geo3kComputeScore("nothing", "30"), 0.0, 1e-12);
}

TEST(SearchR1Test, ExactMatch) {
  EXPECT_EQ(SearchR1ComputeScore("<answer>The Eiffel Tower</answer>",
                                 {"eiffel tower"}),
            1.0);
  EXPECT_EQ(SearchR1ComputeScore("<answer>x</answer><answer>Paris!</answer>",
                                 {"London", "paris"}),
            1.0);
  EXPECT_EQ(SearchR1ComputeScore("Paris", {"paris"}), 0.0);
  EXPECT_EQ(SearchR1ComputeScore("<answer>Rome</answer>", {"paris"}), 0.0);
  std::string spam;
  for (int i = 0; i < 11; ++i) spam += "<answer>paris</answer>";
  EXPECT_EQ(SearchR1ComputeScore(spam, {"paris"}), 0.25);
  EXPECT_EQ(NormalizeQaAnswer("  An  Apple, the pie "), "apple pie");
}

TEST(CountdownTest, Table) {
  const std::vector<int64_t> nums = {3, 5, 7};
  const std::vector<std::tuple<std::string, double>> cases = {
      {"<answer>3*5+7</answer>", 1.0},
      {"<answer> (3 * 5) + 7 </answer>", 1.0},
      {"<answer>3*5+8</answer>", 0.1},    // 8 not available
      {"<answer>3*5</answer>", 0.1},      // wrong value
      {"<answer>3*5+7+7</answer>", 0.1},  // 7 used twice
      {"<answer>7/0+3*5</answer>", 0.1},  // division by zero
      {"<answer>__import__('os')</answer>", 0.1},
      {"think...\n3*5+7 = 22\n", 1.0},  // last line equation
      {"I give up", 0.0},
      {"", 0.0},
      {"<answer>(7+5)*3-14</answer>", 0.1},  // 14 not available
      {"<answer>7*5-3*5+2</answer>", 0.1},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_EQ(CountdownComputeScore(text, 22, nums), expected) << text;
  }
  EXPECT_DOUBLE_EQ(EvaluateArithmetic("(1+2)*3-4/2").value(), 7.0);
  EXPECT_DOUBLE_EQ(EvaluateArithmetic("-(3-5)").value(), 2.0);
  EXPECT_FALSE(EvaluateArithmetic("(1+2").has_value());
  EXPECT_FALSE(EvaluateArithmetic("1+").has_value());
}

TEST(ArithmeticTest, Table) {
  const std::vector<std::tuple<std::string, int64_t, double>> cases = {
      {"12+30=42\n#### 42", 42, 1.0}, {"#### 41", 42, 0.0},
      {"the answer is 42", 42, 1.0},  {"#### 1,042", 1042, 1.0},
      {"#### 42.0", 42, 1.0},         {"#### 42.5", 42, 0.0},
      {"nothing", 42, 0.0},           {"#### -7", -7, 1.0},
      {"#### 42\nwait, 43", 42, 1.0},  // "####" wins over later numbers
  };
  for (const auto& [text, gt, expected] : cases) {
    EXPECT_EQ(ArithmeticComputeScore(text, gt), expected) << text;
  }
}

TEST(DefaultComputeScoreTest, Dispatch) {
  using nlohmann::json;
  EXPECT_EQ(DefaultComputeScore("openai/gsm8k", "#### 72", json(72))->score,
            1.0);
  EXPECT_EQ(
      DefaultComputeScore("lighteval/MATH", "\\boxed{2}", json("2"))->score,
      1.0);
  absl::StatusOr<RewardResult> dapo =
      DefaultComputeScore("aime2024", "Answer: 7", json("7"));
  ASSERT_TRUE(dapo.ok());
  EXPECT_EQ(dapo->score, 1.0);
  EXPECT_EQ(dapo->numeric.at("acc"), 1.0);
  EXPECT_EQ(dapo->text.at("pred"), "7");
  EXPECT_EQ(DefaultComputeScore("math_dapo", "Answer: 6", json("7"))->score,
            -1.0);
  EXPECT_EQ(DefaultComputeScore("searchR1_nq", "<answer>Paris</answer>",
                                json{{"target", {"paris"}}})
                ->score,
            1.0);
  EXPECT_EQ(DefaultComputeScore("countdown", "<answer>3*5+7</answer>",
                                json{{"target", 22}, {"numbers", {3, 5, 7}}})
                ->score,
            1.0);
  EXPECT_EQ(DefaultComputeScore("countdown", "<answer>3*5+7</answer>",
                                json("{\"target\": 22, \"numbers\": [3,5,7]}"))
                ->score,
            1.0);
  EXPECT_EQ(DefaultComputeScore("arithmetic", "#### 9", json("9"))->score, 1.0);
  EXPECT_NEAR(
      DefaultComputeScore("hiyouga/geometry3k", "\\boxed{3}", json("3"))->score,
      0.9, 1e-12);

  absl::StatusOr<RewardResult> unknown =
      DefaultComputeScore("my/dataset", "x", json("y"));
  ASSERT_THAT(unknown, StatusIs(absl::StatusCode::kUnimplemented,
                                "no rule reward for data_source 'my/dataset'"));
  EXPECT_NE(unknown.status().message().find("my/dataset"), std::string::npos);
  EXPECT_THAT(
      DefaultComputeScore("countdown", "x", json("oops")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "reward_model.ground_truth for data_source 'countdown' must"));
  EXPECT_THAT(
      DefaultComputeScore("arithmetic", "x", json("nine")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "reward_model.ground_truth for data_source 'arithmetic' must"));
  EXPECT_DOUBLE_EQ(DefaultComputeScore("multiples", "28",
                                       json{{"k", 7}, {"lo", 14}, {"hi", 42}})
                       ->score,
                   0.75);
  EXPECT_DOUBLE_EQ(
      DefaultComputeScore("multiples", "42",
                          json("{\"k\": 7, \"lo\": 14, \"hi\": 42}"))
          ->score,
      1.0);
  for (const json& bad : {json("oops"), json{{"k", 7}, {"lo", 14}},
                          json{{"k", 7}, {"lo", 14}, {"hi", "42"}},
                          json{{"k", 0}, {"lo", 14}, {"hi", 42}},
                          json{{"k", 5}, {"lo", 11}, {"hi", 14}}}) {
    // Malformed ground truths and questions with no valid answer alike.
    EXPECT_THAT(DefaultComputeScore("multiples", "14", bad),
                StatusIs(absl::StatusCode::kInvalidArgument, "multiples"))
        << bad;
  }
  EXPECT_THAT(
      DefaultComputeScore("searchR1_nq", "x", json("paris")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "reward_model.ground_truth for data_source 'searchR1_nq'"));
}

TEST(MultiplesTest, ScoreTable) {
  const MultiplesQuestion q{7, 14, 42};  // answers 14 21 28 35 42
  const std::vector<std::pair<std::string, double>> table = {
      {"14", 0.5},       {"21", 0.625},
      {"28", 0.75},      {" 35\n", 0.875},
      {"42", 1.0},       {"7", 0.0},
      {"49", 0.0},       {"15", 0.0},
      {"0", 0.0},        {"014", 0.0},
      {"+14", 0.0},      {"-14", 0.0},
      {"14.0", 0.0},     {"1 4", 0.0},
      {"14 21", 0.0},    {"#### 14", 0.0},
      {"fourteen", 0.0}, {"", 0.0},
      {"  ", 0.0},       {"9999999999999999999999", 0.0}};
  for (const auto& [text, expected] : table) {
    EXPECT_DOUBLE_EQ(MultiplesComputeScore(text, q), expected) << text;
  }
  EXPECT_EQ(ParseMultiplesAnswer("\t105 ").value(), 105);
  EXPECT_FALSE(ParseMultiplesAnswer("10a").has_value());
  // lo == hi: reward 1; one multiple inside wider bounds is graded.
  EXPECT_DOUBLE_EQ(MultiplesComputeScore("12", {4, 12, 12}), 1.0);
  EXPECT_DOUBLE_EQ(MultiplesComputeScore("12", {4, 10, 15}), 0.7);
}

TEST(MultiplesTest, TargetIsRewardNormalised) {
  // r = 0.5 0.625 0.75 0.875 1.0, Σ = 3.75.
  const auto target = MultiplesTarget({7, 14, 42});
  ASSERT_EQ(target.size(), 5u);
  const double r[] = {0.5, 0.625, 0.75, 0.875, 1.0};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(target[i].first, 14 + 7 * i);
    EXPECT_NEAR(target[i].second, r[i] / 3.75, 1e-12);
  }
  // Bounds need not be multiples: 12 16 20 in [10, 22].
  const auto loose = MultiplesTarget({4, 10, 22});
  ASSERT_EQ(loose.size(), 3u);
  EXPECT_EQ(loose.front().first, 12);
  EXPECT_EQ(loose.back().first, 20);
  EXPECT_TRUE(MultiplesTarget({5, 11, 14}).empty());
  EXPECT_TRUE(ValidateMultiplesQuestion({4, 10, 22}).ok());
  for (const MultiplesQuestion& bad :
       std::vector<MultiplesQuestion>{{5, 11, 14}, {0, 0, 10}, {3, 12, 9}}) {
    EXPECT_THAT(ValidateMultiplesQuestion(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         "expected k >= 1, 0 <= lo <= hi and a multiple of k"))
        << bad.k << " " << bad.lo << " " << bad.hi;
  }
}

TEST(GeoMapTest, ScoreTable) {
  const std::vector<std::tuple<std::string, std::string, double>> table = {
      {"NE", "NE", 1.0},
      {" ne\n", "NE", 1.0},
      {"SW", "NE", 0.0},
      {"N", "NE", 0.0},
      {"NE NE", "NE", 0.0},
      {"", "NE", 0.0},
      {"7", "7", 1.0},
      {"07", "7", 0.0},
      {"so #### B", "B", 1.0},
      {"#### A #### C", "C", 1.0},
      {"#### A #### C", "A", 0.0},
      {"B", "", 0.0},
  };
  for (const auto& [response, truth, expected] : table) {
    EXPECT_DOUBLE_EQ(GeoMapComputeScore(response, truth), expected)
        << "'" << response << "' vs '" << truth << "'";
  }
  EXPECT_EQ(GeoMapExtractAnswer("x #### SE "), "SE");
  EXPECT_DOUBLE_EQ(DefaultComputeScore("geo_map", "sw", "SW", {})->score, 1.0);
  EXPECT_DOUBLE_EQ(DefaultComputeScore("geo_map", "12", 12, {})->score, 1.0);
  EXPECT_DOUBLE_EQ(DefaultComputeScore("geo_map", "NW", "SW", {})->score, 0.0);
}

// Malformed model output (random bytes over a LaTeX/number-heavy alphabet,
// invalid UTF-8, deep nesting) never crashes a scorer and scores stay in
// their documented ranges.
TEST(RewardRobustnessTest, RandomOutputsNeverCrash) {
  const std::string alphabet =
      "0123456789+-*/()=.,$#\\{}^_ abcxAnswer:boxedfrac<>/\n\xff\xc3";
  std::mt19937 rng(99);
  for (int i = 0; i < 2000; ++i) {
    std::string s;
    const int len = std::uniform_int_distribution<int>(0, 120)(rng);
    for (int j = 0; j < len; ++j)
      s.push_back(alphabet[std::uniform_int_distribution<size_t>(
          0, alphabet.size() - 1)(rng)]);
    if (i % 50 == 0) s = std::string(300, '{') + "\\boxed{" + s;
    for (const char* src : {"openai/gsm8k", "lighteval/MATH", "math_dapo",
                            "hiyouga/geometry3k", "arithmetic"}) {
      const std::string gt =
          std::string(src) == "arithmetic" ? "7" : s.substr(0, 5);
      absl::StatusOr<RewardResult> r =
          DefaultComputeScore(src, s, nlohmann::json(gt));
      ASSERT_TRUE(r.ok()) << src;
      EXPECT_GE(r->score, -1.0);
      EXPECT_LE(r->score, 1.0);
    }
    EXPECT_GE(CountdownComputeScore(s, 24, {1, 2, 3, 4}), 0.0);
    EXPECT_GE(SearchR1ComputeScore(s, {"a"}), 0.0);
    const double m = MultiplesComputeScore(s, {7, 14, 42});
    EXPECT_GE(m, 0.0);
    EXPECT_LE(m, 1.0);
  }
}

}  // namespace
}  // namespace verl::rl::reward
