// File: verl/rl/data/sft_dataset.h
//
// verl's single-turn SFT dataset: each row gives a prompt and a response
// (`data.prompt_key` / `response_key`, dotted paths such as
// `extra_info.question`, then `prompt_dict_keys` / `response_dict_keys` to
// descend further). prompt = chat template of [{"role": "user", "content":
// prompt}] with the generation prompt; response = response text + EOS. The
// two are tokenised, concatenated and right-padded to `max_length`.
//
// loss_mask marks exactly the response tokens including the final EOS (verl's
// fsdp_sft_trainer trains the last prompt token instead of the EOS, upstream
// issue #3562; this follows the fix). Position 0 is never a target (no token
// predicts it), so it is never in the mask, even after left truncation.
#ifndef VERL_RL_DATA_SFT_DATASET_H_
#define VERL_RL_DATA_SFT_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer.h"

namespace verl::rl {

enum class SftTruncation { kError, kLeft, kRight };

// "error" | "left" | "right" (data.truncation); anything else is an error.
absl::StatusOr<SftTruncation> ParseSftTruncation(const std::string& name);

struct SftDatasetOptions {
  std::string prompt_key = "question";
  std::string response_key = "answer";
  std::vector<std::string> prompt_dict_keys;
  std::vector<std::string> response_dict_keys;
  int64_t max_length = 1024;
  SftTruncation truncation = SftTruncation::kError;
  int64_t max_samples = -1;  // data.{train,val}_max_samples; -1 = all
  // data.multiturn.enable / messages_key: rows hold a list of chat messages.
  bool multiturn = false;
  std::string messages_key = "messages";
};

// One tokenised sample, every vector of length max_length.
struct SftSample {
  std::vector<int64_t> input_ids;
  std::vector<int64_t> attention_mask;
  std::vector<int64_t> position_ids;  // cumsum(attention_mask) - 1, >= 0
  std::vector<int64_t> loss_mask;     // 1 on trained target tokens
};

// The string at `key` (dotted path) then `dict_keys` inside `row`; numbers
// are converted to text as pandas would print them. Errors name the key.
absl::StatusOr<std::string> ExtractSftField(
    const nlohmann::json& row, const std::string& key,
    const std::vector<std::string>& dict_keys);

// Tokenises one (prompt, response) pair as described in the file comment.
// The overloads without `formatter` compile the chat template per call.
absl::StatusOr<SftSample> MakeSftSample(const models::Tokenizer& tokenizer,
                                        const std::string& prompt,
                                        const std::string& response,
                                        int64_t max_length,
                                        SftTruncation truncation);
absl::StatusOr<SftSample> MakeSftSample(const models::Tokenizer& tokenizer,
                                        const models::ChatFormatter& formatter,
                                        const std::string& prompt,
                                        const std::string& response,
                                        int64_t max_length,
                                        SftTruncation truncation);

// Multi-turn sample (verl's MultiTurnSFTDataset): the chat template of the
// whole conversation, tokenised message by message (each message's part is
// the template output of messages[:i+1] minus that of messages[:i]); the
// tokens of assistant messages after their generation prompt (content, end
// of turn token and what the template appends) are trained.
absl::StatusOr<SftSample> MakeMultiTurnSftSample(
    const models::Tokenizer& tokenizer, const nlohmann::json& messages,
    int64_t max_length, SftTruncation truncation);
absl::StatusOr<SftSample> MakeMultiTurnSftSample(
    const models::Tokenizer& tokenizer, const models::ChatFormatter& formatter,
    const nlohmann::json& messages, int64_t max_length,
    SftTruncation truncation);

class SftDataset {
 public:
  // Reads `files` (.parquet, else JSON Lines) in order (the first
  // max_samples rows when set) and tokenises every row. Errors name the file
  // and row.
  static absl::StatusOr<SftDataset> Load(const std::vector<std::string>& files,
                                         const models::Tokenizer& tokenizer,
                                         const SftDatasetOptions& options);
  // Tokenises in-memory rows; errors name the row index.
  static absl::StatusOr<SftDataset> FromRows(
      const std::vector<nlohmann::json>& rows,
      const models::Tokenizer& tokenizer, const SftDatasetOptions& options);

  int64_t size() const { return static_cast<int64_t>(samples_.size()); }
  const SftSample& sample(int64_t i) const { return samples_[i]; }
  int64_t max_length() const { return max_length_; }

 private:
  std::vector<SftSample> samples_;
  int64_t max_length_ = 0;
};

}  // namespace verl::rl

#endif  // VERL_RL_DATA_SFT_DATASET_H_
