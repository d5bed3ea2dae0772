// File: verl/core/test_util.h
//
// Small helpers shared by tests: a fresh per-test scratch folder under
// TEST_TMPDIR and running a shell command to capture its output (the
// Python/Node cross-checks read their results this way).
#ifndef VERL_CORE_TEST_UTIL_H_
#define VERL_CORE_TEST_UTIL_H_

#include <string>

namespace verl::core::testing {

// `$TEST_TMPDIR/<name>` (or /tmp/<name>), removed if it exists; not created.
std::string FreshTestDir(const std::string& name);

// Runs `cmd` through /bin/sh; returns its stdout and sets *exit_code (the
// pclose status; -1 if the command could not start) when given.
std::string RunAndCapture(const std::string& cmd, int* exit_code = nullptr);

}  // namespace verl::core::testing

#endif  // VERL_CORE_TEST_UTIL_H_
