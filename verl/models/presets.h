// File: verl/models/presets.h
//
// Built-in model shapes (random init via CreateModel) for tests, demos and
// benchmarks, so nothing has to be downloaded. Each preset mirrors one HF
// family's structural options (bias, qk-norm, rope scaling, MoE, ...).
#ifndef VERL_MODELS_PRESETS_H_
#define VERL_MODELS_PRESETS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/models/model_config.h"

namespace verl::models {

// Names accepted by MakePreset: tiny-qwen2, qwen2-30m, tiny-qwen3,
// tiny-llama3, tiny-mistral, tiny-qwen2-moe, tiny-qwen3-moe, tiny-deepseek-v3.
std::vector<std::string> PresetNames();

// The preset's config; `vocab_size` > 0 overrides the preset's vocabulary
// (e.g. to match a tokenizer). Unknown name => InvalidArgument listing names.
absl::StatusOr<ModelConfig> MakePreset(const std::string& name,
                                       int64_t vocab_size = 0);

}  // namespace verl::models

#endif  // VERL_MODELS_PRESETS_H_
