// File: verl/parallel/launcher_flags.h
//
// The launcher's command-line flags, shared by every binary that links this
// target: --nproc_per_node, --nnodes, --node_rank, --master_addr,
// --master_port (0 picks a free port) and --launcher_grace_period.
#ifndef VERL_PARALLEL_LAUNCHER_FLAGS_H_
#define VERL_PARALLEL_LAUNCHER_FLAGS_H_

#include "verl/parallel/launcher.h"

namespace verl::parallel {

// LaunchOptions from the parsed flags (call after absl::ParseCommandLine).
LaunchOptions LaunchOptionsFromFlags();

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_LAUNCHER_FLAGS_H_
