// File: verl/parallel/launcher_flags.cc
#include "verl/parallel/launcher_flags.h"

#include <optional>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

// Optional flags: unset (std::nullopt) is told apart from a typed default
// value, so a caller's defaults apply only to flags the user did not give.
ABSL_FLAG(std::optional<int>, nproc_per_node, std::nullopt,
          "Worker processes to start on this node (torchrun's "
          "--nproc-per-node; default 1 or the trainer config's "
          "n_gpus_per_node). Ignored when RANK/WORLD_SIZE are already set.");
ABSL_FLAG(std::optional<int>, nnodes, std::nullopt,
          "Number of nodes in the job (default 1 or the trainer config's "
          "nnodes).");
ABSL_FLAG(int, node_rank, 0, "Index of this node in [0, nnodes).");
ABSL_FLAG(std::string, master_addr, "127.0.0.1",
          "Host of rank 0, where the TCPStore rendezvous runs.");
ABSL_FLAG(std::optional<int>, master_port, std::nullopt,
          "Port of the TCPStore rendezvous (default 29500; for trainers on "
          "one node a free port); 0 picks a free port (one node).");
ABSL_FLAG(absl::Duration, launcher_grace_period, absl::Seconds(5),
          "How long stopped workers get between SIGTERM and SIGKILL.");

namespace verl::parallel {

LaunchOptions LaunchOptionsFromFlags(const LaunchFlagDefaults& defaults) {
  LaunchOptions options;  // its members hold the built-in defaults
  options.nproc_per_node =
      absl::GetFlag(FLAGS_nproc_per_node)
          .value_or(defaults.nproc_per_node.value_or(options.nproc_per_node));
  options.nnodes = absl::GetFlag(FLAGS_nnodes)
                       .value_or(defaults.nnodes.value_or(options.nnodes));
  options.node_rank = absl::GetFlag(FLAGS_node_rank);
  options.master_addr = absl::GetFlag(FLAGS_master_addr);
  const std::optional<int> port = absl::GetFlag(FLAGS_master_port);
  if (port.has_value()) {
    options.master_port = *port;
  } else if (defaults.free_port_on_one_node && options.nnodes == 1) {
    options.master_port = 0;
  }
  options.grace_period = std::chrono::milliseconds(
      absl::ToInt64Milliseconds(absl::GetFlag(FLAGS_launcher_grace_period)));
  return options;
}

LaunchFlagDefaults TrainerLaunchDefaults(const TrainerProcessCounts& counts) {
  LaunchFlagDefaults defaults;
  defaults.nproc_per_node = static_cast<int>(counts.n_gpus_per_node);
  defaults.nnodes = static_cast<int>(counts.nnodes);
  defaults.free_port_on_one_node = true;
  return defaults;
}

namespace {

// `flag` (a launcher flag) and `key` (its config key) describe one count.
absl::Status Reconcile(const char* flag, std::optional<int> flag_value,
                       const char* key, bool key_set, int64_t* value) {
  if (!flag_value.has_value()) return absl::OkStatus();
  if (key_set && *value != *flag_value) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", *flag_value, " disagrees with ", key, "=",
                     *value, ": give one of them (or the same value to both)"));
  }
  *value = *flag_value;
  return absl::OkStatus();
}

}  // namespace

absl::Status ReconcileProcessCounts(std::optional<int> nproc_per_node_flag,
                                    std::optional<int> nnodes_flag,
                                    int cpu_cores,
                                    TrainerProcessCounts* counts) {
  absl::Status s = Reconcile(
      "nproc_per_node", nproc_per_node_flag, "trainer.n_gpus_per_node",
      counts->n_gpus_per_node_set, &counts->n_gpus_per_node);
  if (!s.ok()) return s;
  s = Reconcile("nnodes", nnodes_flag, "trainer.nnodes", counts->nnodes_set,
                &counts->nnodes);
  if (!s.ok()) return s;
  if (counts->on_cpu && !nproc_per_node_flag.has_value() &&
      !counts->n_gpus_per_node_set && cpu_cores > 0 &&
      counts->n_gpus_per_node > cpu_cores) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer.n_gpus_per_node is verl's default ", counts->n_gpus_per_node,
        " (processes per node), but this CPU run has ", cpu_cores,
        " cores: set trainer.n_gpus_per_node=N (or --nproc_per_node=N)"));
  }
  return absl::OkStatus();
}

absl::Status ReconcileWithLaunchFlags(TrainerProcessCounts* counts) {
  return ReconcileProcessCounts(
      absl::GetFlag(FLAGS_nproc_per_node), absl::GetFlag(FLAGS_nnodes),
      static_cast<int>(std::thread::hardware_concurrency()), counts);
}

}  // namespace verl::parallel
