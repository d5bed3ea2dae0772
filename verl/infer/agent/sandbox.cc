// File: verl/infer/agent/sandbox.cc
#include "verl/infer/agent/sandbox.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace verl::infer::agent {
namespace {

constexpr uid_t kNobody = 65534;

// Child side: report a set-up failure through `fd` and exit.
[[noreturn]] void Fail(int fd, const char* what) {
  const std::string msg = absl::StrCat(what, ": ", std::strerror(errno));
  ssize_t ignored = ::write(fd, msg.data(), msg.size());
  (void)ignored;
  ::_exit(127);
}

void SetLimit(int resource, rlim_t value) {
  struct rlimit rl = {value, value};
  ::setrlimit(resource, &rl);
}

[[noreturn]] void RunChild(const std::vector<std::string>& argv,
                           const SandboxLimits& limits, const std::string& dir,
                           int in_fd, int out_fd, int err_fd, int status_fd) {
  ::setpgid(0, 0);
  if (limits.isolate_network && ::unshare(CLONE_NEWNET) != 0 &&
      ::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
    Fail(status_fd, "cannot isolate the network (unshare)");
  }
  if (::chdir(dir.c_str()) != 0) Fail(status_fd, "chdir");
  if (limits.drop_privileges && ::geteuid() == 0) {
    // The process limit is per user and root is exempt: run as nobody.
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 ||
        ::setuid(kNobody) != 0) {
      Fail(status_fd, "cannot drop privileges to nobody");
    }
  }
  SetLimit(RLIMIT_CPU, static_cast<rlim_t>(limits.cpu_time_s));
  SetLimit(RLIMIT_AS, static_cast<rlim_t>(limits.memory_mb) << 20);
  SetLimit(RLIMIT_NPROC, static_cast<rlim_t>(limits.max_processes));
  SetLimit(RLIMIT_FSIZE, static_cast<rlim_t>(limits.max_file_mb) << 20);
  SetLimit(RLIMIT_CORE, 0);
  if (::dup2(in_fd, 0) < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
    Fail(status_fd, "dup2");
  }
  for (int fd = 3; fd < 1024; ++fd) {
    if (fd != status_fd) ::close(fd);
  }
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path[] = "PATH=/usr/bin:/bin";
  char lang[] = "LANG=C.UTF-8";
  char* env[] = {path, lang, nullptr};
  ::execve(args[0], args.data(), env);
  Fail(status_fd, "exec");
}

// Appends what `fd` has to `out` (up to `cap` bytes kept); false at EOF.
bool Drain(int fd, std::string* out, int64_t cap, bool* truncated) {
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof(buf));
  if (n <= 0) return n < 0 && (errno == EINTR || errno == EAGAIN);
  const int64_t room = cap - static_cast<int64_t>(out->size());
  if (room > 0) out->append(buf, std::min<int64_t>(room, n));
  if (n > room) *truncated = true;
  return true;
}

}  // namespace

std::string SandboxResult::Summary() const {
  if (timed_out) return "error: time limit exceeded (killed)";
  if (signal != 0) {
    return absl::StrCat("error: killed by signal ", signal,
                        signal == SIGXCPU || signal == SIGKILL
                            ? " (CPU time or memory limit)"
                            : "");
  }
  if (exit_code != 0) return absl::StrCat("error: exit code ", exit_code);
  return "ok";
}

absl::StatusOr<SandboxResult> RunSandboxed(const std::vector<std::string>& argv,
                                           const std::string& stdin_text,
                                           const SandboxLimits& limits) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return absl::InvalidArgumentError(
        "sandbox: the program must be an absolute path");
  }
  std::error_code ec;
  char tmpl[] = "/tmp/verl-sandbox-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    return absl::InternalError(
        absl::StrCat("sandbox: mkdtemp: ", std::strerror(errno)));
  }
  const std::string dir = tmpl;
  if (limits.drop_privileges && ::geteuid() == 0 &&
      ::chown(dir.c_str(), kNobody, kNobody) != 0) {
    std::filesystem::remove_all(dir, ec);
    return absl::InternalError("sandbox: cannot hand the folder to nobody");
  }
  int in[2], out[2], err[2], status[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 ||
      ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
    std::filesystem::remove_all(dir, ec);
    return absl::InternalError("sandbox: pipe failed");
  }
  const pid_t pid = ::fork();
  if (pid == 0) RunChild(argv, limits, dir, in[0], out[1], err[1], status[1]);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  ::close(status[1]);
  if (pid < 0) {
    ::close(in[1]);
    ::close(out[0]);
    ::close(err[0]);
    ::close(status[0]);
    std::filesystem::remove_all(dir, ec);
    return absl::InternalError("sandbox: fork failed");
  }
  ::setpgid(pid, pid);
  // Set-up errors arrive before exec; a successful exec closes the pipe.
  std::string setup_error;
  char buf[512];
  ssize_t n;
  while ((n = ::read(status[0], buf, sizeof(buf))) > 0)
    setup_error.append(buf, n);
  ::close(status[0]);
  // Small inputs only (the tool's code): write, then close stdin.
  if (setup_error.empty() && !stdin_text.empty()) {
    ::signal(SIGPIPE, SIG_IGN);
    ssize_t ignored = ::write(in[1], stdin_text.data(), stdin_text.size());
    (void)ignored;
  }
  ::close(in[1]);

  SandboxResult result;
  const auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(limits.wall_time_s * 1e3));
  bool out_open = true, err_open = true;
  while (setup_error.empty() && (out_open || err_open)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      break;
    }
    struct pollfd fds[2] = {{out_open ? out[0] : -1, POLLIN, 0},
                            {err_open ? err[0] : -1, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) {
      break;
    }
    if (out_open && (fds[0].revents & (POLLIN | POLLHUP))) {
      out_open = Drain(out[0], &result.stdout_text, limits.max_output_bytes,
                       &result.output_truncated);
    }
    if (err_open && (fds[1].revents & (POLLIN | POLLHUP))) {
      err_open = Drain(err[0], &result.stderr_text, limits.max_output_bytes,
                       &result.output_truncated);
    }
  }
  // The program closed its output: give it until the deadline to exit.
  int wstatus = 0;
  bool reaped = false;
  while (!result.timed_out && setup_error.empty()) {
    const pid_t w = ::waitpid(pid, &wstatus, WNOHANG);
    if (w == pid) {
      reaped = true;
      break;
    }
    if (w < 0 && errno != EINTR) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      break;
    }
    ::usleep(1000);
  }
  // Whatever is left of the group (forks, a timed-out program) goes now.
  ::kill(-pid, SIGKILL);
  while (!reaped && ::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  ::close(out[0]);
  ::close(err[0]);
  std::filesystem::remove_all(dir, ec);
  if (!setup_error.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox: ", setup_error));
  }
  if (WIFEXITED(wstatus)) {
    result.exit_code = WEXITSTATUS(wstatus);
  } else if (WIFSIGNALED(wstatus)) {
    result.exit_code = -1;
    // Our own kill after a timeout is not the program's signal.
    result.signal = result.timed_out ? 0 : WTERMSIG(wstatus);
  }
  return result;
}

absl::StatusOr<SandboxResult> RunPythonSandboxed(const std::string& code,
                                                 const SandboxLimits& limits) {
  return RunSandboxed({"/usr/bin/python3", "-I", "-c", code}, "", limits);
}

}  // namespace verl::infer::agent
