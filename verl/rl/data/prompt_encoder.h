// File: verl/rl/data/prompt_encoder.h
//
// Turns dataset rows into the prompt half of verl's layout: the chat
// template of the row's `prompt` messages (add_generation_prompt=True),
// tokenised, then left-padded to max_prompt_length with attention_mask and
// position_ids = clip(cumsum(mask) − 1, 0). Over-long prompts follow
// data.truncation (error | left | right | middle; side = what is kept, as in
// verl's postprocess_data). Also the reverse direction for rewards: decoding
// prompts/responses with special tokens skipped.
#ifndef VERL_RL_DATA_PROMPT_ENCODER_H_
#define VERL_RL_DATA_PROMPT_ENCODER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/core/batch.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/models/vlm/image.h"
#include "verl/models/vlm/image_processor.h"
#include "verl/models/vlm/vlm_processor.h"

namespace verl::rl {

struct PromptEncoderOptions {
  std::string prompt_key = "prompt";
  int64_t max_prompt_length = 512;
  std::string truncation = "error";        // error | left | right | middle
  std::string apply_chat_template_kwargs;  // JSON object text, may be empty
  // data.return_raw_chat (on for multi-turn rollouts): also the columns
  // raw_prompt (the row's messages) and agent_name (the row's, or "").
  bool return_raw_chat = false;
  // Multimodal rows (verl's format): `image_key` (data.image_key) names the
  // row's images column. With `image_processor` set (a vision-language
  // model's preprocessor_config.json) a row with images is processed as
  // verl's RLHFDataset does with a processor: "<image>" placeholders become
  // image content items, the chat template renders them, the images are
  // decoded (within `image_limits`) and preprocessed, and each image's
  // <|image_pad|> is expanded to one pad per merged patch. Without it rows
  // with images are refused.
  std::string image_key = "images";
  std::optional<models::vlm::ImageProcessorConfig> image_processor;
  models::vlm::DecodeLimits image_limits;
};

class PromptEncoder {
 public:
  // `tokenizer` (not null) must outlive the encoder.
  PromptEncoder(const models::Tokenizer* tokenizer,
                PromptEncoderOptions options);

  // Token ids of one row's templated prompt (no padding or truncation;
  // image pads expanded for rows with images).
  absl::StatusOr<std::vector<int64_t>> EncodeRow(
      const nlohmann::json& row) const;
  // The same with the row's images processed (pixel_values/image_grid_thw
  // undefined for rows without images).
  absl::StatusOr<models::vlm::ProcessedPrompt> EncodeRowMultimodal(
      const nlohmann::json& row) const;

  // Rows -> Batch with input_ids/attention_mask/position_ids [B, P] and the
  // non-tensor columns data_source, reward_model, extra_info, uid (from
  // `uids`), plus raw_prompt and agent_name with return_raw_chat, plus
  // multi_modal_inputs (MultiModalInputsToJson, null for rows without
  // images) with an image processor. position_ids stay the text positions;
  // the model derives M-RoPE positions from input_ids and image_grid_thw.
  // Errors name the row (batch index, extra_info.index, data_source).
  absl::StatusOr<core::Batch> Encode(
      const std::vector<nlohmann::json>& rows,
      const std::vector<std::string>& uids) const;

  const PromptEncoderOptions& options() const { return options_; }

 private:
  // The chat template over the row's messages as they are, tokenized.
  absl::StatusOr<std::vector<int64_t>> EncodeText(
      const nlohmann::json& row) const;

  const models::Tokenizer* tokenizer_;
  models::ChatFormatter chat_formatter_;  // Compiles each template once.
  PromptEncoderOptions options_;
  std::optional<models::vlm::VlmProcessor> processor_;
};

// Looks up a dotted key ("extra_info.answer") in a row; error names the key.
absl::StatusOr<nlohmann::json> GetDotted(const nlohmann::json& row,
                                         const std::string& key);

// Token ids of row `i` of `ids` [B, L] where `mask` is set, in order.
std::vector<int64_t> MaskedIds(const at::Tensor& ids, const at::Tensor& mask,
                               int64_t i);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_PROMPT_ENCODER_H_
