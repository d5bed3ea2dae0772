// File: verl/models/hf_checkpoint.h
//
// HuggingFace model folders: config.json, generation_config.json (optional),
// safetensors weights (model.safetensors or shards with
// model.safetensors.index.json) and tokenizer files. Loading returns HF
// tensor names mapped to views of the memory-mapped files; a second loader
// copies into an existing name -> tensor map one shard at a time, for models
// that must not be held twice. Saving writes the whole folder into a
// temporary sibling and renames it into place, so a reader never sees a
// half-written folder. Load -> save -> load is bit-identical.
#ifndef VERL_MODELS_HF_CHECKPOINT_H_
#define VERL_MODELS_HF_CHECKPOINT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/ckpt/safetensors_sharded.h"
#include "verl/models/hf_config.h"
#include "verl/models/model_config.h"

namespace verl::models {

// Tokenizer / processor files copied along with a model.
const std::vector<std::string>& HfTokenizerFiles();

struct HfCheckpoint {
  ModelConfig config;
  nlohmann::json config_json = nlohmann::json::object();  // as read
  std::optional<GenerationConfig> generation;  // generation_config.json
  nlohmann::json generation_json = nlohmann::json::object();
  std::map<std::string, at::Tensor> tensors;  // HF names
};

// Reads config.json and generation_config.json (if present) only.
absl::StatusOr<HfCheckpoint> LoadHfConfigs(const std::string& dir);

// Reads configs and every tensor (views of the mapped safetensors files).
absl::StatusOr<HfCheckpoint> LoadHfCheckpoint(const std::string& dir);

struct HfLoadIntoOptions {
  bool allow_missing = false;     // names in `dst` absent from the folder
  bool allow_unexpected = false;  // names in the folder absent from `dst`
};

// Copies the folder's tensors into the existing tensors of `dst` (same
// shapes; dtype converted; no autograd), mapping one shard at a time. With
// tie_word_embeddings, a missing "lm_head.weight" is filled from
// "model.embed_tokens.weight" as HF ties it. Errors name the file and tensor.
absl::Status LoadHfWeightsInto(const std::string& dir,
                               std::map<std::string, at::Tensor>* dst,
                               const HfLoadIntoOptions& options = {});

struct HfSaveOptions {
  uint64_t max_shard_size = ckpt::kDefaultMaxShardSize;
  // Folder to copy HfTokenizerFiles() from (those present); empty: none.
  std::string tokenizer_source_dir;
  // Replace an existing `dir` (atomically where the filesystem allows);
  // otherwise an existing `dir` is AlreadyExists.
  bool overwrite = true;
};

// Writes config.json (on top of `ckpt.config_json`), generation_config.json
// (when `ckpt.generation` is set), the weights (sharded above
// max_shard_size, with index; "lm_head.weight" left out when tied to the
// embeddings, as HF does) and the tokenizer files.
absl::Status SaveHfCheckpoint(const std::string& dir, const HfCheckpoint& ckpt,
                              const HfSaveOptions& options = {});

}  // namespace verl::models

#endif  // VERL_MODELS_HF_CHECKPOINT_H_
