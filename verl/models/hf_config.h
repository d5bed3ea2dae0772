// File: verl/models/hf_config.h
//
// HuggingFace config.json <-> ModelConfig for the supported decoder families
// (Llama, Qwen2, Qwen3, Mistral, Qwen2-MoE, Qwen3-MoE, DeepSeek-V3;
// *ForCausalLM and the *ForTokenClassification value-model variants), and
// generation_config.json <-> GenerationConfig. Family rules HF encodes in
// code rather than keys are applied here: Qwen2 q/k/v projections always
// have bias, Qwen3 has per-head q/k RMSNorm and a 128 head_dim default,
// DeepSeek-V3 routes with sigmoid/noaux_tc only and uses YaRN ("yarn" rope
// scaling is accepted for it alone). RoPE settings are read from the
// top-level `rope_theta` / `rope_scaling` or from transformers v5's
// `rope_parameters`.
//
// Writers take the JSON originally read as a base, keep every key they do not
// model verbatim and only replace the keys whose values changed, so
// load -> save -> load round-trips and unknown keys survive.
#ifndef VERL_MODELS_HF_CONFIG_H_
#define VERL_MODELS_HF_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "verl/models/model_config.h"

namespace verl::models {

// "LlamaForCausalLM", ..., "Qwen3MoeForTokenClassification".
std::vector<std::string> SupportedHfArchitectures();

// config.json object -> ModelConfig. `source` names the file in errors.
// Unknown architecture: InvalidArgument naming it and listing the supported.
absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const nlohmann::json& json,
                                                  absl::string_view source);
// ModelConfig -> config.json object on top of `base` (the JSON read, or {}).
// The architecture written follows model_type and is_value_model.
absl::StatusOr<nlohmann::json> ModelConfigToHfJson(
    const ModelConfig& config,
    const nlohmann::json& base = nlohmann::json::object());

// Reads config.json at `path`; `raw` (optional) receives the JSON as read.
absl::StatusOr<ModelConfig> ReadHfConfig(const std::string& path,
                                         nlohmann::json* raw = nullptr);
// Writes config.json atomically as transformers does (sorted keys, indent 2).
absl::Status WriteHfConfig(
    const std::string& path, const ModelConfig& config,
    const nlohmann::json& base = nlohmann::json::object());

// generation_config.json: special tokens and sampling defaults. Unset
// optionals are keys the file does not have.
struct GenerationConfig {
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;  // int or list in the file
  int64_t pad_token_id = -1;
  std::optional<bool> do_sample;
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
};

absl::StatusOr<GenerationConfig> GenerationConfigFromJson(
    const nlohmann::json& json, absl::string_view source);
nlohmann::json GenerationConfigToJson(
    const GenerationConfig& config,
    const nlohmann::json& base = nlohmann::json::object());
absl::StatusOr<GenerationConfig> ReadGenerationConfig(
    const std::string& path, nlohmann::json* raw = nullptr);
absl::Status WriteGenerationConfig(
    const std::string& path, const GenerationConfig& config,
    const nlohmann::json& base = nlohmann::json::object());

// Every id that ends a response: generation_config's eos list first, then
// config.json's, without duplicates. Sampling and masks must stop on all.
std::vector<int64_t> StopTokenIds(const ModelConfig& config,
                                  const GenerationConfig* generation);

}  // namespace verl::models

#endif  // VERL_MODELS_HF_CONFIG_H_
