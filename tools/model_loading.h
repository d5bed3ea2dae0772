// File: tools/model_loading.h
//
// The model + tokenizer of the serving tools (//tools:generate,
// //tools:serve, //tools:bench_serve): an HF folder (config.json,
// generation_config.json's EOS ids, safetensors weights, its tokenizer if
// present) or a built-in preset with random weights and the built-in
// tokenizer.
#ifndef TOOLS_MODEL_LOADING_H_
#define TOOLS_MODEL_LOADING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "verl/models/decoder.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::tools {

struct ModelSource {
  std::string model_dir;      // HF folder, or
  std::string preset;         // a built-in preset (exactly one of the two)
  std::string tokenizer_dir;  // default: model_dir; built-in for a preset
  uint64_t model_seed = 0;    // init seed of preset weights
};

struct LoadedModel {
  std::shared_ptr<models::CausalLM> model;
  // Unset when an HF folder has no tokenizer and none was named (a warning
  // is logged; only token-id prompts work then).
  std::optional<models::Tokenizer> tokenizer;
};

absl::StatusOr<LoadedModel> LoadModel(const ModelSource& source);

}  // namespace verl::tools

#endif  // TOOLS_MODEL_LOADING_H_
