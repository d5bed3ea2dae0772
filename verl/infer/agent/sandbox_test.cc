// File: verl/infer/agent/sandbox_test.cc
//
// The code interpreter's sandbox: ordinary code runs; an infinite loop, a
// memory bomb, a fork bomb and a network attempt each end with an error
// result within the limits; output is capped.
#include "verl/infer/agent/sandbox.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"

namespace verl::infer::agent {
namespace {

using ::testing::HasSubstr;

SandboxLimits Small() {
  SandboxLimits l;
  l.wall_time_s = 5;
  l.cpu_time_s = 2;
  l.memory_mb = 256;
  l.max_processes = 8;
  l.max_output_bytes = 1000;
  return l;
}

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access("/usr/bin/python3", X_OK) != 0) {
      GTEST_SKIP() << "/usr/bin/python3 missing";
    }
  }
  SandboxResult Run(const std::string& code, double* seconds = nullptr) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = RunPythonSandboxed(code, Small());
    if (seconds != nullptr) {
      *seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
              .count();
    }
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : SandboxResult{};
  }
};

TEST_F(SandboxTest, RunsCodeAndCapturesOutput) {
  SandboxResult r = Run("import sys\nprint(6*7)\nprint('e', file=sys.stderr)");
  EXPECT_EQ(r.Summary(), "ok");
  EXPECT_EQ(r.stdout_text, "42\n");
  EXPECT_EQ(r.stderr_text, "e\n");
  r = Run("raise SystemExit(3)");
  EXPECT_EQ(r.Summary(), "error: exit code 3");
}

TEST_F(SandboxTest, InfiniteLoopIsStoppedByTheCpuOrWallLimit) {
  double s = 0;
  SandboxResult r = Run("while True: pass", &s);
  EXPECT_NE(r.Summary(), "ok");
  EXPECT_LT(s, 6.0);
}

TEST_F(SandboxTest, MemoryBombFails) {
  SandboxResult r = Run("x = bytearray(2 * 1024**3)");
  EXPECT_NE(r.Summary(), "ok");
  EXPECT_THAT(r.stderr_text, HasSubstr("MemoryError"));
}

TEST_F(SandboxTest, ForkBombEndsWithinTheWallLimit) {
  double s = 0;
  SandboxResult r = Run("import os\nwhile True:\n  os.fork()", &s);
  EXPECT_NE(r.Summary(), "ok");
  EXPECT_LT(s, 6.0);
}

TEST_F(SandboxTest, NoNetwork) {
  SandboxResult r =
      Run("import socket\n"
          "socket.create_connection(('1.1.1.1', 80), timeout=2)");
  EXPECT_NE(r.Summary(), "ok");
  EXPECT_THAT(r.stderr_text, HasSubstr("OSError"));
}

TEST_F(SandboxTest, OutputIsCapped) {
  SandboxResult r = Run("print('x' * 100000)");
  EXPECT_TRUE(r.output_truncated);
  EXPECT_EQ(r.stdout_text.size(), 1000u);
  EXPECT_THAT(
      RunSandboxed({"python3"}, "", Small()),
      ::testing::Not(::testing::Truly([](const auto& s) { return s.ok(); })));
}

}  // namespace
}  // namespace verl::infer::agent
