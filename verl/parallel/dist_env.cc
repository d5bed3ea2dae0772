// File: verl/parallel/dist_env.cc
#include "verl/parallel/dist_env.h"

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::parallel {
namespace {

// Reads an integer variable; `fallback` when unset. `min_value` bounds it.
absl::StatusOr<int> ReadInt(const EnvLookup& lookup, const std::string& name,
                            int fallback, int min_value) {
  std::optional<std::string> value = lookup(name);
  if (!value.has_value()) return fallback;
  int parsed = 0;
  if (!absl::SimpleAtoi(*value, &parsed)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", name, "='", *value, "' is not an integer"));
  }
  if (parsed < min_value) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable ", name, "=", parsed, " must be >= ", min_value));
  }
  return parsed;
}

// Leading integer of Slurm's task-count syntax, e.g. "4(x2)" -> 4.
std::optional<std::string> LeadingInt(std::optional<std::string> value) {
  if (!value.has_value()) return value;
  size_t end = 0;
  while (end < value->size() && (*value)[end] >= '0' && (*value)[end] <= '9') {
    ++end;
  }
  return value->substr(0, end);
}

// Names of the variables one launcher family uses.
struct EnvNames {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
  const char* group_rank;
};

constexpr EnvNames kTorchrun = {"torchrun",         "RANK",
                                "WORLD_SIZE",       "LOCAL_RANK",
                                "LOCAL_WORLD_SIZE", "GROUP_RANK"};
constexpr EnvNames kSlurm = {
    "slurm",         "SLURM_PROCID",          "SLURM_NTASKS",
    "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID"};
constexpr EnvNames kMpi = {"mpi",
                           "OMPI_COMM_WORLD_RANK",
                           "OMPI_COMM_WORLD_SIZE",
                           "OMPI_COMM_WORLD_LOCAL_RANK",
                           "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "OMPI_COMM_WORLD_NODE_RANK"};

absl::StatusOr<DistEnv> ParseWith(const EnvLookup& raw_lookup,
                                  const EnvNames& names) {
  // Slurm writes task counts as "4(x2)"; only the leading number matters.
  EnvLookup lookup = [&](const std::string& name) {
    auto value = raw_lookup(name);
    if (name == kSlurm.local_world_size) return LeadingInt(value);
    return value;
  };
  if (!lookup(names.rank).has_value() ||
      !lookup(names.world_size).has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment sets only one of ", names.rank, " and ", names.world_size,
        "; a ", names.source, " worker needs both"));
  }
  DistEnv env;
  env.source = names.source;
  VERL_ASSIGN_OR_RETURN(env.world_size,
                        ReadInt(lookup, names.world_size, 1, 1));
  VERL_ASSIGN_OR_RETURN(env.rank, ReadInt(lookup, names.rank, 0, 0));
  // Without per-node variables, assume a single node holding every rank.
  const bool has_local = lookup(names.local_world_size).has_value();
  VERL_ASSIGN_OR_RETURN(
      env.local_world_size,
      ReadInt(lookup, names.local_world_size, env.world_size, 1));
  VERL_ASSIGN_OR_RETURN(
      env.local_rank,
      ReadInt(lookup, names.local_rank,
              has_local ? env.rank % env.local_world_size : env.rank, 0));
  VERL_ASSIGN_OR_RETURN(
      env.group_rank,
      ReadInt(lookup, names.group_rank, env.rank / env.local_world_size, 0));
  const bool multi_node = env.world_size > env.local_world_size;
  std::optional<std::string> addr = raw_lookup("MASTER_ADDR");
  if (addr.has_value()) {
    env.master_addr = *addr;
  } else if (multi_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        "environment variable MASTER_ADDR is required for a multi-node job (",
        names.world_size, "=", env.world_size, ", ", names.local_world_size,
        "=", env.local_world_size, ")"));
  }
  VERL_ASSIGN_OR_RETURN(env.master_port,
                        ReadInt(raw_lookup, "MASTER_PORT", 29500, 1));
  VERL_RETURN_IF_ERROR(ValidateDistEnv(env));
  return env;
}

}  // namespace

std::map<std::string, std::string> DistEnv::ToEnvVars() const {
  return {
      {"RANK", absl::StrCat(rank)},
      {"WORLD_SIZE", absl::StrCat(world_size)},
      {"LOCAL_RANK", absl::StrCat(local_rank)},
      {"LOCAL_WORLD_SIZE", absl::StrCat(local_world_size)},
      {"GROUP_RANK", absl::StrCat(group_rank)},
      {"ROLE_RANK", absl::StrCat(rank)},
      {"ROLE_WORLD_SIZE", absl::StrCat(world_size)},
      {"MASTER_ADDR", master_addr},
      {"MASTER_PORT", absl::StrCat(master_port)},
      {"TORCHELASTIC_RESTART_COUNT", "0"},
      {"TORCHELASTIC_MAX_RESTARTS", "0"},
      {"TORCHELASTIC_RUN_ID", "none"},
  };
}

std::string DistEnv::DebugString() const {
  return absl::StrCat("rank=", rank, "/", world_size,
                      " local_rank=", local_rank, "/", local_world_size,
                      " node=", group_rank, " master=", master_addr, ":",
                      master_port, " (", source, ")");
}

absl::Status ValidateDistEnv(const DistEnv& env) {
  auto error = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("distributed environment (", env.source, "): ", parts...));
  };
  if (env.world_size < 1) return error("WORLD_SIZE=", env.world_size, " < 1");
  if (env.rank < 0 || env.rank >= env.world_size) {
    return error("RANK=", env.rank,
                 " is outside [0, WORLD_SIZE=", env.world_size, ")");
  }
  if (env.local_world_size < 1 || env.local_world_size > env.world_size) {
    return error("LOCAL_WORLD_SIZE=", env.local_world_size,
                 " is outside [1, WORLD_SIZE=", env.world_size, "]");
  }
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    return error("LOCAL_RANK=", env.local_rank,
                 " is outside [0, LOCAL_WORLD_SIZE=", env.local_world_size,
                 ")");
  }
  if (env.group_rank < 0) return error("GROUP_RANK=", env.group_rank, " < 0");
  if (env.master_addr.empty()) return error("MASTER_ADDR is empty");
  if (env.master_port < 1 || env.master_port > 65535) {
    return error("MASTER_PORT=", env.master_port, " is outside [1, 65535]");
  }
  return absl::OkStatus();
}

absl::StatusOr<DistEnv> ParseDistEnv(const EnvLookup& lookup) {
  if (lookup(kTorchrun.rank).has_value() ||
      lookup(kTorchrun.world_size).has_value()) {
    return ParseWith(lookup, kTorchrun);
  }
  // Slurm and MPI rank variables are only trusted when the job also names
  // its rendezvous host, so a plain `sbatch` shell is not mistaken for rank 0
  // of a multi-task job.
  if (lookup("MASTER_ADDR").has_value()) {
    if (lookup(kMpi.rank).has_value()) return ParseWith(lookup, kMpi);
    if (lookup(kSlurm.rank).has_value()) return ParseWith(lookup, kSlurm);
  }
  DistEnv env;
  VERL_ASSIGN_OR_RETURN(env.master_port,
                        ReadInt(lookup, "MASTER_PORT", 29500, 1));
  if (auto addr = lookup("MASTER_ADDR"); addr.has_value()) {
    env.master_addr = *addr;
  }
  VERL_RETURN_IF_ERROR(ValidateDistEnv(env));
  return env;
}

absl::StatusOr<DistEnv> DistEnvFromProcessEnv() {
  return ParseDistEnv(
      [](const std::string& name) -> std::optional<std::string> {
        const char* value = std::getenv(name.c_str());
        if (value == nullptr) return std::nullopt;
        return std::string(value);
      });
}

bool LaunchedByExternalLauncher() {
  return std::getenv("RANK") != nullptr || std::getenv("WORLD_SIZE") != nullptr;
}

}  // namespace verl::parallel
