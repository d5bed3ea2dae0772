// File: verl/models/vlm/vlm_checkpoint.h
//
// HF Qwen2.5-VL folders: config.json (VlmConfig), safetensors weights with
// HF's names (`visual.*`, `model.*`, `lm_head.weight`; sharded with an index
// above max_shard_size) and preprocessor_config.json.
#ifndef VERL_MODELS_VLM_VLM_CHECKPOINT_H_
#define VERL_MODELS_VLM_VLM_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

struct VlmCheckpoint {
  std::shared_ptr<Qwen2VLForConditionalGeneration> model;  // fp32
  nlohmann::json config_json;      // config.json as read (kept on save)
  ImageProcessorConfig processor;  // defaults when the file is absent
  // tokenizer.json (+ tokenizer_config.json) when the folder has them; the
  // processor's chat_template.json, when present, becomes its default
  // template (HF processors prefer it over the tokenizer's).
  std::optional<Tokenizer> tokenizer;
};

// The folder's processing class alone: tokenizer.json (+
// tokenizer_config.json) with chat_template.json, when present, as the
// default template; nullopt without tokenizer.json.
absl::StatusOr<std::optional<Tokenizer>> LoadVlmTokenizer(
    const std::string& dir);

// Reads config.json, preprocessor_config.json (optional) and every weight
// into a new fp32 model. Missing or unexpected tensors are errors naming
// them.
absl::StatusOr<VlmCheckpoint> LoadVlmCheckpoint(const std::string& dir);

struct VlmSaveOptions {
  uint64_t max_shard_size = ckpt::kDefaultMaxShardSize;
  // The processing class saved with the weights as verl's checkpoint
  // manager does (processor.save_pretrained): tokenizer.json,
  // tokenizer_config.json and the processor's chat_template.json (the
  // tokenizer's default template). Null: no tokenizer files.
  const Tokenizer* tokenizer = nullptr;
};

// The processing class beside a model's weights, as verl's checkpoint
// manager writes it (processor.save_pretrained): preprocessor_config.json,
// and with a tokenizer tokenizer.json, tokenizer_config.json and the
// processor's chat_template.json (the tokenizer's default template).
absl::Status SaveVlmProcessingFiles(const std::string& dir,
                                    const ImageProcessorConfig& processor,
                                    const Tokenizer* tokenizer);

// Writes config.json (on top of `config_json`), preprocessor_config.json,
// the tokenizer files (options.tokenizer) and the weights into `dir` (created
// if needed; files replaced atomically one by one).
absl::Status SaveVlmCheckpoint(
    const std::string& dir, const Qwen2VLForConditionalGeneration& model,
    const ImageProcessorConfig& processor,
    const nlohmann::json& config_json = nlohmann::json::object(),
    const VlmSaveOptions& options = {});

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VLM_CHECKPOINT_H_
