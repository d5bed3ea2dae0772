// File: verl/models/vlm/vlm_config.cc
#include "verl/models/vlm/vlm_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "verl/core/status.h"
#include "verl/models/hf_config.h"

namespace verl::models::vlm {
namespace {

using Json = nlohmann::json;

constexpr char kArchitecture25[] = "Qwen2_5_VLForConditionalGeneration";
constexpr char kArchitecture2[] = "Qwen2VLForConditionalGeneration";
// Top-level keys of a VL config that the Qwen2 text reader must not see.
constexpr const char* kVlKeys[] = {
    "vision_config",   "rope_scaling",          "image_token_id",
    "video_token_id",  "vision_start_token_id", "vision_end_token_id",
    "vision_token_id", "text_config",           "rope_parameters"};

absl::Status KeyError(absl::string_view source, absl::string_view key,
                      absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(source, ": key '", key, "': expected ", what));
}

absl::Status ReadInt(const Json& obj, const char* key, absl::string_view source,
                     int64_t* out, bool positive = true) {
  if (!obj.contains(key) || obj[key].is_null()) return absl::OkStatus();
  if (!obj[key].is_number_integer() ||
      (positive && obj[key].get<int64_t>() <= 0)) {
    return KeyError(source, key,
                    positive ? "a positive integer" : "an integer");
  }
  *out = obj[key].get<int64_t>();
  return absl::OkStatus();
}

absl::Status ReadIntList(const Json& obj, const char* key,
                         absl::string_view source, std::vector<int64_t>* out) {
  if (!obj.contains(key)) return absl::OkStatus();
  const Json& v = obj[key];
  if (!v.is_array()) return KeyError(source, key, "a list of integers");
  out->clear();
  for (const Json& x : v) {
    if (!x.is_number_integer()) return KeyError(source, key, "integers");
    out->push_back(x.get<int64_t>());
  }
  return absl::OkStatus();
}

// Qwen2-VL's hidden_act values the tower computes (HF ACT2FN names).
constexpr const char* kQwen2VlActs[] = {"quick_gelu", "gelu",
                                        "gelu_pytorch_tanh", "silu"};

absl::Status ReadPositiveNumber(const Json& obj, const char* key,
                                absl::string_view source, double* out) {
  if (!obj.contains(key) || obj[key].is_null()) return absl::OkStatus();
  if (!obj[key].is_number() || obj[key].get<double>() <= 0) {
    return KeyError(source, key, "a positive number");
  }
  *out = obj[key].get<double>();
  return absl::OkStatus();
}

// Head dim divisible by 4: the 2-D rotary splits it into row and column
// halves of rotate-half pairs.
absl::Status CheckHeads(const VisionConfig& c, absl::string_view src,
                        const char* width_key) {
  if (c.hidden_size % c.num_heads != 0 || c.HeadDim() % 4 != 0) {
    return KeyError(src, width_key,
                    absl::StrCat("a multiple of num_heads (", c.num_heads,
                                 ") whose head_dim is divisible by 4 (2-D "
                                 "rotary); got ",
                                 c.hidden_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<VisionConfig> ParseQwen2Vision(const Json& v,
                                              const std::string& src) {
  VisionConfig c;
  c.variant = VisionVariant::kQwen2Vl;
  c.hidden_act = "quick_gelu";
  c.hidden_size = 1280;
  c.out_hidden_size = 3584;
  for (auto [key, out] :
       {std::make_pair("depth", &c.depth),
        std::make_pair("embed_dim", &c.hidden_size),
        std::make_pair("hidden_size", &c.out_hidden_size),
        std::make_pair("num_heads", &c.num_heads),
        std::make_pair("patch_size", &c.patch_size),
        std::make_pair("temporal_patch_size", &c.temporal_patch_size),
        std::make_pair("spatial_merge_size", &c.spatial_merge_size),
        std::make_pair("in_chans", &c.in_chans),
        std::make_pair("in_channels", &c.in_chans)}) {
    VERL_RETURN_IF_ERROR(ReadInt(v, key, src, out));
  }
  VERL_RETURN_IF_ERROR(ReadPositiveNumber(v, "mlp_ratio", src, &c.mlp_ratio));
  // HF: int(embed_dim * mlp_ratio).
  c.intermediate_size =
      static_cast<int64_t>(static_cast<double>(c.hidden_size) * c.mlp_ratio);
  if (c.intermediate_size <= 0) {
    return KeyError(src, "mlp_ratio", "embed_dim * mlp_ratio >= 1");
  }
  if (v.contains("hidden_act")) {
    const Json& act = v["hidden_act"];
    if (!act.is_string() ||
        std::find(std::begin(kQwen2VlActs), std::end(kQwen2VlActs),
                  act.get<std::string>()) == std::end(kQwen2VlActs)) {
      return KeyError(src, "hidden_act",
                      absl::StrCat("one of ", absl::StrJoin(kQwen2VlActs, ", "),
                                   " (Qwen2-VL); got ", act.dump()));
    }
    c.hidden_act = act.get<std::string>();
  }
  VERL_RETURN_IF_ERROR(CheckHeads(c, src, "embed_dim"));
  return c;
}

absl::StatusOr<VisionConfig> ParseVision(const Json& v,
                                         const std::string& source,
                                         VisionVariant variant) {
  if (!v.is_object()) return KeyError(source, "vision_config", "an object");
  const std::string src = source + ": vision_config";
  if (variant == VisionVariant::kQwen2Vl) return ParseQwen2Vision(v, src);
  VisionConfig c;
  for (auto [key, out] :
       {std::make_pair("depth", &c.depth),
        std::make_pair("hidden_size", &c.hidden_size),
        std::make_pair("num_heads", &c.num_heads),
        std::make_pair("intermediate_size", &c.intermediate_size),
        std::make_pair("patch_size", &c.patch_size),
        std::make_pair("temporal_patch_size", &c.temporal_patch_size),
        std::make_pair("spatial_merge_size", &c.spatial_merge_size),
        std::make_pair("window_size", &c.window_size),
        std::make_pair("out_hidden_size", &c.out_hidden_size),
        std::make_pair("in_chans", &c.in_chans),
        std::make_pair("in_channels", &c.in_chans),
        std::make_pair("tokens_per_second", &c.tokens_per_second)}) {
    VERL_RETURN_IF_ERROR(ReadInt(v, key, src, out));
  }
  VERL_RETURN_IF_ERROR(
      ReadIntList(v, "fullatt_block_indexes", src, &c.fullatt_block_indexes));
  if (v.contains("hidden_act")) {
    if (!v["hidden_act"].is_string() || v["hidden_act"] != "silu") {
      return KeyError(src, "hidden_act", "\"silu\" (Qwen2.5-VL)");
    }
  }
  VERL_RETURN_IF_ERROR(CheckHeads(c, src, "hidden_size"));
  for (int64_t b : c.fullatt_block_indexes) {
    if (b < 0 || b >= c.depth) {
      return KeyError(src, "fullatt_block_indexes",
                      absl::StrCat("block indexes below depth ", c.depth));
    }
  }
  const int64_t unit = c.spatial_merge_size * c.patch_size;
  if (c.window_size % unit != 0) {
    return KeyError(src, "window_size",
                    absl::StrCat("a multiple of spatial_merge_size * "
                                 "patch_size = ",
                                 unit));
  }
  return c;
}

}  // namespace

absl::StatusOr<VlmConfig> VlmConfigFromHfJson(const Json& json,
                                              absl::string_view source) {
  const std::string src(source);
  if (!json.is_object()) return KeyError(src, "<root>", "an object");
  VlmConfig c;
  std::string arch;
  if (json.contains("architectures") && json["architectures"].is_array() &&
      !json["architectures"].empty() && json["architectures"][0].is_string()) {
    arch = json["architectures"][0].get<std::string>();
  }
  const std::string model_type =
      json.contains("model_type") && json["model_type"].is_string()
          ? json["model_type"].get<std::string>()
          : "";
  // model_type decides; the architecture when model_type names neither.
  VisionVariant variant;
  if (model_type == "qwen2_5_vl" ||
      (model_type != "qwen2_vl" && arch == kArchitecture25)) {
    variant = VisionVariant::kQwen2_5Vl;
    c.architecture = kArchitecture25;
    c.model_type = "qwen2_5_vl";
  } else if (model_type == "qwen2_vl" || arch == kArchitecture2) {
    variant = VisionVariant::kQwen2Vl;
    c.architecture = kArchitecture2;
    c.model_type = "qwen2_vl";
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        src, ": architecture '", arch, "' (model_type '", model_type,
        "') is not a supported vision-language model; supported: ",
        kArchitecture25, " (qwen2_5_vl), ", kArchitecture2, " (qwen2_vl)"));
  }
  // The text model: transformers v5 nests it in text_config.
  Json text = json.contains("text_config") && json["text_config"].is_object()
                  ? json["text_config"]
                  : json;
  const Json& rope_src = text.contains("rope_scaling") ? text["rope_scaling"]
                         : json.contains("rope_scaling")
                             ? json["rope_scaling"]
                             : text.value("rope_parameters", Json());
  double rope_theta = 0;
  if (text.contains("rope_parameters") && text["rope_parameters"].is_object() &&
      text["rope_parameters"].contains("rope_theta")) {
    rope_theta = text["rope_parameters"].value("rope_theta", 0.0);
  }
  std::vector<int64_t> section;
  if (rope_src.is_object()) {
    VERL_RETURN_IF_ERROR(ReadIntList(rope_src, "mrope_section",
                                     src + ": rope_scaling", &section));
  }
  for (const char* key : kVlKeys) text.erase(key);
  text["architectures"] = Json::array({"Qwen2ForCausalLM"});
  text["model_type"] = "qwen2";
  if (rope_theta > 0) text["rope_theta"] = rope_theta;
  VERL_ASSIGN_OR_RETURN(c.text, ModelConfigFromHfJson(text, src));
  if (section.size() != 3 ||
      std::accumulate(section.begin(), section.end(), int64_t{0}) * 2 !=
          c.text.HeadDim()) {
    return KeyError(src, "rope_scaling.mrope_section",
                    absl::StrCat("3 integers summing to head_dim / 2 = ",
                                 c.text.HeadDim() / 2));
  }
  c.text.mrope_section = section;
  for (auto [key, out] :
       {std::make_pair("image_token_id", &c.image_token_id),
        std::make_pair("video_token_id", &c.video_token_id),
        std::make_pair("vision_start_token_id", &c.vision_start_token_id),
        std::make_pair("vision_end_token_id", &c.vision_end_token_id)}) {
    VERL_RETURN_IF_ERROR(ReadInt(json, key, src, out));
  }
  if (!json.contains("vision_config")) {
    return KeyError(src, "vision_config", "an object");
  }
  VERL_ASSIGN_OR_RETURN(c.vision,
                        ParseVision(json["vision_config"], src, variant));
  if (c.vision.out_hidden_size != c.text.hidden_size) {
    return KeyError(src,
                    c.vision.IsQwen2Vl() ? "vision_config.hidden_size"
                                         : "vision_config.out_hidden_size",
                    absl::StrCat("the text hidden_size ", c.text.hidden_size));
  }
  return c;
}

absl::StatusOr<Json> VlmConfigToHfJson(const VlmConfig& c, const Json& base) {
  Json text_base = base.is_object() ? base : Json::object();
  for (const char* key : kVlKeys) text_base.erase(key);
  text_base["architectures"] = Json::array({"Qwen2ForCausalLM"});
  text_base["model_type"] = "qwen2";
  ModelConfig text = c.text;
  text.mrope_section.clear();
  VERL_ASSIGN_OR_RETURN(Json out, ModelConfigToHfJson(text, text_base));
  for (const char* key : kVlKeys) {
    if (base.is_object() && base.contains(key)) out[key] = base[key];
  }
  out.erase("text_config");  // written flat, as transformers 4.x does
  out["architectures"] = Json::array({c.architecture});
  out["model_type"] = c.model_type;
  Json& rope = out["rope_scaling"];
  if (!rope.is_object()) rope = Json::object();
  rope["type"] = "mrope";
  rope["mrope_section"] = c.text.mrope_section;
  out["image_token_id"] = c.image_token_id;
  out["video_token_id"] = c.video_token_id;
  out["vision_start_token_id"] = c.vision_start_token_id;
  out["vision_end_token_id"] = c.vision_end_token_id;
  Json& v = out["vision_config"];
  if (!v.is_object()) v = Json::object();
  const VisionConfig& vc = c.vision;
  // HF's class names the key in_channels, released configs in_chans: the
  // one the base has, else in_chans.
  const char* chans = v.contains("in_channels") ? "in_channels" : "in_chans";
  v["depth"] = vc.depth;
  v["num_heads"] = vc.num_heads;
  v["patch_size"] = vc.patch_size;
  v["temporal_patch_size"] = vc.temporal_patch_size;
  v["spatial_merge_size"] = vc.spatial_merge_size;
  v[chans] = vc.in_chans;
  v["hidden_act"] = vc.hidden_act;
  if (vc.IsQwen2Vl()) {
    v["embed_dim"] = vc.hidden_size;
    v["hidden_size"] = vc.out_hidden_size;
    if (vc.mlp_ratio == std::floor(vc.mlp_ratio)) {
      v["mlp_ratio"] = static_cast<int64_t>(vc.mlp_ratio);
    } else {
      v["mlp_ratio"] = vc.mlp_ratio;
    }
    return out;
  }
  v["hidden_size"] = vc.hidden_size;
  v["intermediate_size"] = vc.intermediate_size;
  v["window_size"] = vc.window_size;
  v["fullatt_block_indexes"] = vc.fullatt_block_indexes;
  v["out_hidden_size"] = vc.out_hidden_size;
  v["tokens_per_second"] = vc.tokens_per_second;
  return out;
}

std::vector<std::string> VlmPresetNames() {
  return {"tiny-qwen2.5-vl", "tiny-qwen2.5-vl-wide", "tiny-qwen2-vl"};
}

absl::StatusOr<VlmConfig> MakeVlmPreset(const std::string& name) {
  const std::vector<std::string> names = VlmPresetNames();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown vision-language preset '", name,
                     "'; known: ", absl::StrJoin(VlmPresetNames(), ", ")));
  }
  // tiny-qwen2's language model (~1M parameters) with a 4-block vision
  // tower; special tokens at the top of the 1024-token vocabulary.
  VlmConfig c;
  ModelConfig& t = c.text;
  t.architecture = "Qwen2ForCausalLM";
  t.model_type = "qwen2";
  t.vocab_size = 1024;
  t.hidden_size = 128;
  t.intermediate_size = 352;
  t.num_hidden_layers = 4;
  t.num_attention_heads = 4;
  t.num_key_value_heads = 2;
  t.max_position_embeddings = 4096;
  t.rope_theta = 1000000.0;
  t.tie_word_embeddings = true;
  t.attention_bias = true;
  t.mrope_section = {4, 6, 6};  // head_dim 32: 16 frequencies
  t.eos_token_ids = {t.vocab_size - 1};
  t.pad_token_id = t.vocab_size - 1;
  c.vision_start_token_id = t.vocab_size - 6;
  c.vision_end_token_id = t.vocab_size - 5;
  c.image_token_id = t.vocab_size - 4;
  c.video_token_id = t.vocab_size - 3;
  VisionConfig& v = c.vision;
  v.depth = 4;
  v.hidden_size = 64;
  v.num_heads = 4;
  v.intermediate_size = 176;
  v.window_size = 56;
  v.fullatt_block_indexes = {1, 3};
  if (name == "tiny-qwen2.5-vl-wide") {
    // The language model twice as wide with head_dim 64 (4 heads of 64,
    // Qwen2.5-VL's sum(mrope_section) == head_dim / 2 at 8/12/12); the
    // vision tower unchanged. For the VLM quickstart: more room per head
    // for the image tokens' content and positions.
    t.hidden_size = 256;
    t.intermediate_size = 704;
    t.mrope_section = {8, 12, 12};
  }
  if (name == "tiny-qwen2-vl") {
    // Qwen2-VL's tower at the same width: LayerNorm blocks with a
    // fc1-QuickGELU-fc2 MLP of 4x, every block over the whole image.
    c.architecture = "Qwen2VLForConditionalGeneration";
    c.model_type = "qwen2_vl";
    v.variant = VisionVariant::kQwen2Vl;
    v.mlp_ratio = 4;
    v.intermediate_size = 256;
    v.hidden_act = "quick_gelu";
  }
  v.out_hidden_size = t.hidden_size;
  return c;
}

}  // namespace verl::models::vlm
