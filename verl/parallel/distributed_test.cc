// File: verl/parallel/distributed_test.cc
//
// Multi-process tests over loopback: runs :distributed_worker, which
// launches itself with --nproc_per_node (verl::parallel::MaybeLaunch), and
// checks the job's exit code and rank-prefixed output. Every run has a hard
// deadline after which the whole job is killed and the test fails.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/parallel/launcher.h"

extern char** environ;

namespace verl::parallel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct JobResult {
  int exit_code = -1;  // -1: killed at the deadline.
  double seconds = 0;
  std::string output;  // stdout and stderr, interleaved.
};

std::string WorkerPath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "verl",
                      "/verl/parallel/distributed_worker");
}

// Runs the worker with `args` and extra environment `env` ("NAME=value");
// kills its process group at `deadline_s`.
JobResult RunJob(const std::vector<std::string>& args, double deadline_s,
                 const std::vector<std::string>& env = {}) {
  static std::atomic<int> counter{0};
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string log = absl::StrCat(tmp ? tmp : "/tmp", "/job_", getpid(),
                                       "_", counter++, ".log");
  const std::string program = WorkerPath();
  std::vector<std::string> argv_strings = {program};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);

  // The child's environment is built here: after fork only exec-safe calls.
  std::vector<std::string> env_strings(env.begin(), env.end());
  for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);  // So the deadline can kill launcher and workers alike.
    int fd = open(log.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execve(program.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  JobResult result;
  int status = 0;
  while (true) {
    if (waitpid(pid, &status, WNOHANG) == pid) {
      result.exit_code =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (result.seconds > deadline_s) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  result.output = ss.str();
  return result;
}

void ExpectAllRanksOk(const JobResult& job, int world) {
  EXPECT_EQ(job.exit_code, 0) << job.output;
  for (int r = 0; r < world; ++r) {
    EXPECT_THAT(job.output,
                HasSubstr(absl::StrCat("[rank ", r, "] rank ", r,
                                       ": all OK (world ", world, ")")));
  }
}

TEST(DistributedTest, SingleProcessRunsEverythingInProcess) {
  JobResult job = RunJob({"--scenario=all"}, 60);
  EXPECT_EQ(job.exit_code, 0) << job.output;
  EXPECT_THAT(job.output, HasSubstr("rank 0: all OK (world 1)"));
}

TEST(DistributedTest, TwoRanksAllCollectivesMeshAndBatch) {
  ExpectAllRanksOk(
      RunJob({"--nproc_per_node=2", "--master_port=0", "--scenario=all"}, 90),
      2);
}

TEST(DistributedTest, FourRanksAllCollectivesMeshAndBatch) {
  ExpectAllRanksOk(
      RunJob({"--nproc_per_node=4", "--master_port=0", "--scenario=all"}, 120),
      4);
}

TEST(DistributedTest, ExternalLauncherEnvironmentIsUsedAsIs) {
  // torchrun-style: we start both ranks with the variables set; the
  // launcher flag is then ignored (no re-execution, no prefixes).
  auto port = PickFreePort();
  ASSERT_TRUE(port.ok()) << port.status();
  std::vector<JobResult> jobs(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      jobs[r] = RunJob(
          {"--nproc_per_node=4", "--scenario=smoke"}, 60,
          {absl::StrCat("RANK=", r), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1",
           absl::StrCat("MASTER_PORT=", *port)});
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(jobs[r].exit_code, 0) << jobs[r].output;
    EXPECT_THAT(jobs[r].output,
                HasSubstr(absl::StrCat("rank ", r, ": smoke OK (world 2)")));
    EXPECT_THAT(jobs[r].output, Not(HasSubstr("[rank ")));
  }
}

TEST(DistributedTest, RankExitingMidRunEndsTheJobNamingIt) {
  JobResult job = RunJob({"--nproc_per_node=4", "--master_port=0",
                          "--scenario=die", "--launcher_grace_period=2s"},
                         90);
  EXPECT_EQ(job.exit_code, 3) << job.output;
  EXPECT_LT(job.seconds, 60.0);
  EXPECT_THAT(job.output, HasSubstr("launcher: job failed: rank 1 (pid "));
  EXPECT_THAT(job.output, HasSubstr("exited with code 3"));
}

TEST(DistributedTest, CollectiveTimeoutIsDeadlineExceeded) {
  JobResult job =
      RunJob({"--nproc_per_node=2", "--master_port=0", "--scenario=timeout",
              "--timeout_ms=1500", "--launcher_grace_period=2s"},
             90);
  EXPECT_EQ(job.exit_code, 1) << job.output;
  EXPECT_LT(job.seconds, 60.0);
  // Rank 0 waited on rank 1, which skipped the all_reduce.
  EXPECT_THAT(job.output,
              HasSubstr("[rank 0] rank 0 FAILED: DEADLINE_EXCEEDED: rank 0 "
                        "(group 'world' rank 0/2): all_reduce timed out after "
                        "1500 ms"));
  EXPECT_THAT(job.output, HasSubstr("launcher: job failed: rank 0 (pid "));
}

}  // namespace
}  // namespace verl::parallel
