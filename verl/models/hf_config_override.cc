// File: verl/models/hf_config_override.cc
#include "verl/models/hf_config_override.h"

#include <cstdint>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "verl/core/status.h"
#include "verl/models/hf_config.h"

namespace verl::models {
namespace {

using Json = nlohmann::json;

// Top-level config.json keys whose override is applied (nested keys under
// rope_scaling / rope_parameters too).
constexpr const char* kApplied[] = {
    "num_hidden_layers",    "max_position_embeddings",
    "rope_theta",           "rope_scaling",
    "rope_parameters",      "sliding_window",
    "use_sliding_window",   "max_window_layers",
    "rms_norm_eps",         "bos_token_id",
    "eos_token_id",         "pad_token_id",
    "num_experts_per_tok",  "norm_topk_prob",
    "router_aux_loss_coef",
};
// Accepted, no effect here.
constexpr const char* kInert[] = {"attn_implementation", "use_cache"};
// Accepted at 0 only.
constexpr const char* kDropout[] = {
    "attention_dropout", "hidden_dropout", "dropout",           "embd_pdrop",
    "resid_pdrop",       "attn_pdrop",     "classifier_dropout"};

template <size_t N>
bool In(const char* const (&list)[N], absl::string_view key) {
  for (const char* k : list) {
    if (key == k) return true;
  }
  return false;
}

// A command-line value as JSON: a number (also Hydra's `0.` / `1e5`), a
// JSON literal, Python's True/False/None, else the string itself.
Json ParseValue(const std::string& text) {
  if (text == "True") return true;
  if (text == "False") return false;
  if (text == "None") return nullptr;
  int64_t i = 0;
  if (absl::SimpleAtoi(text, &i)) return i;
  double d = 0;
  if (absl::SimpleAtod(text, &d)) return d;
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  return parsed.is_discarded() ? Json(text) : parsed;
}

}  // namespace

bool FreezeMoeRouterOverride(
    const std::map<std::string, std::string>& overrides) {
  for (const char* key : {"moe_config.freeze_moe_router",
                          "model_config.moe_config.freeze_moe_router"}) {
    auto it = overrides.find(key);
    if (it != overrides.end() && ParseValue(it->second) == Json(true)) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<ModelConfig> ApplyHfConfigOverrides(
    const ModelConfig& base,
    const std::map<std::string, std::string>& overrides,
    absl::string_view key_prefix) {
  if (overrides.empty()) return base;
  VERL_ASSIGN_OR_RETURN(Json json, ModelConfigToHfJson(base));
  const int64_t layers = base.num_hidden_layers;
  for (const auto& [raw_key, text] : overrides) {
    const std::string name = absl::StrCat(key_prefix, ".", raw_key);
    absl::string_view key = raw_key;
    absl::ConsumePrefix(&key, "model_config.");  // verl's Megatron form
    const std::vector<std::string> path = absl::StrSplit(key, '.');
    const Json value = ParseValue(text);
    if (In(kInert, path[0])) continue;
    if (path[0] == "moe_config" && key == "moe_config.freeze_moe_router") {
      // Not an HF config key: the trainer reads it (FreezeMoeRouterOverride).
      if (value.is_boolean()) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "=", text, "': expected True or False"));
    }
    if (In(kDropout, path[0])) {
      if (value.is_number() && value.get<double>() == 0.0) continue;
      return absl::InvalidArgumentError(
          absl::StrCat("'", name, "=", text,
                       "' is not available here: the models have no dropout "
                       "(0 is accepted)"));
    }
    if (!In(kApplied, path[0]) ||
        (path.size() > 1 && path[0] != "rope_scaling" &&
         path[0] != "rope_parameters")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", name, "' is not applied here: overridable HF config keys are ",
          absl::StrJoin(kApplied, ", "),
          " (no effect: ", absl::StrJoin(kInert, ", "),
          "; 0 only: ", absl::StrJoin(kDropout, ", "),
          "); keys that change weight shapes do not fit the checkpoint"));
    }
    Json* node = &json;
    for (size_t i = 0; i + 1 < path.size(); ++i) {
      if (!node->contains(path[i]) || !(*node)[path[i]].is_object()) {
        (*node)[path[i]] = Json::object();
      }
      node = &(*node)[path[i]];
    }
    (*node)[path.back()] = value;
  }
  absl::StatusOr<ModelConfig> out =
      ModelConfigFromHfJson(json, absl::StrCat(key_prefix, " (applied)"));
  if (!out.ok()) return out.status();
  if (out->num_hidden_layers > layers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", key_prefix, ".num_hidden_layers=", out->num_hidden_layers,
        "' is more than the model's ", layers,
        " layers (the extra layers would have no weights)"));
  }
  out->is_value_model = base.is_value_model;
  return out;
}

}  // namespace verl::models
