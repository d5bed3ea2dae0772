// File: verl/infer/serve/text_stream.h
//
// One sample's text as its tokens arrive: incremental detokenization (vLLM's
// prefix/read offsets, so a character split over several byte-level tokens
// is emitted only once complete) and stop strings (the text is cut before
// the earliest stop string; text that could still turn into one is held
// back until it cannot). Deltas concatenate to the final text exactly.
#ifndef VERL_INFER_SERVE_TEXT_STREAM_H_
#define VERL_INFER_SERVE_TEXT_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "verl/models/tokenizer/tokenizer.h"

namespace verl::infer::serve {

class TextStream {
 public:
  // `tokenizer` must outlive this. Special tokens (EOS, ...) are skipped.
  TextStream(const models::Tokenizer* tokenizer, std::vector<std::string> stop);

  // Adds one generated token; ignored once a stop string was seen.
  void Add(int64_t token, float logprob);
  // Text that is final and not yet taken; `finished`: the sample ended, all
  // of it (a trailing partial character too).
  std::string TakeDelta(bool finished);

  bool stopped() const { return stopped_; }
  // The text so far (cut at the stop string once stopped).
  const std::string& text() const { return text_; }
  // Tokens counted for the answer: up to the one that completed a stop
  // string, all of them otherwise.
  int64_t num_tokens() const { return static_cast<int64_t>(tokens_.size()); }
  // Per kept token: its id, its own text and log-prob.
  const std::vector<int64_t>& token_ids() const { return tokens_; }
  const std::vector<std::string>& token_texts() const { return token_texts_; }
  const std::vector<float>& logprobs() const { return logprobs_; }

 private:
  // Appends the newly decoded text (a partial character only if `flush`)
  // and looks for stop strings in it.
  void Extend(bool flush);

  const models::Tokenizer* tokenizer_;
  std::vector<std::string> stop_;
  size_t max_stop_len_ = 0;
  std::vector<int64_t> tokens_;
  std::vector<std::string> token_texts_;
  std::vector<float> logprobs_;
  size_t prefix_offset_ = 0;  // tokens_[prefix_offset_, read_offset_) decoded
  size_t read_offset_ = 0;    // tokens before this are in text_
  std::string text_;
  size_t taken_ = 0;  // bytes of text_ handed out
  bool stopped_ = false;
};

}  // namespace verl::infer::serve

#endif  // VERL_INFER_SERVE_TEXT_STREAM_H_
