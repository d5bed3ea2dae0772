// File: tools/sft.cc
//
// verl's `fsdp_sft_trainer`: resolves the SFT configuration from
// --config=<file.textproto>, --flagfile=... and dotted overrides
// (`data.max_length=256`, `--optim.lr=1e-4`), spawns trainer.n_gpus_per_node
// local workers (or --nproc_per_node) unless an external launcher set
// RANK/WORLD_SIZE, and trains (verl/rl/trainer/sft_trainer.h). --print_config
// prints the resolved tree and exits. A bad command line, config or input
// prints one line on stderr and exits 2; other failures exit 1.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/cli.h"
#include "verl/core/config_loader.h"
#include "verl/core/main_guard.h"
#include "verl/core/malloc_tuning.h"
#include "verl/parallel/distributed.h"
#include "verl/parallel/launcher.h"
#include "verl/parallel/launcher_flags.h"
#include "verl/rl/trainer/config/sft_config.h"
#include "verl/rl/trainer/sft_trainer.h"

ABSL_FLAG(bool, print_config, false,
          "Print the resolved configuration (text proto) and exit.");

namespace {

int Fail(const absl::Status& status) {
  std::cerr << "sft: " << status.message() << std::endl;
  const bool bad_input = absl::IsInvalidArgument(status) ||
                         absl::IsNotFound(status) ||
                         absl::IsUnimplemented(status);
  return bad_input ? 2 : 1;
}

}  // namespace

static int Main(int argc, char** argv) {
  absl::StatusOr<verl::core::CommandLine> cl =
      verl::core::ParseCommandLine(argc, argv);
  if (!cl.ok()) return Fail(cl.status());
  if (absl::Status s = verl::core::CheckHydraConfigName(*cl, "sft_trainer");
      !s.ok()) {
    return Fail(s);
  }
  absl::StatusOr<verl::rl::SftTrainerConfig> config =
      verl::rl::LoadSftTrainerConfig(cl->config_file, cl->overrides);
  if (!config.ok()) return Fail(config.status());
  if (absl::GetFlag(FLAGS_print_config)) {
    std::cout << verl::core::PrintConfig(*config);
    return 0;
  }
  // Keys the SFT trainer does not serve (one line each), before any process
  // starts; keys with no effect here get one notice line.
  if (absl::Status s = verl::rl::ValidateSftTrainerConfig(*config); !s.ok()) {
    return Fail(s);
  }
  const char* rank = std::getenv("RANK");
  const std::vector<std::string> inert =
      verl::rl::CheckSftKeyUse(*config).no_effect;
  if (!inert.empty() && (rank == nullptr || std::string(rank) == "0")) {
    std::cerr << "sft: notice: accepted with no effect here: "
              << absl::StrJoin(inert, ", ") << " (docs/config.md lists why)"
              << std::endl;
  }
  // --nproc_per_node / --nnodes and trainer.n_gpus_per_node / nnodes are one
  // value (see ReconcileProcessCounts).
  absl::StatusOr<verl::rl::SftTrainerConfig> built_in =
      verl::rl::LoadSftTrainerConfig("", {});
  if (!built_in.ok()) return Fail(built_in.status());
  verl::parallel::TrainerProcessCounts counts =
      verl::parallel::ProcessCountsOf(config->trainer(), built_in->trainer());
  if (absl::Status s = verl::parallel::ReconcileWithLaunchFlags(&counts);
      !s.ok()) {
    return Fail(s);
  }
  config->mutable_trainer()->set_n_gpus_per_node(counts.n_gpus_per_node);
  config->mutable_trainer()->set_nnodes(counts.nnodes);
  const int64_t sp = config->ulysses_sequence_parallel_size();
  if (sp < 1 || (counts.n_gpus_per_node * counts.nnodes) % sp != 0) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("ulysses_sequence_parallel_size: ", sp,
                     " must be positive and divide the number of processes (",
                     counts.n_gpus_per_node * counts.nnodes, ")")));
  }
  verl::parallel::LaunchOptions launch = verl::parallel::LaunchOptionsFromFlags(
      verl::parallel::TrainerLaunchDefaults(counts));
  absl::StatusOr<verl::parallel::LaunchResult> launched =
      verl::parallel::MaybeLaunch(argc, argv, launch);
  if (!launched.ok()) return Fail(launched.status());
  if (!launched->is_worker) return launched->exit_code;

  absl::StatusOr<verl::parallel::DistributedContext> dist =
      verl::parallel::InitDistributed();
  if (!dist.ok()) return Fail(dist.status());
  absl::StatusOr<verl::rl::SftResult> result =
      verl::rl::RunSftFromConfig(*config, dist->world);
  if (!result.ok()) return Fail(result.status());
  if (dist->env.rank == 0) {
    std::cout << "sft: " << result->global_steps << " steps";
    if (!result->val_losses.empty()) {
      std::cout << ", val/loss " << result->val_losses.front().second
                << " (step " << result->val_losses.front().first << ") -> "
                << result->val_losses.back().second;
    }
    if (!result->final_model_dir.empty()) {
      std::cout << "; saved " << result->final_model_dir;
    }
    std::cout << std::endl;
  }
  return 0;
}

int main(int argc, char** argv) {
  // Freed tensors stay in the heap instead of being faulted in again every
  // step (core/malloc_tuning.h).
  verl::core::ReexecWithHeapRetainingMalloc(argv);
  return verl::core::GuardMain("sft", [&] { return Main(argc, argv); });
}
