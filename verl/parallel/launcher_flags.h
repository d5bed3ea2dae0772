// File: verl/parallel/launcher_flags.h
//
// The launcher's command-line flags, shared by every binary that links this
// target: --nproc_per_node, --nnodes, --node_rank, --master_addr,
// --master_port (0 picks a free port) and --launcher_grace_period.
#ifndef VERL_PARALLEL_LAUNCHER_FLAGS_H_
#define VERL_PARALLEL_LAUNCHER_FLAGS_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
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

// A trainer's process counts as its config states them
// (trainer.n_gpus_per_node, trainer.nnodes); `*_set`: the user gave the key
// (its value differs from the built-in default, verl's 8 and 1).
struct TrainerProcessCounts {
  int64_t n_gpus_per_node = 8;
  bool n_gpus_per_node_set = false;
  int64_t nnodes = 1;
  bool nnodes_set = false;
  bool on_cpu = true;  // trainer.device == cpu
};

// One source of truth for the launcher and the config's validation: a
// launcher flag (--nproc_per_node, --nnodes) given and its config key left at
// the default: the flag's value is written into `counts`; both given and
// different: InvalidArgument naming both. On CPU, n_gpus_per_node left at
// verl's default 8 with fewer than 8 cores (`cpu_cores`) is refused rather
// than oversubscribing the machine (an explicit value is respected).
absl::Status ReconcileProcessCounts(std::optional<int> nproc_per_node_flag,
                                    std::optional<int> nnodes_flag,
                                    int cpu_cores,
                                    TrainerProcessCounts* counts);

// ReconcileProcessCounts with the parsed flags and this machine's cores.
absl::Status ReconcileWithLaunchFlags(TrainerProcessCounts* counts);

// The counts a trainer config's `trainer` section states (its
// n_gpus_per_node, nnodes and device), each `*_set` when it differs from the
// built-in section `defaults`. TrainerSection: the PPO or the SFT trainer's.
template <typename TrainerSection>
TrainerProcessCounts ProcessCountsOf(const TrainerSection& trainer,
                                     const TrainerSection& defaults) {
  TrainerProcessCounts counts;
  counts.n_gpus_per_node = trainer.n_gpus_per_node();
  counts.n_gpus_per_node_set =
      counts.n_gpus_per_node != defaults.n_gpus_per_node();
  counts.nnodes = trainer.nnodes();
  counts.nnodes_set = counts.nnodes != defaults.nnodes();
  counts.on_cpu = trainer.device() == "cpu";
  return counts;
}

// What a trainer gives LaunchOptionsFromFlags: its (reconciled) counts, and a
// free port when it runs on one node.
LaunchFlagDefaults TrainerLaunchDefaults(const TrainerProcessCounts& counts);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_LAUNCHER_FLAGS_H_
