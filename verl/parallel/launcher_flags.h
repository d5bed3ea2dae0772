// File: verl/parallel/launcher_flags.h
//
// The launcher's command-line flags, shared by every binary that links this
// target: --nproc_per_node, --nnodes, --node_rank, --master_addr,
// --master_port (0 picks a free port) and --launcher_grace_period.
#ifndef VERL_PARALLEL_LAUNCHER_FLAGS_H_
#define VERL_PARALLEL_LAUNCHER_FLAGS_H_

#include <optional>

#include "verl/parallel/launcher.h"

namespace verl::parallel {

// Values for the launcher flags the user did not type, e.g. a trainer's
// trainer.n_gpus_per_node / trainer.nnodes. A flag given on the command line
// (or in a --flagfile) always wins, even when it equals the built-in default
// (--nproc_per_node=1, --master_port=29500): the flags are optional-typed, so
// "not given" is not confused with a value.
struct LaunchFlagDefaults {
  std::optional<int> nproc_per_node;
  std::optional<int> nnodes;
  // --master_port not given on a single-node job: 0 (a free port), so that
  // concurrent jobs on one host do not collide.
  bool free_port_on_one_node = false;
};

// LaunchOptions from the parsed flags (call after absl::ParseCommandLine),
// with `defaults` for the flags that were not set.
LaunchOptions LaunchOptionsFromFlags(const LaunchFlagDefaults& defaults = {});

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_LAUNCHER_FLAGS_H_
