// File: verl/core/test_util.h
//
// Small helpers shared by tests: a fresh per-test scratch folder under
// TEST_TMPDIR, running a shell command to capture its output (the
// Python/Node cross-checks read their results this way), and the
// StatusIs(code, substring) matcher for absl::Status / absl::StatusOr.
#ifndef VERL_CORE_TEST_UTIL_H_
#define VERL_CORE_TEST_UTIL_H_

#include <ostream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace verl::core::testing {

// `$TEST_TMPDIR/<name>` (or /tmp/<name>), removed if it exists; not created.
std::string FreshTestDir(const std::string& name);

// Runs `cmd` through /bin/sh; returns its stdout and sets *exit_code (the
// pclose status; -1 if the command could not start) when given.
std::string RunAndCapture(const std::string& cmd, int* exit_code = nullptr);

// Runs `cmd` through /bin/sh with its stdout in *out; returns its exit code,
// or -1 when it could not start or did not exit (a signal).
int RunCommand(const std::string& cmd, std::string* out);

namespace internal {

inline const absl::Status& GetStatus(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& s) {
  return s.status();
}

class StatusIsMatcher {
 public:
  StatusIsMatcher(absl::StatusCode code, std::string substring)
      : code_(code), substring_(std::move(substring)) {}

  template <typename T>
  bool MatchAndExplain(const T& value,
                       ::testing::MatchResultListener* listener) const {
    const absl::Status& s = GetStatus(value);
    *listener << "whose status is " << s;
    return s.code() == code_ &&
           std::string(s.message()).find(substring_) != std::string::npos;
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has status code " << absl::StatusCodeToString(code_)
        << " and a message containing \"" << substring_ << "\"";
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "does not have status code " << absl::StatusCodeToString(code_)
        << " with a message containing \"" << substring_ << "\"";
  }

 private:
  absl::StatusCode code_;
  std::string substring_;
};

}  // namespace internal

// Matches an absl::Status or absl::StatusOr<T> with this code whose message
// contains `substring` (anywhere; "" matches any message):
//   EXPECT_THAT(LoadConfig(path), StatusIs(absl::StatusCode::kNotFound,
//                                          "model.path"));
inline ::testing::PolymorphicMatcher<internal::StatusIsMatcher> StatusIs(
    absl::StatusCode code, std::string substring = "") {
  return ::testing::MakePolymorphicMatcher(
      internal::StatusIsMatcher(code, std::move(substring)));
}

}  // namespace verl::core::testing

#endif  // VERL_CORE_TEST_UTIL_H_
