// File: verl/models/vlm/vlm_checkpoint.h
//
// HF Qwen2.5-VL folders: config.json (VlmConfig), safetensors weights with
// HF's names (`visual.*`, `model.*`, `lm_head.weight`; sharded with an index
// above max_shard_size) and preprocessor_config.json.
#ifndef VERL_MODELS_VLM_VLM_CHECKPOINT_H_
#define VERL_MODELS_VLM_VLM_CHECKPOINT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

struct VlmCheckpoint {
  std::shared_ptr<Qwen2VLForConditionalGeneration> model;  // fp32
  nlohmann::json config_json;      // config.json as read (kept on save)
  ImageProcessorConfig processor;  // defaults when the file is absent
};

// Reads config.json, preprocessor_config.json (optional) and every weight
// into a new fp32 model. Missing or unexpected tensors are errors naming
// them.
absl::StatusOr<VlmCheckpoint> LoadVlmCheckpoint(const std::string& dir);

struct VlmSaveOptions {
  uint64_t max_shard_size = ckpt::kDefaultMaxShardSize;
};

// Writes config.json (on top of `config_json`), preprocessor_config.json and
// the weights into `dir` (created if needed; files replaced atomically one
// by one).
absl::Status SaveVlmCheckpoint(
    const std::string& dir, const Qwen2VLForConditionalGeneration& model,
    const ImageProcessorConfig& processor,
    const nlohmann::json& config_json = nlohmann::json::object(),
    const VlmSaveOptions& options = {});

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VLM_CHECKPOINT_H_
