// File: tools/model_loading.cc
#include "tools/model_loading.h"

#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/models/vlm/qwen2_vl.h"
#include "verl/models/vlm/vlm_checkpoint.h"
#include "verl/models/vlm/vlm_config.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::tools {
namespace {

bool IsVlmPreset(const std::string& name) {
  const std::vector<std::string> names = models::vlm::VlmPresetNames();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// A vision-language preset, or a folder whose config.json has
// vision_config (as the trainer's policy loader decides).
absl::StatusOr<bool> IsVisionLanguage(const ModelSource& source) {
  if (source.model_dir.empty()) return IsVlmPreset(source.preset);
  const std::string path =
      (std::filesystem::path(source.model_dir) / "config.json").string();
  if (!std::filesystem::exists(path)) return false;  // LoadHfConfigs names it
  VERL_ASSIGN_OR_RETURN(nlohmann::json config, core::ReadJsonFile(path));
  return config.is_object() && config.contains("vision_config");
}

// A vision-language tokenizer folder (chat_template.json as its default
// template when present).
absl::StatusOr<models::Tokenizer> LoadVlmTokenizerDir(const std::string& dir) {
  VERL_ASSIGN_OR_RETURN(std::optional<models::Tokenizer> tok,
                        models::vlm::LoadVlmTokenizer(dir));
  if (tok) return *std::move(tok);
  return models::Tokenizer::FromDirectory(dir);
}

absl::StatusOr<LoadedModel> LoadVlm(const ModelSource& source) {
  const std::string& dir = source.model_dir;
  const std::string& tok_dir = source.tokenizer_dir;
  LoadedModel out;
  if (!source.preset.empty()) {
    VERL_ASSIGN_OR_RETURN(models::vlm::VlmConfig config,
                          models::vlm::MakeVlmPreset(source.preset));
    if (tok_dir.empty()) {
      VERL_ASSIGN_OR_RETURN(out.tokenizer,
                            models::vlm::MakeVlmTokenizer(config));
    } else {
      VERL_ASSIGN_OR_RETURN(out.tokenizer, LoadVlmTokenizerDir(tok_dir));
    }
    // The tokenizer's eos stops too (as the trainer's policy loader adds it).
    std::vector<int64_t>& eos = config.text.eos_token_ids;
    const int64_t tok_eos = out.tokenizer->eos_token_id();
    if (tok_eos >= 0 && std::find(eos.begin(), eos.end(), tok_eos) == eos.end())
      eos.push_back(tok_eos);
    out.model = models::vlm::CreateVlmModel(config, source.model_seed);
    out.image_processor = models::vlm::ImageProcessorConfig();
    return out;
  }
  VERL_ASSIGN_OR_RETURN(models::vlm::VlmCheckpoint ckpt,
                        models::vlm::LoadVlmCheckpoint(dir));
  out.model = ckpt.model;
  out.image_processor = ckpt.processor;
  if (!tok_dir.empty()) {
    VERL_ASSIGN_OR_RETURN(out.tokenizer, LoadVlmTokenizerDir(tok_dir));
  } else if (ckpt.tokenizer) {
    out.tokenizer = std::move(ckpt.tokenizer);
  } else {
    LOG(WARNING) << "no tokenizer in " << dir
                 << "; only token-id prompts will work";
  }
  return out;
}

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const ModelSource& source) {
  const std::string& dir = source.model_dir;
  const std::string& preset = source.preset;
  if (dir.empty() == preset.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --model (HF folder) or --preset");
  }
  VERL_ASSIGN_OR_RETURN(bool vision_language, IsVisionLanguage(source));
  if (vision_language) return LoadVlm(source);
  LoadedModel out;
  std::string tok_dir = source.tokenizer_dir;
  if (!dir.empty() && tok_dir.empty()) tok_dir = dir;
  if (!tok_dir.empty()) {
    auto tok = models::Tokenizer::FromDirectory(tok_dir);
    if (tok.ok()) {
      out.tokenizer = std::move(*tok);
    } else if (!source.tokenizer_dir.empty()) {
      return tok.status();
    } else {
      LOG(WARNING) << "no tokenizer in " << tok_dir << " ("
                   << tok.status().message()
                   << "); only token-id prompts will work";
    }
  } else {
    out.tokenizer = models::MakeBuiltinTokenizer();
  }
  if (!preset.empty()) {
    const int64_t vocab = out.tokenizer ? out.tokenizer->vocab_size() : 0;
    VERL_ASSIGN_OR_RETURN(models::ModelConfig cfg,
                          models::MakePreset(preset, vocab));
    if (out.tokenizer && out.tokenizer->eos_token_id() >= 0) {
      cfg.eos_token_ids = {out.tokenizer->eos_token_id()};
    }
    out.model = models::CreateModel(cfg, source.model_seed);
    return out;
  }
  VERL_ASSIGN_OR_RETURN(models::HfCheckpoint ckpt, models::LoadHfConfigs(dir));
  models::ModelConfig cfg = ckpt.config;
  if (ckpt.generation && !ckpt.generation->eos_token_ids.empty()) {
    cfg.eos_token_ids = ckpt.generation->eos_token_ids;
  }
  out.model = models::CreateModel(cfg, 0);
  std::map<std::string, at::Tensor> params;
  for (const auto& item : out.model->named_parameters()) {
    params[item.key()] = item.value();
  }
  VERL_RETURN_IF_ERROR(models::LoadHfWeightsInto(dir, &params));
  return out;
}

}  // namespace verl::tools
