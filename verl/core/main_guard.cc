// File: verl/core/main_guard.cc
#include "verl/core/main_guard.h"

#include <iostream>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "c10/util/Exception.h"
#include "glog/logging.h"

namespace verl::core {

std::string ExceptionLine(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string message =
      c10_error != nullptr ? c10_error->what_without_backtrace() : e.what();
  const size_t newline = message.find('\n');
  if (newline != std::string::npos) message.resize(newline);
  return message;
}

int GuardMain(absl::string_view program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::cerr << program << ": error: " << ExceptionLine(e) << std::endl;
  } catch (...) {
    std::cerr << program << ": error: unknown exception" << std::endl;
  }
  return kUncaughtExceptionExitCode;
}

int RunToolMain(int argc, char** argv, absl::string_view program,
                absl::string_view usage,
                const std::function<absl::Status()>& run) {
  if (!usage.empty()) absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);
  if (!google::IsGoogleLoggingInitialized()) google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  return GuardMain(program, [&] {
    const absl::Status status = run();
    if (status.ok()) return 0;
    std::cerr << program << ": " << status.message() << std::endl;
    return kToolErrorExitCode;
  });
}

int StatusExitCode(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return 0;
  std::cerr << prefix << status << std::endl;
  return 1;
}

}  // namespace verl::core
