// File: verl/parallel/launcher_test.cc
//
// Supervision logic of the launcher with /bin/sh workers (no LibTorch):
// environment, line prefixes, failure propagation, SIGKILL escalation,
// signal forwarding. The real multi-process runs live in
// distributed_test.cc.
#include "verl/parallel/launcher.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::HasSubstr;
using ::testing::Not;

// Captures the launcher's stdout/stderr in two files.
class Capture {
 public:
  Capture() {
    const char* dir = std::getenv("TEST_TMPDIR");
    static int counter = 0;
    base_ = absl::StrCat(dir ? dir : "/tmp", "/launcher_", ::getpid(), "_",
                         counter++);
    out_fd_ =
        ::open((base_ + ".out").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    err_fd_ =
        ::open((base_ + ".err").c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  }
  ~Capture() {
    ::close(out_fd_);
    ::close(err_fd_);
  }
  void Into(LaunchOptions& options) const {
    options.stdout_fd = out_fd_;
    options.stderr_fd = err_fd_;
  }
  std::string Out() const { return Read(base_ + ".out"); }
  std::string Err() const { return Read(base_ + ".err"); }

 private:
  static std::string Read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  std::string base_;
  int out_fd_;
  int err_fd_;
};

absl::StatusOr<int> RunShell(const std::string& script,
                             const LaunchOptions& options) {
  return RunWorkers("/bin/sh", {"-c", script}, options);
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

TEST(LauncherTest, SetsTorchrunEnvironmentAndPrefixesLines) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 3;
  options.master_port = 0;
  capture.Into(options);
  auto code = RunShell(
      "echo \"env $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE "
      "$GROUP_RANK $MASTER_ADDR $VERL_LAUNCHER_WORKER\"; "
      "echo port=$MASTER_PORT; echo \"err $RANK\" >&2; printf 'tail'",
      options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  const std::string out = capture.Out();
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank ", r, "] env ", r, " 3 ", r,
                                            " 3 0 127.0.0.1 1\n")));
    // A last line without newline is still emitted, prefixed.
    EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank ", r, "] tail\n")));
    EXPECT_THAT(capture.Err(),
                HasSubstr(absl::StrCat("[rank ", r, "] err ", r, "\n")));
  }
  // Port 0 was replaced by one free port shared by all workers.
  EXPECT_THAT(out, Not(HasSubstr("port=0\n")));
  const size_t at = out.find("port=");
  ASSERT_NE(at, std::string::npos);
  const std::string port_line = out.substr(at, out.find('\n', at) - at);
  for (int r = 0; r < 3; ++r) {
    EXPECT_THAT(out, HasSubstr(absl::StrCat("[rank ", r, "] ", port_line)));
  }
}

TEST(LauncherTest, MultiNodeRanks) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 2;
  options.nnodes = 2;
  options.node_rank = 1;
  options.master_addr = "10.1.2.3";
  options.master_port = 4000;
  capture.Into(options);
  auto code = RunShell(
      "echo \"$RANK/$WORLD_SIZE local $LOCAL_RANK node $GROUP_RANK "
      "$MASTER_ADDR:$MASTER_PORT\"",
      options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0);
  EXPECT_THAT(capture.Out(),
              HasSubstr("[rank 2] 2/4 local 0 node 1 10.1.2.3:4000\n"));
  EXPECT_THAT(capture.Out(),
              HasSubstr("[rank 3] 3/4 local 1 node 1 10.1.2.3:4000\n"));
}

TEST(LauncherTest, FailingWorkerStopsTheOthersAndIsNamed) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 4;
  capture.Into(options);
  const auto start = std::chrono::steady_clock::now();
  auto code = RunShell(
      "if [ $RANK = 1 ]; then sleep 0.2; exit 3; fi; exec sleep 60", options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_THAT(capture.Err(), HasSubstr("launcher: job failed: rank 1 (pid "));
  EXPECT_THAT(capture.Err(), HasSubstr(") exited with code 3\n"));
  EXPECT_THAT(capture.Err(), HasSubstr("stopping the other 3 worker(s)"));
}

TEST(LauncherTest, KilledWorkerIsReportedWithSignal) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 2;
  capture.Into(options);
  auto code = RunShell(
      "if [ $RANK = 0 ]; then kill -SEGV $$; fi; exec sleep 60", options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGSEGV);
  EXPECT_THAT(capture.Err(), HasSubstr("rank 0 (pid "));
  EXPECT_THAT(capture.Err(), HasSubstr("was killed by SIGSEGV"));
}

TEST(LauncherTest, EscalatesToSigkillAfterGracePeriod) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 3;
  options.grace_period = std::chrono::milliseconds(300);
  capture.Into(options);
  const auto start = std::chrono::steady_clock::now();
  // Ranks 0 and 2 ignore SIGTERM; only SIGKILL ends them.
  auto code = RunShell(
      "if [ $RANK = 1 ]; then sleep 0.3; exit 7; fi; trap '' TERM; "
      "exec sleep 60",
      options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 7);
  EXPECT_LT(SecondsSince(start), 10.0);
  EXPECT_THAT(capture.Err(), HasSubstr("rank 1 (pid "));
}

TEST(LauncherTest, ForwardsSigtermToWorkers) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 2;
  capture.Into(options);
  absl::StatusOr<int> code;
  std::thread launcher([&] {
    code = RunShell(
        "trap 'echo got TERM; exit 0' TERM; echo ready; "
        "while true; do sleep 0.05; done",
        options);
  });
  const auto start = std::chrono::steady_clock::now();
  while (SecondsSince(start) < 20.0) {
    const std::string out = capture.Out();
    if (out.find("[rank 0] ready") != std::string::npos &&
        out.find("[rank 1] ready") != std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(::getpid(), SIGTERM);
  launcher.join();
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGTERM);
  EXPECT_THAT(capture.Out(), HasSubstr("[rank 0] got TERM"));
  EXPECT_THAT(capture.Out(), HasSubstr("[rank 1] got TERM"));
  EXPECT_THAT(capture.Err(),
              HasSubstr("received SIGTERM; stopped all workers"));
}

TEST(LauncherTest, MissingProgramIsAFailure) {
  Capture capture;
  LaunchOptions options;
  options.nproc_per_node = 2;
  capture.Into(options);
  auto code = RunWorkers("/nonexistent/program", {}, options);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 127);
  EXPECT_THAT(capture.Err(), HasSubstr("execve failed"));
}

TEST(LauncherTest, ValidatesOptions) {
  LaunchOptions options;
  options.nproc_per_node = 0;
  EXPECT_THAT(std::string(ValidateLaunchOptions(options).message()),
              HasSubstr("--nproc_per_node=0 must be >= 1"));
  options = {};
  options.nnodes = 2;
  options.node_rank = 2;
  EXPECT_THAT(std::string(ValidateLaunchOptions(options).message()),
              HasSubstr("--node_rank=2 is outside [0, --nnodes=2)"));
  options = {};
  options.nnodes = 2;
  options.master_port = 0;
  EXPECT_THAT(std::string(ValidateLaunchOptions(options).message()),
              HasSubstr("--master_port=0"));
  options = {};
  options.master_port = 70000;
  EXPECT_THAT(ValidateLaunchOptions(options),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--master_port=70000 is outside [0, 65535]"));
  EXPECT_TRUE(ValidateLaunchOptions(LaunchOptions{}).ok());
}

TEST(LauncherTest, MaybeLaunchIsANoOpForWorkersAndSingleProcess) {
  char arg0[] = "prog";
  char* argv[] = {arg0, nullptr};
  LaunchOptions options;
  auto single = MaybeLaunch(1, argv, options);
  ASSERT_TRUE(single.ok());
  EXPECT_TRUE(single->is_worker);

  options.nproc_per_node = 4;
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "4", 1);
  auto external = MaybeLaunch(1, argv, options);
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  ASSERT_TRUE(external.ok());
  EXPECT_TRUE(external->is_worker);
}

TEST(LauncherTest, PickFreePortReturnsAUsablePort) {
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  EXPECT_LE(*port, 65535);
}

}  // namespace
}  // namespace verl::parallel
