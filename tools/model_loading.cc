// File: tools/model_loading.cc
#include "tools/model_loading.h"

#include <ATen/core/Tensor.h>
#include <glog/logging.h>

#include <map>
#include <utility>

#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/presets.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"

namespace verl::tools {

absl::StatusOr<LoadedModel> LoadModel(const ModelSource& source) {
  const std::string& dir = source.model_dir;
  const std::string& preset = source.preset;
  if (dir.empty() == preset.empty()) {
    return absl::InvalidArgumentError(
        "give exactly one of --model (HF folder) or --preset");
  }
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
