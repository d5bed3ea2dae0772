// File: verl/core/main_guard_test.cc
#include "verl/core/main_guard.h"

#include <stdexcept>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/torch.h"

namespace verl::core {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(GuardMainTest, PassesTheExitCodeThrough) {
  EXPECT_EQ(GuardMain("prog", [] { return 0; }), 0);
  EXPECT_EQ(GuardMain("prog", [] { return 3; }), 3);
}

// A LibTorch error (here AdamW's own check on a negative lr) is one line,
// without the C++ backtrace, and a non-zero exit.
TEST(GuardMainTest, C10ErrorIsOneLineAndNonZeroExit) {
  ::testing::internal::CaptureStderr();
  const int rc = GuardMain("prog", [] {
    torch::Tensor w = torch::zeros({2}, torch::requires_grad());
    torch::optim::AdamW adam({w}, torch::optim::AdamWOptions(-1.0));
    return 0;
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(rc, kUncaughtExceptionExitCode);
  EXPECT_THAT(err, HasSubstr("prog: error: "));
  EXPECT_THAT(err, HasSubstr("learning rate"));
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_THAT(err, Not(HasSubstr("frame #")));
}

TEST(GuardMainTest, StdExceptionsAreCaughtToo) {
  ::testing::internal::CaptureStderr();
  const int rc =
      GuardMain("prog", []() -> int { throw std::runtime_error("a\nb"); });
  EXPECT_EQ(rc, kUncaughtExceptionExitCode);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "prog: error: a\n");
}

// A tool's main: flags parsed, a failed status is "<program>: <message>" and
// exit 2, an escaped exception still exit 1.
TEST(RunToolMainTest, StatusBecomesOneLineAndExitTwo) {
  char prog[] = "prog";
  char* argv[] = {prog, nullptr};
  EXPECT_EQ(
      RunToolMain(1, argv, "prog", "usage", [] { return absl::OkStatus(); }),
      0);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(
      RunToolMain(1, argv, "prog", "",
                  [] { return absl::InvalidArgumentError("--x: bad value"); }),
      kToolErrorExitCode);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "prog: --x: bad value\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(
      RunToolMain(1, argv, "prog", "",
                  []() -> absl::Status { throw std::runtime_error("boom"); }),
      kUncaughtExceptionExitCode);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "prog: error: boom\n");
}

// A worker's status: 0 and silent when ok, else "<prefix><code>: <message>"
// and exit 1.
TEST(StatusExitCodeTest, OkIsZeroAndAnErrorIsOneLineAndExitOne) {
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(StatusExitCode(absl::OkStatus(), "w: "), 0);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(StatusExitCode(absl::InternalError("boom"), "w worker: "), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "w worker: INTERNAL: boom\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(StatusExitCode(absl::NotFoundError("x")), 1);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "NOT_FOUND: x\n");
}

}  // namespace
}  // namespace verl::core
