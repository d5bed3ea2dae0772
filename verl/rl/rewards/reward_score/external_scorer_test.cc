// File: verl/rl/rewards/reward_score/external_scorer_test.cc
#include "verl/rl/rewards/reward_score/external_scorer.h"

#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::rl::reward {
namespace {

using ::verl::core::testing::StatusIs;

std::vector<ScoreRequest> Requests() {
  return {{"openai/gsm8k", "#### 72", "72"}, {"openai/gsm8k", "#### 5", "72"}};
}

TEST(ExternalScorerTest, ShellScriptScoresJsonLines) {
  // Score 1 if the line carries the solution "#### 72", else a dict result.
  const std::string cmd =
      "while IFS= read -r l; do case \"$l\" in *'\"#### 72\"'*) echo 1;; "
      "*) echo '{\"score\": 0.5, \"acc\": false, \"pred\": \"5\"}';; esac; "
      "done";
  absl::StatusOr<std::vector<RewardResult>> r =
      RunExternalScorer(cmd, Requests(), 10.0);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].score, 1.0);
  EXPECT_EQ((*r)[1].score, 0.5);
  EXPECT_EQ((*r)[1].numeric.at("acc"), 0.0);
  EXPECT_EQ((*r)[1].text.at("pred"), "5");
}

TEST(ExternalScorerTest, ErrorsNameTheCommand) {
  absl::StatusOr<std::vector<RewardResult>> timeout =
      RunExternalScorer("sleep 5", Requests(), 0.3);
  EXPECT_EQ(timeout.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(timeout.status().message().find("sleep 5"), std::string::npos);
  EXPECT_THAT(
      RunExternalScorer("exit 3", Requests(), 10.0),
      StatusIs(absl::StatusCode::kInternal,
               "external reward command 'exit 3': exited with status 3"));
  EXPECT_THAT(
      RunExternalScorer("echo 1", Requests(), 10.0),
      StatusIs(absl::StatusCode::kInternal,
               "external reward command 'echo 1': printed 1 lines for 2"));
  absl::StatusOr<std::vector<RewardResult>> bad =
      RunExternalScorer("echo hello; echo 1", Requests(), 10.0);
  ASSERT_THAT(bad,
              StatusIs(absl::StatusCode::kInternal,
                       "external reward command 'echo hello; echo 1': line 1"));
  EXPECT_NE(bad.status().message().find("line 1"), std::string::npos);
  // A command that ignores its input must not kill us with SIGPIPE.
  std::vector<ScoreRequest> many(2000, Requests()[0]);
  many[0].solution = std::string(100000, 'x');
  EXPECT_THAT(
      RunExternalScorer("exit 0", many, 10.0),
      StatusIs(absl::StatusCode::kInternal,
               "external reward command 'exit 0': printed 0 lines for 2000"));
}

TEST(ExternalScorerTest, ParseScoreLine) {
  EXPECT_EQ(ParseScoreLine("0.25")->score, 0.25);
  EXPECT_EQ(ParseScoreLine("{\"score\": -1, \"acc\": true}")->numeric.at("acc"),
            1.0);
  EXPECT_THAT(
      ParseScoreLine("{\"acc\": 1}"),
      StatusIs(
          absl::StatusCode::kInvalidArgument,
          "expected a number or {\"score\": <number>, ...}, got '{\"acc\""));
  EXPECT_THAT(
      ParseScoreLine("nan?"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "expected a number or {\"score\": <number>, ...}, got 'nan?'"));
}

}  // namespace
}  // namespace verl::rl::reward
