// File: verl/models/vlm/vlm_config.h
//
// HF Qwen2_5_VLForConditionalGeneration / Qwen2VLForConditionalGeneration
// config.json <-> VlmConfig: the Qwen2 language model as a ModelConfig (with
// M-RoPE's mrope_section), the vision tower's vision_config and the
// multimodal special tokens. The text part is read and written by
// verl/models/hf_config as a Qwen2 config; keys neither side models are kept
// verbatim on save. model_type (else the architecture) picks the vision
// tower's variant.
#ifndef VERL_MODELS_VLM_VLM_CONFIG_H_
#define VERL_MODELS_VLM_VLM_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "verl/models/model_config.h"

namespace verl::models::vlm {

// Which vision tower: Qwen2.5-VL's (RMSNorm, SwiGLU MLP, window attention
// with full attention at fullatt_block_indexes) or Qwen2-VL's (LayerNorm with
// bias, fc1-act-fc2 MLP, every block over the whole image, LayerNorm in the
// merger).
enum class VisionVariant { kQwen2_5Vl, kQwen2Vl };

// HF vision_config of Qwen2.5-VL (Qwen2_5_VLVisionConfig) or Qwen2-VL
// (Qwen2VLVisionConfig). Field names are Qwen2.5-VL's; Qwen2-VL's keys map
// as embed_dim -> hidden_size (the tower width), hidden_size ->
// out_hidden_size (the language model's), int(embed_dim * mlp_ratio) ->
// intermediate_size. window_size, fullatt_block_indexes and
// tokens_per_second are Qwen2.5-VL's only.
struct VisionConfig {
  VisionVariant variant = VisionVariant::kQwen2_5Vl;
  int64_t depth = 32;
  int64_t hidden_size = 1280;
  int64_t num_heads = 16;
  int64_t intermediate_size = 3420;
  int64_t patch_size = 14;
  int64_t temporal_patch_size = 2;
  int64_t spatial_merge_size = 2;
  int64_t window_size = 112;  // in pixels: a window covers window_size^2 px
  std::vector<int64_t> fullatt_block_indexes = {7, 15, 23, 31};
  int64_t out_hidden_size = 3584;  // the language model's hidden size
  int64_t in_chans = 3;
  // Qwen2.5-VL: "silu" (SwiGLU); Qwen2-VL: "quick_gelu" (HF's default),
  // "gelu", "gelu_pytorch_tanh" or "silu" between fc1 and fc2.
  std::string hidden_act = "silu";
  double mlp_ratio = 4;  // Qwen2-VL's key (intermediate_size derives from it)
  int64_t tokens_per_second = 2;
  // RMSNorm (Qwen2.5-VL) / LayerNorm (Qwen2-VL) eps: HF hard-codes 1e-6.
  double rms_norm_eps = 1e-6;

  bool IsQwen2Vl() const { return variant == VisionVariant::kQwen2Vl; }
  // Whether blocks attend inside windows (Qwen2.5-VL) at all.
  bool HasWindows() const { return !IsQwen2Vl(); }
  int64_t HeadDim() const { return hidden_size / num_heads; }
  int64_t MergeUnit() const { return spatial_merge_size * spatial_merge_size; }
  int64_t PatchDim() const {
    return in_chans * temporal_patch_size * patch_size * patch_size;
  }
  bool IsFullAttention(int64_t block) const {
    if (!HasWindows()) return true;
    for (int64_t b : fullatt_block_indexes) {
      if (b == block) return true;
    }
    return false;
  }
};

struct VlmConfig {
  std::string architecture = "Qwen2_5_VLForConditionalGeneration";
  std::string model_type = "qwen2_5_vl";
  ModelConfig text;  // Qwen2 decoder + mrope_section
  VisionConfig vision;
  int64_t image_token_id = 151655;  // <|image_pad|>
  int64_t video_token_id = 151656;
  int64_t vision_start_token_id = 151652;
  int64_t vision_end_token_id = 151653;
};

// config.json object -> VlmConfig; `source` names the file in errors.
absl::StatusOr<VlmConfig> VlmConfigFromHfJson(const nlohmann::json& json,
                                              absl::string_view source);
// VlmConfig -> config.json object on top of `base` (the JSON read, or {}).
absl::StatusOr<nlohmann::json> VlmConfigToHfJson(
    const VlmConfig& config,
    const nlohmann::json& base = nlohmann::json::object());

// Names accepted by MakeVlmPreset: tiny-qwen2.5-vl (the unit tests'),
// tiny-qwen2.5-vl-wide (its language model at hidden 256, head_dim 64,
// mrope_section 8/12/12: the VLM quickstart's), tiny-qwen2-vl (the same
// language model with a 4-block Qwen2-VL tower).
std::vector<std::string> VlmPresetNames();
absl::StatusOr<VlmConfig> MakeVlmPreset(const std::string& name);

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VLM_CONFIG_H_
