// File: tools/model_loading.h
//
// The model + tokenizer of the serving tools (//tools:generate,
// //tools:serve, //tools:bench_serve): an HF folder (config.json,
// generation_config.json's EOS ids, safetensors weights, its tokenizer if
// present) or a built-in preset with random weights and the built-in
// tokenizer. A vision-language folder (config.json with vision_config:
// Qwen2.5-VL / Qwen2-VL) or VLM preset (tiny-qwen2.5-vl, tiny-qwen2-vl)
// loads as one, with its image processor's config.
#ifndef TOOLS_MODEL_LOADING_H_
#define TOOLS_MODEL_LOADING_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "verl/models/decoder.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image_processor.h"

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
  // Set for a vision-language model: its preprocessor_config.json (HF
  // defaults without one, and for a preset).
  std::optional<models::vlm::ImageProcessorConfig> image_processor;
};

absl::StatusOr<LoadedModel> LoadModel(const ModelSource& source);

}  // namespace verl::tools

#endif  // TOOLS_MODEL_LOADING_H_
