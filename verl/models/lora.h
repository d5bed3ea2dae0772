// File: verl/models/lora.h
//
// LoRA adapters on the decoder's Linear layers, PEFT-compatible: rank r,
// scale lora_alpha / r, A [r, in] kaiming-uniform (a = sqrt(5), i.e.
// U(-1/sqrt(in), 1/sqrt(in))), B [out, r] zeros, base frozen. Adapters can be
// disabled (the reference policy is the base model), merged into and
// unmerged from the base weights, and saved/loaded in PEFT's layout
// (adapter_model.safetensors + adapter_config.json).
//
// In the module tree the adapter of `...q_proj` appears as
// `...q_proj.lora_A.weight` / `...q_proj.lora_B.weight`, next to the
// unchanged HF base names; PEFT's file names are those with the prefix
// "base_model.model.".
#ifndef VERL_MODELS_LORA_H_
#define VERL_MODELS_LORA_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace verl::models {

struct LoraConfig {
  int64_t rank = 0;  // verl lora_rank; 0 = LoRA off
  double alpha = 16.0;
  // Leaf names ("q_proj", "v_proj", ...), full module paths, or
  // {"all-linear"} (every Linear except the output head lm_head / score).
  std::vector<std::string> target_modules = {"all-linear"};
  std::vector<std::string> exclude_modules;  // same matching rules
  std::string base_model_name_or_path;
  std::string task_type = "CAUSAL_LM";  // "TOKEN_CLS" for value models
};

inline constexpr char kPeftPrefix[] = "base_model.model.";

// Attaches adapters (seeded init) to the matching Linear modules and freezes
// every other parameter. Errors: rank <= 0, adapters already attached, a
// target that matches no Linear module.
absl::Status ApplyLora(torch::nn::Module& model, const LoraConfig& config,
                       uint64_t seed);

// Module paths carrying an adapter, in module order.
std::vector<std::string> LoraModulePaths(const torch::nn::Module& model);

// Turns all adapters on/off (off => exactly the base model).
void SetLoraEnabled(torch::nn::Module& model, bool enabled);

// Disables adapters for its lifetime (reference-policy forward).
class ScopedLoraDisabled {
 public:
  explicit ScopedLoraDisabled(torch::nn::Module& model);
  ~ScopedLoraDisabled();
  ScopedLoraDisabled(const ScopedLoraDisabled&) = delete;
  ScopedLoraDisabled& operator=(const ScopedLoraDisabled&) = delete;

 private:
  torch::nn::Module& model_;
};

// W += scale * B A (merge) / W -= scale * B A (unmerge) for every adapter.
// Errors when there are no adapters or they are already (un)merged.
absl::Status MergeLora(torch::nn::Module& model);
absl::Status UnmergeLora(torch::nn::Module& model);

// Adapter tensors under PEFT names
// ("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"), in
// module order.
std::vector<std::pair<std::string, at::Tensor>> LoraNamedParameters(
    const torch::nn::Module& model);

// adapter_config.json content (target_modules expanded to the sorted leaf
// names that received adapters, as PEFT saves them).
std::string AdapterConfigJson(const LoraConfig& config,
                              const torch::nn::Module& model);
absl::StatusOr<LoraConfig> ParseAdapterConfigJson(const std::string& json,
                                                  const std::string& source);

// Writes `dir`/adapter_model.safetensors and `dir`/adapter_config.json.
absl::Status SaveLoraAdapter(const torch::nn::Module& model,
                             const LoraConfig& config, const std::string& dir);

// Reads a PEFT adapter folder, attaches adapters per its config (if none
// are attached yet) and copies its weights in (verl lora_adapter_path).
absl::StatusOr<LoraConfig> LoadLoraAdapter(torch::nn::Module& model,
                                           const std::string& dir);

}  // namespace verl::models

#endif  // VERL_MODELS_LORA_H_
