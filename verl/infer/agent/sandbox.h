// File: verl/infer/agent/sandbox.h
//
// The code-interpreter tool's sandbox: runs a program (by default
// `/usr/bin/python3 -I -c CODE`) in a child process with
// * no network: its own empty network namespace (unshare CLONE_NEWNET; with
//   a user namespace when not root) — if neither works the run is refused,
// * limits: wall time (the whole process group is killed), CPU time, address
//   space (memory), processes (a fork bomb fails; as root the child drops to
//   `nobody` so the process limit applies), file size, and captured output
//   (stdout/stderr each cut at `max_output_bytes`),
// * a fresh temporary working directory, removed afterwards, and an empty
//   environment except PATH/LANG.
// Every limit hit ends with a result that says which, never a hang.
#ifndef VERL_INFER_AGENT_SANDBOX_H_
#define VERL_INFER_AGENT_SANDBOX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::infer::agent {

struct SandboxLimits {
  double wall_time_s = 10.0;
  int64_t cpu_time_s = 10;
  int64_t memory_mb = 512;
  int64_t max_processes = 16;
  int64_t max_file_mb = 16;
  int64_t max_output_bytes = 64 * 1024;
  // false: keep the host's network (user command tools, e.g. search).
  bool isolate_network = true;
  // false: keep the caller's user (trusted user command tools that read
  // their own files); the process limit then does not bind root.
  bool drop_privileges = true;
};

struct SandboxResult {
  int exit_code = 0;       // the program's, or -1 when killed by a signal
  int signal = 0;          // the signal that ended it, if any
  bool timed_out = false;  // wall-time limit
  bool output_truncated = false;
  std::string stdout_text;
  std::string stderr_text;
  // One line for the model: "ok", or what went wrong (timeout, killed by
  // signal N (e.g. the memory or CPU limit), exit code N).
  std::string Summary() const;
};

// Runs `argv` (argv[0] an absolute path) with `stdin_text`. Errors only when
// the sandbox itself cannot be set up (e.g. no network isolation possible).
absl::StatusOr<SandboxResult> RunSandboxed(const std::vector<std::string>& argv,
                                           const std::string& stdin_text,
                                           const SandboxLimits& limits);

// The code interpreter: Python `code` in the sandbox.
absl::StatusOr<SandboxResult> RunPythonSandboxed(const std::string& code,
                                                 const SandboxLimits& limits);

}  // namespace verl::infer::agent

#endif  // VERL_INFER_AGENT_SANDBOX_H_
