// File: verl/core/config_loader.h
//
// Loads a protobuf configuration tree the way verl users configure runs:
// built-in defaults, then a text-proto file, then verl/Hydra-style dotted
// overrides `a.b.c=value`. Generic over google::protobuf::Message (works by
// reflection), so each library keeps its own message and the trainer composes
// them.
//
// Null model: messages are proto2; after MaterializeDefaults every field with
// a non-null default is present, so `has_x() == false` means verl's `null`.
// The override `a.b=null` clears a field (a list: empties it).
//
// Override values:
//   scalars        trainer.total_epochs=3   actor.optim.lr=1e-6
//   strings        trainer.project_name=abc (or quoted: 'a b', "a b")
//   bools          true/false/True/False
//   enums          by value name: data.truncation=left
//   lists          trainer.logger=[console,jsonl]   (replaces the list; a bare
//                  scalar is a one-element list; [] empties it)
//   maps           model.override_config.attn_implementation=sdpa
//   null           clears the field; `{}` also empties a map
// Hydra's prefixes are accepted: `+key=v` and `++key=v` mean `key=v`, `~key`
// means `key=null`.
// A text-proto's repeated (and map) field replaces the list it lands on
// rather than appending to it.
#ifndef VERL_CORE_CONFIG_LOADER_H_
#define VERL_CORE_CONFIG_LOADER_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"

namespace verl::core {

// Sets every unset singular scalar field that has an explicit proto default
// to that default and creates every singular sub-message, recursively.
// Fields without an explicit default stay unset (verl's null).
void MaterializeDefaults(google::protobuf::Message* msg);

// Parses text-proto `text` (named `source` in errors) and merges it into
// `msg`: scalars overwrite, sub-messages merge, repeated/map fields replace.
// Syntax errors and unknown fields: InvalidArgument "source:line:col: ...".
// A comment line `#@null <dotted.key>` sets that key to null afterwards (text
// proto has no null; PrintConfig writes these lines).
absl::Status MergeTextProto(absl::string_view text, absl::string_view source,
                            google::protobuf::Message* msg);

// Reads `path` and merges it as with MergeTextProto.
absl::Status MergeTextProtoFile(const std::string& path,
                                google::protobuf::Message* msg);

// Applies one override "dotted.key=value". Unknown key: InvalidArgument that
// names the key and the nearest valid key; bad value: names the key, the
// value and the expected type.
absl::Status ApplyOverride(absl::string_view override_arg,
                           google::protobuf::Message* msg);

// Applies overrides in order. Every bad override is reported: the error
// holds one line per bad override (the good ones are applied).
absl::Status ApplyOverrides(const std::vector<std::string>& overrides,
                            google::protobuf::Message* msg);

// Every dotted key of `descriptor`: sections, leaf fields, and map fields
// (also as "map.<key>"), in field order.
std::vector<std::string> DottedKeys(const google::protobuf::Descriptor& d);

// The valid dotted key closest to `key`: a key ending in ".<key>" (the user
// left out leading sections) if any, else the one at the smallest edit
// distance if that is at most MaxSuggestionDistance(key); else "" (no
// suggestion beats a misleading one).
std::string NearestKey(const google::protobuf::Descriptor& d,
                       absl::string_view key);

// The largest edit distance a suggestion for `key` may have: 2, or a tenth
// of the key's length for long keys.
int MaxSuggestionDistance(absl::string_view key);

// Levenshtein distance (insert, delete, substitute; all cost 1).
int EditDistance(absl::string_view a, absl::string_view b);

// Where a configuration comes from, in the order applied.
struct ConfigSources {
  std::string defaults_text;  // built-in text-proto (may be empty)
  std::string defaults_name = "<defaults>";
  std::string config_file;             // user text-proto; empty: none
  std::vector<std::string> overrides;  // "a.b.c=value"
};

// MaterializeDefaults, then the sources in order. Errors are annotated with
// where they came from.
absl::Status LoadConfig(const ConfigSources& sources,
                        google::protobuf::Message* msg);

// LoadConfig into a fresh `Config`, then `resolve` (the trainer's derived
// defaults) on success: the body of every Load<X>TrainerConfig.
template <typename Config>
absl::StatusOr<Config> LoadResolvedConfig(const ConfigSources& sources,
                                          void (*resolve)(Config*)) {
  Config config;
  absl::Status status = LoadConfig(sources, &config);
  if (!status.ok()) return status;
  resolve(&config);
  return config;
}

// The value at dotted `key` as an override would spell it: "null" when
// unset, lists as "[a, b]", maps as "{k: v, ...}" (sorted), enums by name,
// bools as true/false, numbers in shortest round-trip form. Unknown key:
// InvalidArgument with the nearest valid key.
absl::StatusOr<std::string> GetConfigValue(const google::protobuf::Message& msg,
                                           absl::string_view key);

// Every leaf key (scalars, lists, maps; not sections) with its value as
// GetConfigValue spells it, in field order: the flat hyper-parameter view
// trackers log.
std::vector<std::pair<std::string, std::string>> FlattenConfig(
    const google::protobuf::Message& msg);

// The tree as text proto: absent fields are null; fields that are null
// although their default is not are listed as `#@null <key>` lines at the
// end, so MergeTextProto of the output reproduces `msg` exactly.
std::string PrintConfig(const google::protobuf::Message& msg);

}  // namespace verl::core

// dst.field <- value while dst.field is null (verl's `${...}` interpolation
// defaults, e.g. critic.ppo_epochs <- actor.ppo_epochs). One statement, so it
// is safe as the body of an unbraced if/else.
#define VERL_INHERIT(dst, field, value)                 \
  do {                                                  \
    if (!(dst).has_##field()) (dst).set_##field(value); \
  } while (0)

#endif  // VERL_CORE_CONFIG_LOADER_H_
