// File: verl/rl/trainer/config/config_keys.h
//
// What the trainer does with each key of its configuration tree, so that no
// key is accepted and then silently ignored: every leaf of PpoTrainerConfig
// matches one rule (config_keys_test walks the whole schema to prove it):
//   served      read by some code path (the trainer, workers, engine, ...)
//   no effect   accepted, changes nothing here (a GPU engine or memory knob);
//               a run that sets one prints one notice line listing them
//   not served  the feature is not available: a value other than verl's
//               default is refused at start-up with the reason
#ifndef VERL_RL_TRAINER_CONFIG_KEYS_H_
#define VERL_RL_TRAINER_CONFIG_KEYS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message.h"
#include "verl/rl/trainer/config/config.pb.h"

namespace verl::rl {

enum class KeyUse { kServed, kNoEffect, kNotServed };

struct KeyRule {
  // Dotted key or section prefix; a leading "**." matches at any depth
  // (e.g. "**.fsdp_config.wrap_policy" for every role).
  const char* pattern;
  KeyUse use;
  const char* reason;  // why it has no effect / is not served
};

// The table (verl/rl/trainer/config/config_keys.cc).
absl::Span<const KeyRule> PpoKeyRules();

// The most specific rule of `rules` matching dotted leaf `key` (literal
// prefixes beat "**." patterns, longer beats shorter); nullptr if none.
const KeyRule* FindKeyRuleIn(absl::Span<const KeyRule> rules,
                             absl::string_view key);
// FindKeyRuleIn(PpoKeyRules(), key).
const KeyRule* FindKeyRule(absl::string_view key);

// Keys whose value differs from verl's defaults (DefaultPpoTrainerConfig),
// by rule: one error line per not-served key ("'k=v' is not available here:
// reason"), and the no-effect keys (for one notice line).
struct KeyUsage {
  std::vector<std::string> not_served;
  std::vector<std::string> no_effect;
};
KeyUsage CheckKeyUse(const PpoTrainerConfig& config);
// The same for any tree: `defaults` is the tree's resolved defaults.
// `unset_is_default`: a null field or empty list/map counts as its default
// (for trees built in code, where unset fields read as proto defaults).
KeyUsage CheckKeyUseIn(absl::Span<const KeyRule> rules,
                       const google::protobuf::Message& config,
                       const google::protobuf::Message& defaults,
                       bool unset_is_default = false);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_CONFIG_KEYS_H_
