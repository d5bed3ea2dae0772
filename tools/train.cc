// File: tools/train.cc
//
// verl's `main_ppo`: resolves the PPO/GRPO trainer configuration from
// --config=<file.textproto>, --flagfile=... and dotted overrides
// (`algorithm.adv_estimator=grpo`, `--trainer.total_epochs=2`), then runs the
// trainer. --print_config prints the resolved tree (text proto) and exits;
// otherwise the tree is validated first (verl's start-up checks).
// A bad command line or config prints one line on stderr and exits 2.
#include <iostream>

#include "absl/flags/flag.h"
#include "verl/core/cli.h"
#include "verl/core/config_loader.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/launcher_flags.h"
#include "verl/rl/trainer/config.h"
#include "verl/rl/trainer/train_main.h"

ABSL_FLAG(bool, print_config, false,
          "Print the resolved configuration (text proto) and exit.");

int main(int argc, char** argv) {
  absl::StatusOr<verl::core::CommandLine> cl =
      verl::core::ParseCommandLine(argc, argv);
  if (!cl.ok()) {
    std::cerr << "train: " << cl.status().message() << std::endl;
    return 2;
  }
  absl::StatusOr<verl::rl::PpoTrainerConfig> config =
      verl::rl::LoadPpoTrainerConfig(cl->config_file, cl->overrides);
  if (!config.ok()) {
    std::cerr << "train: " << config.status().message() << std::endl;
    return 2;
  }
  if (absl::GetFlag(FLAGS_print_config)) {
    std::cout << verl::core::PrintConfig(*config);
    return 0;
  }
  if (absl::Status valid = verl::rl::ValidatePpoTrainerConfig(*config);
      !valid.ok()) {
    std::cerr << "train: " << valid.message() << std::endl;
    return 2;
  }
  // Spawn trainer.n_gpus_per_node local workers (or --nproc_per_node) unless
  // an external launcher already set RANK/WORLD_SIZE.
  verl::parallel::LaunchFlagDefaults defaults;
  defaults.nproc_per_node =
      static_cast<int>(config->trainer().n_gpus_per_node());
  defaults.nnodes = static_cast<int>(config->trainer().nnodes());
  defaults.free_port_on_one_node = true;
  verl::parallel::LaunchOptions launch =
      verl::parallel::LaunchOptionsFromFlags(defaults);
  absl::StatusOr<verl::parallel::LaunchResult> launched =
      verl::parallel::MaybeLaunch(argc, argv, launch);
  if (!launched.ok()) {
    std::cerr << "train: " << launched.status().message() << std::endl;
    return 2;
  }
  if (!launched->is_worker) return launched->exit_code;
  return verl::rl::RunTrainer(*config);
}
