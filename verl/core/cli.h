// File: verl/core/cli.h
//
// Command lines of the verl binaries: absl flags, absl-style flagfiles, and
// verl-style config overrides, in one pass.
//
//   train --config=examples/grpo.textproto --flagfile=a.flags,b.flags
//         --trainer.total_epochs=2 algorithm.adv_estimator=grpo --print_config
//
// * `--flagfile=f1,f2` (or `--flagfile f1`) is expanded in place, recursively,
//   with absl's rules: each line, after leading whitespace, is blank, a `#`
//   comment, or one argument starting with `-` (trailing whitespace dropped).
// * A flag whose name contains a dot (`--a.b.c=value`), a `--key=value` flag
//   that names no absl flag, and a positional `key=value` argument are config
//   overrides, kept in command-line order.
// * Hydra's `--config-name X` / `--config-path P` are collected (see
//   CheckHydraConfigName); keys may contain '-' as in Hydra.
// * Everything else goes to absl::ParseCommandLine; `--config=<file>` (a flag
//   defined here) names the base text-proto file.
#ifndef VERL_CORE_CLI_H_
#define VERL_CORE_CLI_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace verl::core {

// Expands every --flagfile in `args` (args[0], the program, is kept as is).
absl::StatusOr<std::vector<std::string>> ExpandFlagfiles(
    const std::vector<std::string>& args);

struct SplitArgs {
  std::vector<std::string> overrides;  // "a.b.c=value"
  std::vector<std::string> absl_args;  // program name first
  // Hydra's --config-name / --config-path (also --config-dir), verl scripts'
  // way to pick a YAML file; see CheckHydraConfigName.
  std::string hydra_config_name;
  std::string hydra_config_path;
};

// Expands flagfiles and separates config overrides from absl arguments.
absl::StatusOr<SplitArgs> SplitCommandLine(
    const std::vector<std::string>& args);

struct CommandLine {
  std::string config_file;             // --config; empty: none
  std::vector<std::string> overrides;  // in command-line order
  std::string hydra_config_name;       // --config-name; empty: none
  std::string hydra_config_path;       // --config-path; empty: none
};

// OK when Hydra's --config-name is absent or names the binary's built-in
// config (`builtin_name`, e.g. "ppo_trainer", optionally with ".yaml"; a
// --config-path beside it, verl's own config folder, is ignored); else
// InvalidArgument explaining that YAML configs are not read and what to use
// instead.
absl::Status CheckHydraConfigName(const CommandLine& cl,
                                  absl::string_view builtin_name);

// SplitCommandLine, then absl::ParseCommandLine on the rest (which handles
// --help and exits on unknown flags, as absl does). Leftover positional
// arguments are an error. Under `bazel run` (BUILD_WORKING_DIRECTORY set) it
// first changes to the directory bazel was run from, so relative paths on
// the command line and in configs mean what the user typed.
absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv);

}  // namespace verl::core

#endif  // VERL_CORE_CLI_H_
