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
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/core/batch.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::rl {

struct PromptEncoderOptions {
  std::string prompt_key = "prompt";
  int64_t max_prompt_length = 512;
  std::string truncation = "error";        // error | left | right | middle
  std::string apply_chat_template_kwargs;  // JSON object text, may be empty
  // data.return_raw_chat (on for multi-turn rollouts): also the columns
  // raw_prompt (the row's messages) and agent_name (the row's, or "").
  bool return_raw_chat = false;
};

class PromptEncoder {
 public:
  // `tokenizer` (not null) must outlive the encoder.
  PromptEncoder(const models::Tokenizer* tokenizer,
                PromptEncoderOptions options)
      : tokenizer_(tokenizer),
        chat_formatter_(*tokenizer),
        options_(std::move(options)) {}

  // Token ids of one row's templated prompt (no padding or truncation).
  absl::StatusOr<std::vector<int64_t>> EncodeRow(
      const nlohmann::json& row) const;

  // Rows -> Batch with input_ids/attention_mask/position_ids [B, P] and the
  // non-tensor columns data_source, reward_model, extra_info, uid (from
  // `uids`), plus raw_prompt and agent_name with return_raw_chat.
  absl::StatusOr<core::Batch> Encode(
      const std::vector<nlohmann::json>& rows,
      const std::vector<std::string>& uids) const;

 private:
  const models::Tokenizer* tokenizer_;
  models::ChatFormatter chat_formatter_;  // Compiles each template once.
  PromptEncoderOptions options_;
};

// Looks up a dotted key ("extra_info.answer") in a row; error names the key.
absl::StatusOr<nlohmann::json> GetDotted(const nlohmann::json& row,
                                         const std::string& key);

// Token ids of row `i` of `ids` [B, L] where `mask` is set, in order.
std::vector<int64_t> MaskedIds(const at::Tensor& ids, const at::Tensor& mask,
                               int64_t i);

}  // namespace verl::rl

#endif  // VERL_RL_DATA_PROMPT_ENCODER_H_
