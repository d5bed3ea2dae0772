// File: verl/parallel/launcher_flags.cc
#include "verl/parallel/launcher_flags.h"

#include <string>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(int, nproc_per_node, 1,
          "Worker processes to start on this node (torchrun's "
          "--nproc-per-node). Ignored when RANK/WORLD_SIZE are already set.");
ABSL_FLAG(int, nnodes, 1, "Number of nodes in the job.");
ABSL_FLAG(int, node_rank, 0, "Index of this node in [0, nnodes).");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "Host of rank 0, where the TCPStore rendezvous runs.");
ABSL_FLAG(int, master_port, 29500,
          "Port of the TCPStore rendezvous; 0 picks a free port (one node).");
ABSL_FLAG(absl::Duration, launcher_grace_period, absl::Seconds(5),
          "How long stopped workers get between SIGTERM and SIGKILL.");

namespace verl::parallel {
namespace {

// Whether `flag` was given on the command line (or in a --flagfile).
template <typename T>
bool IsSet(const absl::Flag<T>& flag) {
  return absl::GetFlagReflectionHandle(flag).IsSpecifiedOnCommandLine();
}

}  // namespace

LaunchOptions LaunchOptionsFromFlags(const LaunchFlagDefaults& defaults) {
  LaunchOptions options;
  options.nproc_per_node = absl::GetFlag(FLAGS_nproc_per_node);
  if (!IsSet(FLAGS_nproc_per_node) && defaults.nproc_per_node.has_value()) {
    options.nproc_per_node = *defaults.nproc_per_node;
  }
  options.nnodes = absl::GetFlag(FLAGS_nnodes);
  if (!IsSet(FLAGS_nnodes) && defaults.nnodes.has_value()) {
    options.nnodes = *defaults.nnodes;
  }
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  options.master_port = absl::GetFlag(FLAGS_master_port);
  if (!IsSet(FLAGS_master_port) && defaults.free_port_on_one_node &&
      options.nnodes == 1) {
    options.master_port = 0;
  }
  options.grace_period = std::chrono::milliseconds(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_launcher_grace_period)));
  return options;
}

}  // namespace verl::parallel
