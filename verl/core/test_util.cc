// File: verl/core/test_util.cc
#include "verl/core/test_util.h"

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace verl::core::testing {

std::string FreshTestDir(const std::string& name) {
  const char* t = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(t ? t : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

std::string RunAndCapture(const std::string& cmd, int* exit_code) {
  FILE* pipe = ::popen(cmd.c_str(), "r");
  std::string out;
  if (pipe == nullptr) {
    if (exit_code != nullptr) *exit_code = -1;
    return out;
  }
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int rc = ::pclose(pipe);
  if (exit_code != nullptr) *exit_code = rc;
  return out;
}

int RunCommand(const std::string& cmd, std::string* out) {
  int status = -1;
  *out = RunAndCapture(cmd, &status);
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace verl::core::testing
