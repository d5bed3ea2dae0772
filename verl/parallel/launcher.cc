// File: verl/parallel/launcher.cc
#include "verl/parallel/launcher.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/parallel/dist_env.h"

extern char** environ;

namespace verl::parallel {
namespace {

using Clock = std::chrono::steady_clock;

// Set by the launcher's SIGINT/SIGTERM handler, read by its wait loop.
volatile sig_atomic_t g_pending_signal = 0;

void RecordSignal(int sig) { g_pending_signal = sig; }

// Set in the workers' environment so a worker knows it was started here.
constexpr char kWorkerMarker[] = "VERL_LAUNCHER_WORKER";

void WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

struct Worker {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;  // waitpid status once reaped.
};

// One pipe end a worker writes to, and where its prefixed lines go.
struct Stream {
  int fd = -1;
  int out_fd = -1;
  std::string prefix;
  std::string pending;  // Bytes after the last newline.
};

// Copies worker output line by line, prefixed, until every stream hits EOF
// or, after Stop(), a short drain period passes (a worker's own children may
// keep a pipe open after it exits).
class LineForwarder {
 public:
  explicit LineForwarder(std::vector<Stream> streams)
      : streams_(std::move(streams)) {
    CHECK_EQ(::pipe2(stop_pipe_, O_CLOEXEC), 0);
    thread_ = std::thread([this] { Loop(); });
  }
  ~LineForwarder() {
    Stop();
    ::close(stop_pipe_[0]);
    ::close(stop_pipe_[1]);
  }
  void Stop() {
    if (!thread_.joinable()) return;
    WriteAll(stop_pipe_[1], "x");
    thread_.join();
  }

 private:
  void Flush(Stream& s, bool eof) {
    size_t start = 0;
    for (size_t nl; (nl = s.pending.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      WriteAll(s.out_fd, s.prefix + s.pending.substr(start, nl + 1 - start));
    }
    s.pending.erase(0, start);
    if (eof && !s.pending.empty()) {
      WriteAll(s.out_fd, s.prefix + s.pending + "\n");
      s.pending.clear();
    }
  }

  void Close(Stream& s) {
    Flush(s, /*eof=*/true);
    ::close(s.fd);
    s.fd = -1;
  }

  void Loop() {
    std::optional<Clock::time_point> drain_deadline;
    char buffer[65536];
    while (true) {
      std::vector<pollfd> fds;
      std::vector<Stream*> owners;
      for (Stream& s : streams_) {
        if (s.fd < 0) continue;
        fds.push_back({s.fd, POLLIN, 0});
        owners.push_back(&s);
      }
      if (fds.empty()) return;
      fds.push_back({stop_pipe_[0], POLLIN, 0});
      int wait_ms = -1;
      if (drain_deadline.has_value()) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            *drain_deadline - Clock::now());
        if (left.count() <= 0) break;
        wait_ms = static_cast<int>(left.count());
      }
      int ready = ::poll(fds.data(), fds.size(), wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) break;
      if (fds.back().revents != 0 && !drain_deadline.has_value()) {
        char c;
        (void)!::read(stop_pipe_[0], &c, 1);
        drain_deadline = Clock::now() + std::chrono::seconds(1);
      }
      for (size_t i = 0; i + 1 < fds.size(); ++i) {
        if (fds[i].revents == 0) continue;
        ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          Close(*owners[i]);
          continue;
        }
        owners[i]->pending.append(buffer, static_cast<size_t>(n));
        Flush(*owners[i], /*eof=*/false);
      }
    }
    for (Stream& s : streams_) {
      if (s.fd >= 0) Close(s);
    }
  }

  std::vector<Stream> streams_;
  int stop_pipe_[2];
  std::thread thread_;
};

// Installs the forwarding handler for SIGINT/SIGTERM; restores on exit.
class SignalScope {
 public:
  SignalScope() {
    g_pending_signal = 0;
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = RecordSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_;
  struct sigaction old_term_;
};

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev != nullptr ? absl::StrCat("SIG", abbrev)
                           : absl::StrCat("signal ", sig);
}

// "exited with code 3" / "was killed by SIGSEGV".
std::string DescribeStatus(int status) {
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with code ", WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by ", SignalName(WTERMSIG(status)));
  }
  return absl::StrCat("ended with wait status ", status);
}

int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// The worker environment: ours plus the torchrun variables for `env`.
std::vector<std::string> WorkerEnvironment(const DistEnv& env) {
  std::map<std::string, std::string> set = env.ToEnvVars();
  set[kWorkerMarker] = "1";
  std::vector<std::string> out;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    if (set.count(key) == 0) out.push_back(std::move(entry));
  }
  for (const auto& [key, value] : set) out.push_back(key + "=" + value);
  return out;
}

std::vector<char*> CStrings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void ExecWorker(pid_t parent, int out_fd, int err_fd,
                             const char* program, char* const* argv,
                             char* const* envp) {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGINT, &dfl, nullptr);
  sigaction(SIGTERM, &dfl, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  // A worker must not outlive its launcher.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != parent) _exit(1);
  dup2(out_fd, STDOUT_FILENO);
  dup2(err_fd, STDERR_FILENO);
  execve(program, argv, envp);
  static const char kMsg[] = "launcher: execve failed\n";
  (void)!write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
  _exit(127);
}

void SignalAll(std::vector<Worker>& workers, int sig) {
  for (Worker& w : workers) {
    if (w.running) ::kill(w.pid, sig);
  }
}

}  // namespace

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  auto bad = [](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (o.nproc_per_node < 1) {
    return bad("--nproc_per_node=", o.nproc_per_node, " must be >= 1");
  }
  if (o.nnodes < 1) return bad("--nnodes=", o.nnodes, " must be >= 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return bad("--node_rank=", o.node_rank,
               " is outside [0, --nnodes=", o.nnodes, ")");
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    return bad("--master_port=", o.master_port, " is outside [0, 65535]");
  }
  if (o.master_port == 0 && o.nnodes > 1) {
    return bad(
        "--master_port=0 (pick a free port) needs --nnodes=1; "
        "nodes must agree on the port");
  }
  if (o.master_addr.empty()) return bad("--master_addr is empty");
  return absl::OkStatus();
}

absl::StatusOr<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("socket() failed: ", std::strerror(errno)));
  }
  sockaddr_in addr;
  std::memset(&addr, 0, sizeof(addr));
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot bind a free port: ", std::strerror(err)));
  }
  ::close(fd);
  return static_cast<int>(ntohs(addr.sin_port));
}

namespace {

// RunWorkers with an explicit argv: `exec_path` is what runs, `argv_strings`
// (argv[0] included) what it sees.
absl::StatusOr<int> Supervise(const std::string& exec_path,
                              std::vector<std::string> argv_strings,
                              const LaunchOptions& options) {
  const std::string& program = exec_path;
  VERL_RETURN_IF_ERROR(ValidateLaunchOptions(options));
  int port = options.master_port;
  if (port == 0) {
    VERL_ASSIGN_OR_RETURN(port, PickFreePort());
  }
  const int n = options.nproc_per_node;
  std::vector<char*> argv = CStrings(argv_strings);
  auto say = [&](const std::string& line) {
    WriteAll(options.stderr_fd, "launcher: " + line + "\n");
  };

  SignalScope signals;
  std::vector<Worker> workers(n);
  std::vector<Stream> streams;
  const pid_t self = ::getpid();
  absl::Status start_error;
  for (int i = 0; i < n; ++i) {
    DistEnv env;
    env.rank = options.node_rank * n + i;
    env.world_size = options.nnodes * n;
    env.local_rank = i;
    env.local_world_size = n;
    env.group_rank = options.node_rank;
    env.master_addr = options.master_addr;
    env.master_port = port;
    std::vector<std::string> env_strings = WorkerEnvironment(env);
    std::vector<char*> envp = CStrings(env_strings);
    int out[2], err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
      start_error = absl::UnavailableError(
          absl::StrCat("pipe2 failed: ", std::strerror(errno)));
      break;
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      start_error = absl::UnavailableError(
          absl::StrCat("pipe2 failed: ", std::strerror(errno)));
      ::close(out[0]);
      ::close(out[1]);
      break;
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
      ExecWorker(self, out[1], err[1], program.c_str(), argv.data(),
                 envp.data());
    }
    ::close(out[1]);
    ::close(err[1]);
    if (pid < 0) {
      start_error = absl::UnavailableError(absl::StrCat(
          "fork failed for rank ", env.rank, ": ", std::strerror(errno)));
      ::close(out[0]);
      ::close(err[0]);
      break;
    }
    workers[i] = {env.rank, pid, true, 0};
    const std::string prefix = absl::StrCat("[rank ", env.rank, "] ");
    streams.push_back({out[0], options.stdout_fd, prefix, ""});
    streams.push_back({err[0], options.stderr_fd, prefix, ""});
  }
  LineForwarder forwarder(std::move(streams));

  // Supervise: the first failure (or a signal to us) stops everyone.
  std::optional<std::string> failure;
  int exit_code = 0;
  int forwarded_signal = 0;
  std::optional<Clock::time_point> kill_deadline;
  if (!start_error.ok()) {
    SignalAll(workers, SIGKILL);
    kill_deadline = Clock::now();
  }
  const auto running = [&] {
    int count = 0;
    for (const Worker& w : workers) count += w.running ? 1 : 0;
    return count;
  };
  // One blocking waitpid per worker: exits are queued in the order they
  // happen, so the worker that failed first is the one named, not a peer
  // that failed milliseconds later because of it.
  std::mutex mu;
  std::condition_variable exited;
  std::deque<std::pair<int, int>> exits;  // (worker index, wait status)
  std::vector<std::thread> reapers;
  for (int i = 0; i < n; ++i) {
    if (!workers[i].running) continue;
    reapers.emplace_back([&, i] {
      int status = 0;
      pid_t done;
      do {
        done = ::waitpid(workers[i].pid, &status, 0);
      } while (done < 0 && errno == EINTR);
      std::lock_guard<std::mutex> lock(mu);
      exits.emplace_back(i, done == workers[i].pid ? status : -1);
      exited.notify_one();
    });
  }
  while (running() > 0) {
    if (const int sig = g_pending_signal; sig != 0) {
      g_pending_signal = 0;
      SignalAll(workers, sig);
      if (forwarded_signal == 0) {
        forwarded_signal = sig;
        kill_deadline = Clock::now() + options.grace_period;
      }
    }
    std::deque<std::pair<int, int>> batch;
    {
      std::unique_lock<std::mutex> lock(mu);
      exited.wait_for(lock, std::chrono::milliseconds(10),
                      [&] { return !exits.empty(); });
      batch.swap(exits);
    }
    for (const auto& [index, status] : batch) {
      Worker& w = workers[index];
      w.running = false;
      w.status = status;
      const bool ok = WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0;
      if (!ok && !failure.has_value() && forwarded_signal == 0 &&
          start_error.ok()) {
        failure = absl::StrCat("rank ", w.rank, " (pid ", w.pid, ") ",
                               DescribeStatus(w.status));
        exit_code = ExitCodeOf(w.status);
        const int others = running();
        if (others > 0) {
          say(absl::StrCat(*failure, "; stopping the other ", others,
                           " worker(s)"));
        }
        SignalAll(workers, SIGTERM);
        kill_deadline = Clock::now() + options.grace_period;
      }
    }
    if (kill_deadline.has_value() && Clock::now() >= *kill_deadline) {
      SignalAll(workers, SIGKILL);
    }
  }
  for (std::thread& t : reapers) t.join();
  forwarder.Stop();

  if (!start_error.ok()) return start_error;
  if (failure.has_value()) {
    say(absl::StrCat("job failed: ", *failure));
    return exit_code;
  }
  if (forwarded_signal != 0) {
    say(absl::StrCat("received ", SignalName(forwarded_signal),
                     "; stopped all workers"));
    return 128 + forwarded_signal;
  }
  return 0;
}

}  // namespace

absl::StatusOr<int> RunWorkers(const std::string& program,
                               const std::vector<std::string>& args,
                               const LaunchOptions& options) {
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  return Supervise(program, std::move(argv), options);
}

absl::StatusOr<LaunchResult> MaybeLaunch(int argc, char** argv,
                                         const LaunchOptions& options) {
  const bool external = LaunchedByExternalLauncher();
  if (external || options.nproc_per_node * options.nnodes == 1) {
    if (std::getenv(kWorkerMarker) != nullptr) {
      // Our stdout is a pipe to the launcher: flush whole lines promptly.
      std::setvbuf(stdout, nullptr, _IOLBF, 0);
    }
    return LaunchResult{/*is_worker=*/true, 0};
  }
  // Re-execute this very binary; workers keep the original argv[0].
  VERL_ASSIGN_OR_RETURN(
      int code,
      Supervise("/proc/self/exe", std::vector<std::string>(argv, argv + argc),
                options));
  return LaunchResult{/*is_worker=*/false, code};
}

}  // namespace verl::parallel
