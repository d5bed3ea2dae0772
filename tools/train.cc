// File: tools/train.cc
//
// verl's `main_ppo`: resolves the PPO/GRPO trainer configuration from
// --config=<file.textproto>, --flagfile=... and dotted overrides
// (`algorithm.adv_estimator=grpo`, `--trainer.total_epochs=2`), then runs the
// trainer. --print_config prints the resolved tree (text proto) and exits;
// otherwise the tree is validated first (verl's start-up checks; every bad
// key is reported). A bad command line or config prints one line per problem
// on stderr and exits 2; an exception escaping the trainer prints one line
// and exits 1.
#include <cstdlib>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_split.h"
#include "verl/core/cli.h"
#include "verl/core/config_loader.h"
#include "verl/core/main_guard.h"
#include "verl/core/malloc_tuning.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/launcher_flags.h"
#include "verl/rl/trainer/config/config.h"
#include "verl/rl/trainer/train_main.h"

ABSL_FLAG(bool, print_config, false,
          "Print the resolved configuration (text proto) and exit.");

namespace {

constexpr char kUsage[] =
    R"(verl's PPO/GRPO trainer (main_ppo) as one native binary.

Usage:
  train [--config=FILE.textproto] [--flagfile=A.flags,...] [KEY=VALUE ...]
        [--KEY=VALUE ...] [--print_config] [launcher flags]

The configuration is verl's tree (data.*, actor_rollout_ref.*, critic.*,
reward_model.*, algorithm.*, trainer.*, global_profiler.*) with verl's
defaults. Later sources win: built-in defaults, --config (text proto), then
overrides in command-line order, e.g.
  train algorithm.adv_estimator=grpo --actor_rollout_ref.rollout.n=8 \
        trainer.logger=[console,file] actor_rollout_ref.model.path=/models/q
Hydra's +key=v, ++key=v and ~key are accepted; --config-name=ppo_trainer
names the built-in config. --print_config prints the resolved tree and exits.

Launcher flags: --nproc_per_node (default trainer.n_gpus_per_node), --nnodes,
--node_rank, --master_addr, --master_port; or run under torchrun/Slurm/MPI.

Docs: docs/config.md (keys, overrides, differences from verl),
docs/training.md, docs/distributed.md. Example: examples/quickstart.flags.)";

// Prints every line of `status` prefixed with the program name.
int Fail(const absl::Status& status, int code) {
  for (absl::string_view line : absl::StrSplit(status.message(), '\n')) {
    std::cerr << "train: " << line << std::endl;
  }
  return code;
}

// Whether this process is the launcher or rank 0 (prints notices once).
bool IsFirstProcess() {
  const char* rank = std::getenv("RANK");
  return rank == nullptr || std::string(rank) == "0";
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::StatusOr<verl::core::CommandLine> cl =
      verl::core::ParseCommandLine(argc, argv);
  if (!cl.ok()) return Fail(cl.status(), 2);
  if (absl::Status s = verl::core::CheckHydraConfigName(*cl, "ppo_trainer");
      !s.ok()) {
    return Fail(s, 2);
  }
  absl::StatusOr<verl::rl::PpoTrainerConfig> config =
      verl::rl::LoadPpoTrainerConfig(cl->config_file, cl->overrides);
  if (!config.ok()) return Fail(config.status(), 2);
  if (absl::GetFlag(FLAGS_print_config)) {
    std::cout << verl::core::PrintConfig(*config);
    return 0;
  }
  // --nproc_per_node / --nnodes and trainer.n_gpus_per_node / nnodes are
  // one value: validation below checks batch divisibility for the world size
  // the launcher will start.
  const verl::rl::PpoTrainerConfig defaults =
      verl::rl::DefaultPpoTrainerConfig();
  verl::parallel::TrainerProcessCounts counts =
      verl::parallel::ProcessCountsOf(config->trainer(), defaults.trainer());
  const absl::Status reconciled =
      verl::parallel::ReconcileWithLaunchFlags(&counts);
  config->mutable_trainer()->set_n_gpus_per_node(counts.n_gpus_per_node);
  config->mutable_trainer()->set_nnodes(counts.nnodes);
  const absl::Status valid = verl::rl::ValidatePpoTrainerConfig(*config);
  if (!reconciled.ok() || !valid.ok()) {  // every problem, in one run
    if (!reconciled.ok()) Fail(reconciled, 2);
    return valid.ok() ? 2 : Fail(valid, 2);
  }
  if (IsFirstProcess()) {
    for (const std::string& notice :
         verl::rl::PpoTrainerConfigNotices(*config)) {
      std::cerr << "train: notice: " << notice << std::endl;
    }
  }
  // Spawn n_gpus_per_node local workers unless an external launcher already
  // set RANK/WORLD_SIZE.
  verl::parallel::LaunchOptions launch = verl::parallel::LaunchOptionsFromFlags(
      verl::parallel::TrainerLaunchDefaults(counts));
  absl::StatusOr<verl::parallel::LaunchResult> launched =
      verl::parallel::MaybeLaunch(argc, argv, launch);
  if (!launched.ok()) return Fail(launched.status(), 2);
  if (!launched->is_worker) return launched->exit_code;
  return verl::rl::RunTrainer(*config);
}

}  // namespace

int main(int argc, char** argv) {
  // Freed tensors stay in the heap: half of a training step on a VM was
  // page faults (docs/training.md). Workers inherit the variable.
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  return verl::core::GuardMain("train", [&] { return Main(argc, argv); });
}
