// File: verl/parallel/dist_env.h
//
// The torchrun environment contract (RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR, MASTER_PORT) as a struct: read by
// every process to join the job, written by the launcher for its workers.
// Slurm (SLURM_PROCID/SLURM_NTASKS/...) and Open MPI (OMPI_COMM_WORLD_*) ranks
// are accepted as fallbacks when the torchrun variables are absent; without
// any of them the process is a single-process job (rank 0 of 1).
#ifndef VERL_PARALLEL_DIST_ENV_H_
#define VERL_PARALLEL_DIST_ENV_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace verl::parallel {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;  // Node index (torchrun's GROUP_RANK).
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // TCPStore's default port.
  // Where the values came from: "default", "torchrun", "slurm" or "mpi".
  std::string source = "default";

  bool is_distributed() const { return world_size > 1; }
  // The variables a launcher sets for this worker (torchrun's full set,
  // including ROLE_RANK, ROLE_WORLD_SIZE and TORCHELASTIC_*).
  std::map<std::string, std::string> ToEnvVars() const;
  std::string DebugString() const;
};

// Looks up one variable; returns nullopt when unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;

// Parses and validates the environment seen through `lookup`. Errors are
// InvalidArgument with one line naming the variable and the value.
absl::StatusOr<DistEnv> ParseDistEnv(const EnvLookup& lookup);

// ParseDistEnv over the process environment (getenv).
absl::StatusOr<DistEnv> DistEnvFromProcessEnv();

// True if RANK or WORLD_SIZE is set in the process environment, i.e. an
// external launcher (or ours) already started this process as a worker.
bool LaunchedByExternalLauncher();

// Validates the cross-field invariants of an already-filled DistEnv.
absl::Status ValidateDistEnv(const DistEnv& env);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_DIST_ENV_H_
