// File: verl/infer/serve/text_stream.cc
#include "verl/infer/serve/text_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/types/span.h"

namespace verl::infer::serve {
namespace {

constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

bool IsContinuationByte(char c) { return (c & 0xC0) == 0x80; }

}  // namespace

TextStream::TextStream(const models::Tokenizer* tokenizer,
                       std::vector<std::string> stop)
    : tokenizer_(tokenizer), stop_(std::move(stop)) {
  for (const std::string& s : stop_) {
    max_stop_len_ = std::max(max_stop_len_, s.size());
  }
}

void TextStream::Add(int64_t token, float logprob) {
  if (stopped_) return;
  tokens_.push_back(token);
  token_texts_.push_back(tokenizer_->Decode({token}));
  logprobs_.push_back(logprob);
  Extend(/*flush=*/false);
}

void TextStream::Extend(bool flush) {
  if (stopped_ || read_offset_ == tokens_.size()) return;
  absl::Span<const int64_t> ids(tokens_);
  const std::string prefix = tokenizer_->Decode(
      ids.subspan(prefix_offset_, read_offset_ - prefix_offset_),
      /*skip_special_tokens=*/true);
  const std::string full = tokenizer_->Decode(ids.subspan(prefix_offset_),
                                              /*skip_special_tokens=*/true);
  // Wait for the rest of a character split over tokens (unless flushing).
  if (!flush &&
      (full.size() <= prefix.size() || absl::EndsWith(full, kReplacement))) {
    return;
  }
  const size_t searched_from =
      text_.size() >= max_stop_len_ ? text_.size() - max_stop_len_ + 1 : 0;
  if (full.size() > prefix.size()) text_ += full.substr(prefix.size());
  prefix_offset_ = read_offset_;
  read_offset_ = tokens_.size();
  size_t cut = std::string::npos;
  for (const std::string& s : stop_) {
    cut = std::min(cut, text_.find(s, searched_from));
  }
  if (cut != std::string::npos) {
    text_.resize(cut);
    taken_ = std::min(taken_, text_.size());
    stopped_ = true;
  }
}

std::string TextStream::TakeDelta(bool finished) {
  if (finished) Extend(/*flush=*/true);
  size_t end = text_.size();
  if (!finished && !stopped_ && max_stop_len_ > 0) {
    // Hold back a tail that may be the start of a stop string, whole
    // characters only.
    end = end >= max_stop_len_ - 1 ? end - (max_stop_len_ - 1) : 0;
    while (end > taken_ && end < text_.size() &&
           IsContinuationByte(text_[end])) {
      --end;
    }
  }
  if (end <= taken_) return "";
  std::string delta = text_.substr(taken_, end - taken_);
  taken_ = end;
  return delta;
}

}  // namespace verl::infer::serve
