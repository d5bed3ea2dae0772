// File: verl/models/vlm/vlm_processor.h
//
// The text side of HF's Qwen2_5_VLProcessor and verl's multimodal prompt
// format:
//  - verl's rows carry `<image>` placeholders inside string message
//    contents; RLHFDataset._build_messages turns each content into a list of
//    {"type": "image"} / {"type": "text", "text": ...} items
//    (StructureImagePlaceholders);
//  - the Qwen2-VL chat template renders an image item as
//    <|vision_start|><|image_pad|><|vision_end|>;
//  - the processor then expands the i-th <|image_pad|> into
//    NumImageTokens(image_grid_thw[i]) pads (one per merged 2x2 patch
//    window) before tokenizing (ExpandImagePads).
// VlmProcessor does the three steps plus the image processor, giving the
// prompt's token ids with pixel_values and image_grid_thw.
#ifndef VERL_MODELS_VLM_VLM_PROCESSOR_H_
#define VERL_MODELS_VLM_VLM_PROCESSOR_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_config.h"

namespace verl::models::vlm {

inline constexpr char kImagePadToken[] = "<|image_pad|>";

// HF's chat template of Qwen2-VL / Qwen2.5-VL (chat_template.json): system
// prompt by default, string contents as text, list contents item by item
// (image items as <|vision_start|><|image_pad|><|vision_end|>, with
// "Picture N: " when add_vision_id).
const std::string& Qwen2VLChatTemplate();

// verl RLHFDataset._build_messages: every string content is split at
// "<image>" / "<video>" (kept as {"type": "image"} / {"type": "video"}
// items, empty text pieces dropped); list contents are kept as they are.
nlohmann::json StructureImagePlaceholders(const nlohmann::json& messages);

// Image items in structured `messages` (what the chat template counts:
// type "image", or an "image" / "image_url" key), plus "<image>"
// placeholders in string contents.
int64_t CountImageItems(const nlohmann::json& messages);

// HF processor: the i-th occurrence of `image_token` in `text` becomes
// NumImageTokens(grids[i]) copies. More or fewer occurrences than grids is
// InvalidArgument with both counts.
absl::StatusOr<std::string> ExpandImagePads(
    absl::string_view text, const std::vector<std::array<int64_t, 3>>& grids,
    int64_t merge_size, absl::string_view image_token = kImagePadToken);

// A tokenizer for the tiny presets: the built-in byte-level tokenizer plus
// <|vision_start|>, <|vision_end|>, <|image_pad|> and <|video_pad|> as
// special tokens at `config`'s ids, with Qwen2VLChatTemplate(). The ids
// must lie above the built-in vocabulary and below the model's vocab size.
absl::StatusOr<Tokenizer> MakeVlmTokenizer(const VlmConfig& config);

struct ProcessedPrompt {
  std::string text;  // the rendered prompt, pads expanded
  std::vector<int64_t> input_ids;
  at::Tensor pixel_values;    // [patches, PatchDim] float32; undefined: none
  at::Tensor image_grid_thw;  // [images, 3] int64; undefined: none
};

// verl's per-row `multi_modal_inputs` as a Batch non-tensor value (JSON,
// carried in CBOR between ranks): {"pixel_values": {"dtype": "float32",
// "shape": [patches, PatchDim], "data": <binary, little-endian>},
// "image_grid_thw": [[t, h, w], ...]}.
nlohmann::json MultiModalInputsToJson(const at::Tensor& pixel_values,
                                      const at::Tensor& image_grid_thw);
struct MultiModalInputs {
  at::Tensor pixel_values;    // [patches, PatchDim] float32
  at::Tensor image_grid_thw;  // [images, 3] int64
};
// The inverse; a malformed value is InvalidArgument.
absl::StatusOr<MultiModalInputs> MultiModalInputsFromJson(
    const nlohmann::json& json);
// Rows' inputs concatenated in row order (what a packed forward over the
// rows takes); rows without images (null) contribute nothing. Undefined
// tensors when no row has images.
absl::StatusOr<MultiModalInputs> ConcatMultiModalInputs(
    const std::vector<nlohmann::json>& rows);

// Qwen2_5_VLProcessor for prompts: chat template, image preprocessing, pad
// expansion and tokenization. Cheap to copy; thread-safe.
class VlmProcessor {
 public:
  // `chat_template`: the processor's own template (HF chat_template.json);
  // empty: the tokenizer's.
  VlmProcessor(Tokenizer tokenizer, ImageProcessorConfig image_config,
               const std::string& chat_template = "");

  // `messages` with "<image>" placeholders or structured content; `images`
  // in order of appearance. The number of image items must equal
  // images.size() (InvalidArgument with both counts otherwise).
  // `kwargs_json`: extra template variables (may be empty).
  absl::StatusOr<ProcessedPrompt> ProcessMessages(
      const nlohmann::json& messages, const std::vector<Image>& images,
      bool add_generation_prompt = true,
      absl::string_view kwargs_json = "") const;

  // The processor on already rendered `text` holding one <|image_pad|> per
  // image.
  absl::StatusOr<ProcessedPrompt> ProcessText(
      absl::string_view text, const std::vector<Image>& images) const;

  const Tokenizer& tokenizer() const { return tokenizer_; }
  const ImageProcessorConfig& image_config() const { return image_config_; }

 private:
  Tokenizer tokenizer_;
  ChatFormatter formatter_;
  ImageProcessorConfig image_config_;
};

}  // namespace verl::models::vlm

#endif  // VERL_MODELS_VLM_VLM_PROCESSOR_H_
