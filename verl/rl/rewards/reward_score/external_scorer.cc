// File: verl/rl/rewards/reward_score/external_scorer.cc
#include "verl/rl/rewards/reward_score/external_scorer.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace verl::rl::reward {
namespace {

absl::Status Fail(const std::string& command, const std::string& what) {
  return absl::InternalError(
      absl::StrCat("external reward command '", command, "': ", what));
}

}  // namespace

absl::StatusOr<RewardResult> ParseScoreLine(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  RewardResult r;
  if (j.is_number()) {
    r.score = j.get<double>();
    return r;
  }
  if (!j.is_object() || !j.contains("score") || !j["score"].is_number()) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a number or {\"score\": <number>, ...}, got '",
                     line.substr(0, 200), "'"));
  }
  r.score = j["score"].get<double>();
  for (const auto& [k, v] : j.items()) {
    if (k == "score") continue;
    if (v.is_number()) r.numeric[k] = v.get<double>();
    if (v.is_boolean()) r.numeric[k] = v.get<bool>() ? 1.0 : 0.0;
    if (v.is_string()) r.text[k] = v.get<std::string>();
  }
  return r;
}

absl::StatusOr<std::vector<RewardResult>> RunExternalScorer(
    const std::string& command, const std::vector<ScoreRequest>& requests,
    double timeout_s) {
  std::string input;
  for (const ScoreRequest& q : requests) {
    nlohmann::json line = {{"data_source", q.data_source},
                           {"solution_str", q.solution},
                           {"ground_truth", q.ground_truth},
                           {"extra_info", q.extra_info}};
    input +=
        line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
        "\n";
  }
  // stdin is a socket so writes can use MSG_NOSIGNAL (no SIGPIPE if the
  // command exits without reading).
  int in_fds[2], out_fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, in_fds) != 0 || pipe(out_fds) != 0)
    return Fail(command, "cannot create pipes");
  const pid_t pid = fork();
  if (pid < 0) return Fail(command, "fork failed");
  if (pid == 0) {
    setpgid(0, 0);
    dup2(in_fds[1], STDIN_FILENO);
    dup2(out_fds[1], STDOUT_FILENO);
    close(in_fds[0]);
    close(in_fds[1]);
    close(out_fds[0]);
    close(out_fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  setpgid(pid, pid);
  close(in_fds[1]);
  close(out_fds[1]);
  int to_child = in_fds[0], from_child = out_fds[0];
  fcntl(to_child, F_SETFL, fcntl(to_child, F_GETFL) | O_NONBLOCK);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_s);
  size_t written = 0;
  std::string output;
  bool timed_out = false;
  if (input.empty()) {
    close(to_child);
    to_child = -1;
  }
  while (from_child >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2];
    int n = 0;
    fds[n++] = {from_child, POLLIN, 0};
    if (to_child >= 0) fds[n++] = {to_child, POLLOUT, 0};
    if (poll(fds, n, static_cast<int>(left.count())) < 0 && errno != EINTR)
      break;
    if (to_child >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
      const ssize_t w = send(to_child, input.data() + written,
                             input.size() - written, MSG_NOSIGNAL);
      if (w > 0) written += w;
      if (w < 0 && errno != EAGAIN && errno != EINTR) written = input.size();
      if (written == input.size()) {
        close(to_child);
        to_child = -1;
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t r = read(from_child, buf, sizeof(buf));
      if (r > 0) {
        output.append(buf, r);
      } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
        close(from_child);
        from_child = -1;
      }
    }
  }
  if (to_child >= 0) close(to_child);
  if (from_child >= 0) close(from_child);
  if (timed_out) kill(-pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  if (timed_out) {
    return absl::DeadlineExceededError(
        absl::StrCat("external reward command '", command, "' timed out after ",
                     timeout_s, " s"));
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Fail(command,
                absl::StrCat("exited with status ",
                             WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  }
  std::vector<std::string> lines =
      absl::StrSplit(output, '\n', absl::SkipEmpty());
  if (lines.size() != requests.size()) {
    return Fail(command, absl::StrCat("printed ", lines.size(), " lines for ",
                                      requests.size(), " samples"));
  }
  std::vector<RewardResult> results;
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::StatusOr<RewardResult> r = ParseScoreLine(lines[i]);
    if (!r.ok()) {
      return Fail(command,
                  absl::StrCat("line ", i + 1, ": ", r.status().message()));
    }
    results.push_back(*std::move(r));
  }
  return results;
}

}  // namespace verl::rl::reward
