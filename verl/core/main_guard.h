// File: verl/core/main_guard.h
//
// The boundary of every binary's main: an exception that escapes library code
// (a c10::Error from LibTorch, std::bad_alloc, ...) becomes one line on
// stderr and a non-zero exit instead of std::terminate's abort with a stack
// trace (exit 134).
//
//   int main(int argc, char** argv) {
//     return verl::core::GuardMain("train", [&] { return Main(argc, argv); });
//   }
#ifndef VERL_CORE_MAIN_GUARD_H_
#define VERL_CORE_MAIN_GUARD_H_

#include <exception>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace verl::core {

// The exit code GuardMain returns for an escaped exception.
inline constexpr int kUncaughtExceptionExitCode = 1;

// Runs `body` and returns its exit code; an escaped exception prints
// "<program>: error: <first line of the message>" and returns
// kUncaughtExceptionExitCode.
int GuardMain(absl::string_view program, const std::function<int()>& body);

// The whole main of a tool whose work is `run`: sets the usage message
// (when not empty), parses the absl flags, sends glog to stderr, and runs
// `run` under GuardMain; a failed status prints "<program>: <message>" and
// returns kToolErrorExitCode.
inline constexpr int kToolErrorExitCode = 2;
int RunToolMain(int argc, char** argv, absl::string_view program,
                absl::string_view usage,
                const std::function<absl::Status()>& run);

// The exit code of a worker or helper process whose work ended in `status`:
// 0 when ok; otherwise prints "<prefix><status>" (code and message) and a
// newline on stderr and returns 1.
int StatusExitCode(const absl::Status& status, absl::string_view prefix = "");

// The message of `e` without LibTorch's backtrace: its first line.
std::string ExceptionLine(const std::exception& e);

}  // namespace verl::core

#endif  // VERL_CORE_MAIN_GUARD_H_
