// File: verl/models/vlm/vlm_checkpoint.cc
#include "verl/models/vlm/vlm_checkpoint.h"

#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"

namespace verl::models::vlm {
namespace {

constexpr char kConfigFile[] = "config.json";
constexpr char kProcessorFile[] = "preprocessor_config.json";
constexpr char kChatTemplateFile[] = "chat_template.json";
constexpr char kTokenizerFile[] = "tokenizer.json";

std::string Join(const std::string& dir, const char* name) {
  return (std::filesystem::path(dir) / name).string();
}

}  // namespace

absl::StatusOr<std::optional<Tokenizer>> LoadVlmTokenizer(
    const std::string& dir) {
  if (!std::filesystem::exists(Join(dir, kTokenizerFile))) {
    return std::optional<Tokenizer>();
  }
  VERL_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromDirectory(dir));
  const std::string template_path = Join(dir, kChatTemplateFile);
  if (std::filesystem::exists(template_path)) {
    VERL_ASSIGN_OR_RETURN(nlohmann::json t, core::ReadJsonFile(template_path));
    if (!t.is_object() || !t.contains("chat_template") ||
        !t["chat_template"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(template_path, ": needs a string \"chat_template\""));
    }
    // Reload with the processor's template as the default one.
    VERL_ASSIGN_OR_RETURN(
        tok,
        Tokenizer::FromJson(tok.tokenizer_json(), tok.tokenizer_config_json(),
                            t["chat_template"].get<std::string>(),
                            Join(dir, kTokenizerFile)));
  }
  return std::optional<Tokenizer>(std::move(tok));
}

absl::StatusOr<VlmCheckpoint> LoadVlmCheckpoint(const std::string& dir) {
  VlmCheckpoint out;
  const std::string config_path = Join(dir, kConfigFile);
  VERL_ASSIGN_OR_RETURN(out.config_json, core::ReadJsonFile(config_path));
  VERL_ASSIGN_OR_RETURN(VlmConfig config,
                        VlmConfigFromHfJson(out.config_json, config_path));
  const std::string processor_path = Join(dir, kProcessorFile);
  if (std::filesystem::exists(processor_path)) {
    VERL_ASSIGN_OR_RETURN(nlohmann::json json,
                          core::ReadJsonFile(processor_path));
    VERL_ASSIGN_OR_RETURN(out.processor,
                          ImageProcessorConfigFromJson(json, processor_path));
  }
  VERL_ASSIGN_OR_RETURN(out.tokenizer, LoadVlmTokenizer(dir));
  out.model = std::make_shared<Qwen2VLForConditionalGeneration>(config);
  std::map<std::string, at::Tensor> params;
  for (const auto& item : out.model->named_parameters()) {
    params[item.key()] = item.value();
  }
  VERL_RETURN_IF_ERROR(LoadHfWeightsInto(dir, &params));
  return out;
}

absl::Status SaveVlmProcessingFiles(const std::string& dir,
                                    const ImageProcessorConfig& processor,
                                    const Tokenizer* tokenizer) {
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(core::WriteFileAtomic(
      Join(dir, kProcessorFile),
      ImageProcessorConfigToJson(processor).dump(2) + "\n"));
  if (tokenizer == nullptr) return absl::OkStatus();
  VERL_RETURN_IF_ERROR(tokenizer->SaveToDirectory(dir));
  const auto& templates = tokenizer->chat_templates();
  if (auto it = templates.find("default"); it != templates.end()) {
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(
        Join(dir, kChatTemplateFile),
        nlohmann::json{{"chat_template", it->second}}.dump(2) + "\n"));
  }
  return absl::OkStatus();
}

absl::Status SaveVlmCheckpoint(const std::string& dir,
                               const Qwen2VLForConditionalGeneration& model,
                               const ImageProcessorConfig& processor,
                               const nlohmann::json& config_json,
                               const VlmSaveOptions& options) {
  VERL_ASSIGN_OR_RETURN(nlohmann::json config,
                        VlmConfigToHfJson(model.vlm_config(), config_json));
  ckpt::TensorMap tensors;
  for (const auto& item : model.named_parameters()) {
    tensors[item.key()] = item.value().detach();
  }
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(
      ckpt::SaveSafetensorsFolder(dir, tensors, options.max_shard_size));
  VERL_RETURN_IF_ERROR(
      SaveVlmProcessingFiles(dir, processor, options.tokenizer));
  // config.json last: a folder with a config has all its weights.
  return core::WriteFileAtomic(Join(dir, kConfigFile), config.dump(2) + "\n");
}

}  // namespace verl::models::vlm
