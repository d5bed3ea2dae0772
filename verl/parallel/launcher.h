// File: verl/parallel/launcher.h
//
// torchrun inside our binaries. A binary calls MaybeLaunch first thing in
// main(); with `--nproc_per_node=N` (N > 1) and no RANK/WORLD_SIZE in the
// environment it becomes the parent of N workers: it re-executes itself
// (/proc/self/exe, same arguments) with the torchrun environment set
// (DistEnv::ToEnvVars), prefixes every worker output line with "[rank R] ",
// forwards SIGINT/SIGTERM, and when a worker exits non-zero or is killed it
// stops the others (SIGTERM, then SIGKILL after a grace period) and returns a
// non-zero code after one line naming the rank and the reason. Under an
// external launcher (torchrun, Slurm, MPI: RANK or WORLD_SIZE already set) or
// for a single process it returns at once and this process is the worker.
//
//   int main(int argc, char** argv) {
//     absl::ParseCommandLine(argc, argv);
//     auto launch = MaybeLaunch(argc, argv, LaunchOptionsFromFlags());
//     if (!launch.ok()) { LOG(ERROR) << launch.status(); return 1; }
//     if (!launch->is_worker) return launch->exit_code;
//     ... the SPMD program ...
//   }
#ifndef VERL_PARALLEL_LAUNCHER_H_
#define VERL_PARALLEL_LAUNCHER_H_

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace verl::parallel {

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  // 0 picks a free port on this host (single-node jobs only).
  int master_port = 29500;
  // Time between SIGTERM and SIGKILL when stopping workers.
  std::chrono::milliseconds grace_period = std::chrono::seconds(5);
  // Where prefixed worker lines and the launcher's own lines go.
  int stdout_fd = 1;
  int stderr_fd = 2;
};

struct LaunchResult {
  bool is_worker = true;  // true: continue as (the only or a) worker.
  int exit_code = 0;      // Parent only: the code to exit with.
};

// See the file comment. `argv` must be main's unmodified argv.
absl::StatusOr<LaunchResult> MaybeLaunch(int argc, char** argv,
                                         const LaunchOptions& options);

// Runs `options.nproc_per_node` copies of `program` with `args` (argv[1..])
// as ranks node_rank * nproc_per_node + i, supervises them as described
// above and returns the job's exit code: 0 if all succeeded, the failing
// worker's exit code, or 128 + signal. Errors only for bad options or when
// a worker cannot be started.
absl::StatusOr<int> RunWorkers(const std::string& program,
                               const std::vector<std::string>& args,
                               const LaunchOptions& options);

// A TCP port that was free on 127.0.0.1 a moment ago.
absl::StatusOr<int> PickFreePort();

// Checks ranges and cross-field rules; one line naming the flag.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_LAUNCHER_H_
