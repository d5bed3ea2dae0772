// File: verl/core/test_util_test.cc
//
// StatusIs on Status and StatusOr: the code and the substring must both
// match, and a failure explains itself with the actual status.
#include "verl/core/test_util.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace verl::core {
namespace {

using ::testing::Not;
using testing::StatusIs;

TEST(StatusIsTest, MatchesCodeAndSubstring) {
  const absl::Status s = absl::NotFoundError("config.yaml: no key 'lr'");
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound, "no key 'lr'"));
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kInvalidArgument, "no key")));
  EXPECT_THAT(s, Not(StatusIs(absl::StatusCode::kNotFound, "no key 'wd'")));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));
  EXPECT_THAT(absl::OkStatus(), Not(StatusIs(absl::StatusCode::kNotFound)));
}

TEST(StatusIsTest, MatchesStatusOr) {
  const absl::StatusOr<int> err = absl::DataLossError("truncated at byte 7");
  EXPECT_THAT(err, StatusIs(absl::StatusCode::kDataLoss, "byte 7"));
  EXPECT_THAT(err, Not(StatusIs(absl::StatusCode::kDataLoss, "byte 8")));
  const absl::StatusOr<std::string> ok = std::string("x");
  EXPECT_THAT(ok, StatusIs(absl::StatusCode::kOk));
  EXPECT_THAT(ok, Not(StatusIs(absl::StatusCode::kInternal)));
}

TEST(StatusIsTest, DescribesAndExplains) {
  const ::testing::Matcher<absl::Status> m =
      StatusIs(absl::StatusCode::kNotFound, "lr");
  EXPECT_EQ(::testing::DescribeMatcher<absl::Status>(m),
            "has status code NOT_FOUND and a message containing \"lr\"");
  EXPECT_EQ(::testing::DescribeMatcher<absl::Status>(m, /*negation=*/true),
            "does not have status code NOT_FOUND with a message containing "
            "\"lr\"");
  ::testing::StringMatchResultListener listener;
  EXPECT_FALSE(::testing::ExplainMatchResult(
      m, absl::InvalidArgumentError("bad lr"), &listener));
  EXPECT_EQ(listener.str(), "whose status is INVALID_ARGUMENT: bad lr");
}

// A command's stdout and exit code; a command killed by a signal is -1.
TEST(RunCommandTest, CapturesStdoutAndTheExitCode) {
  std::string out = "stale";
  EXPECT_EQ(testing::RunCommand("echo hi; echo err >&2", &out), 0);
  EXPECT_EQ(out, "hi\n");
  EXPECT_EQ(testing::RunCommand("printf x; exit 3", &out), 3);
  EXPECT_EQ(out, "x");
  EXPECT_EQ(testing::RunCommand("kill -9 $$", &out), -1);
  EXPECT_EQ(out, "");
}

}  // namespace
}  // namespace verl::core
