// File: verl/core/cli.cc
#include "verl/core/cli.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"

ABSL_FLAG(std::string, config, "",
          "Base configuration (text proto); dotted key=value overrides "
          "apply on top of it.");

namespace verl::core {
namespace {

constexpr int kMaxFlagfileDepth = 16;

// For "-x", "--x", "-x=v", "--x=v": the name and whether a value follows.
bool FlagName(const std::string& arg, std::string* name, std::string* value,
              bool* has_value) {
  if (arg.size() < 2 || arg[0] != '-') return false;
  size_t start = arg[1] == '-' ? 2 : 1;
  if (start >= arg.size()) return false;  // "-" or "--"
  const size_t eq = arg.find('=', start);
  *has_value = eq != std::string::npos;
  *name = arg.substr(start, *has_value ? eq - start : std::string::npos);
  *value = *has_value ? arg.substr(eq + 1) : "";
  return true;
}

// Whether `key` looks like a config key: [A-Za-z_][A-Za-z0-9_.-]*, after an
// optional Hydra prefix (+, ++ or ~). Hydra allows '-' inside keys (map
// entries such as `worker_nsight_options.capture-range`).
bool IsConfigKey(absl::string_view key) {
  if (!absl::ConsumePrefix(&key, "++") && !absl::ConsumePrefix(&key, "+")) {
    absl::ConsumePrefix(&key, "~");
  }
  if (key.empty() || !(absl::ascii_isalpha(key[0]) || key[0] == '_')) {
    return false;
  }
  for (char c : key) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') {
      return false;
    }
  }
  return true;
}

// Hydra's --config-name / --config-path / --config-dir (either spelling).
std::string* HydraFlag(const std::string& name, SplitArgs* split) {
  if (name == "config-name" || name == "config_name") {
    return &split->hydra_config_name;
  }
  if (name == "config-path" || name == "config_path" || name == "config-dir" ||
      name == "config_dir") {
    return &split->hydra_config_path;
  }
  return nullptr;
}

absl::Status ExpandFile(const std::string& path, int depth,
                        std::vector<std::string>* out);

// Appends `arg`, expanding it if it is a flagfile flag. `next` supplies the
// value of "--flagfile <files>" (returns false if there is none).
absl::Status ExpandArg(const std::string& arg, int depth,
                       const std::function<bool(std::string*)>& next,
                       std::vector<std::string>* out) {
  std::string name, value;
  bool has_value = false;
  if (!FlagName(arg, &name, &value, &has_value) || name != "flagfile") {
    out->push_back(arg);
    return absl::OkStatus();
  }
  if (!has_value && !next(&value)) {
    return absl::InvalidArgumentError("--flagfile needs a file name");
  }
  if (value.empty()) {
    return absl::InvalidArgumentError("--flagfile needs a file name");
  }
  for (absl::string_view file : absl::StrSplit(value, ',')) {
    if (file.empty()) continue;
    VERL_RETURN_IF_ERROR(ExpandFile(std::string(file), depth + 1, out));
  }
  return absl::OkStatus();
}

absl::Status ExpandFile(const std::string& path, int depth,
                        std::vector<std::string>* out) {
  if (depth > kMaxFlagfileDepth) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flagfile '", path, "': nested more than ", kMaxFlagfileDepth,
        " levels deep (a flagfile including itself?)"));
  }
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("cannot read flagfile '", path, "'"));
  }
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  size_t i = 0;
  auto next = [&](std::string* value) -> bool {
    while (i < lines.size()) {
      std::string v(absl::StripAsciiWhitespace(lines[i++]));
      if (v.empty() || v[0] == '#') continue;
      *value = v;
      return true;
    }
    return false;
  };
  while (i < lines.size()) {
    const int line_number = static_cast<int>(i) + 1;
    const std::string arg(absl::StripAsciiWhitespace(lines[i++]));
    if (arg.empty() || arg[0] == '#') continue;
    if (arg[0] != '-' || arg == "--") {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", line_number, ": flagfile lines must start with '-' (",
          "write overrides as --key=value): '", arg, "'"));
    }
    VERL_RETURN_IF_ERROR(ExpandArg(arg, depth, next, out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandFlagfiles(
    const std::vector<std::string>& args) {
  std::vector<std::string> out;
  size_t i = 0;
  if (!args.empty()) out.push_back(args[i++]);
  auto next = [&](std::string* value) -> bool {
    if (i >= args.size()) return false;
    *value = args[i++];
    return true;
  };
  while (i < args.size()) {
    const std::string& arg = args[i++];
    if (arg == "--") {  // the rest is positional
      out.insert(out.end(), args.begin() + i - 1, args.end());
      break;
    }
    VERL_RETURN_IF_ERROR(ExpandArg(arg, 0, next, &out));
  }
  return out;
}

absl::StatusOr<SplitArgs> SplitCommandLine(
    const std::vector<std::string>& args) {
  VERL_ASSIGN_OR_RETURN(std::vector<std::string> expanded,
                        ExpandFlagfiles(args));
  SplitArgs split;
  bool positional_only = false;
  for (size_t i = 0; i < expanded.size(); ++i) {
    const std::string& arg = expanded[i];
    if (i == 0) {
      split.absl_args.push_back(arg);
      continue;
    }
    std::string name, value;
    bool has_value = false;
    if (!positional_only && arg == "--") {
      positional_only = true;
      split.absl_args.push_back(arg);
      continue;
    }
    if (!positional_only && FlagName(arg, &name, &value, &has_value)) {
      if (std::string* hydra = HydraFlag(name, &split); hydra != nullptr) {
        if (!has_value) {
          if (i + 1 >= expanded.size()) {
            return absl::InvalidArgumentError(
                absl::StrCat("--", name, " needs a value"));
          }
          value = expanded[++i];
        }
        *hydra = value;
        continue;
      }
      // A dotted name, or (as verl's root-level SFT keys are written,
      // `--use_remove_padding=true`) a key=value that names no absl flag.
      if (absl::StrContains(name, '.') ||
          (has_value && IsConfigKey(name) &&
           absl::FindCommandLineFlag(name) == nullptr)) {
        if (!has_value) {
          return absl::InvalidArgumentError(
              absl::StrCat("config override '", arg, "' needs a value: --",
                           name, "=<value>"));
        }
        split.overrides.push_back(absl::StrCat(name, "=", value));
        continue;
      }
      split.absl_args.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    if (!arg.empty() && arg[0] == '~' && eq == std::string::npos &&
        IsConfigKey(arg)) {  // Hydra's `~key` (delete)
      split.overrides.push_back(arg);
      continue;
    }
    if (eq != std::string::npos && IsConfigKey(arg.substr(0, eq))) {
      split.overrides.push_back(arg);
      continue;
    }
    split.absl_args.push_back(arg);
  }
  return split;
}

absl::Status CheckHydraConfigName(const CommandLine& cl,
                                  absl::string_view builtin_name) {
  if (cl.hydra_config_name.empty() && cl.hydra_config_path.empty()) {
    return absl::OkStatus();
  }
  absl::string_view name = cl.hydra_config_name;
  absl::ConsumeSuffix(&name, ".yaml");
  // verl's scripts pair the built-in name with verl's own config folder
  // (--config-path=./config): that is the built-in config.
  if (name.empty() || name == builtin_name) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--config-name=", cl.hydra_config_name,
      cl.hydra_config_path.empty()
          ? ""
          : absl::StrCat(" --config-path=", cl.hydra_config_path),
      ": Hydra YAML configs are not read here; the built-in config is '",
      builtin_name,
      "' (verl's defaults); put your own keys in a text proto "
      "(--config=FILE.textproto) or a flagfile (see docs/config.md)"));
}

absl::StatusOr<CommandLine> ParseCommandLine(int argc, char** argv) {
  if (const char* dir = std::getenv("BUILD_WORKING_DIRECTORY");
      dir != nullptr && *dir != '\0' && chdir(dir) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot change to BUILD_WORKING_DIRECTORY '", dir, "'"));
  }
  VERL_ASSIGN_OR_RETURN(
      SplitArgs split,
      SplitCommandLine(std::vector<std::string>(argv, argv + argc)));
  std::vector<char*> absl_argv;
  for (std::string& a : split.absl_args) absl_argv.push_back(a.data());
  std::vector<char*> positional = absl::ParseCommandLine(
      static_cast<int>(absl_argv.size()), absl_argv.data());
  if (positional.size() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("unexpected argument '", positional[1],
                     "' (config overrides are key=value or --key=value)"));
  }
  CommandLine cl;
  cl.config_file = absl::GetFlag(FLAGS_config);
  cl.overrides = std::move(split.overrides);
  cl.hydra_config_name = std::move(split.hydra_config_name);
  cl.hydra_config_path = std::move(split.hydra_config_path);
  return cl;
}

}  // namespace verl::core
