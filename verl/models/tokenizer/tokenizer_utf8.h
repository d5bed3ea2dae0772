// File: verl/models/tokenizer/tokenizer_utf8.h
//
// UTF-8 helpers shared by the tokenizer and the chat-template renderer.
// Lossy decoding follows the WHATWG / Rust `from_utf8_lossy` rule that HF
// tokenizers and JS TextDecoder use: each maximal subpart of an invalid
// sequence becomes one U+FFFD.
#ifndef VERL_MODELS_TOKENIZER_UTF8_H_
#define VERL_MODELS_TOKENIZER_UTF8_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace verl::models {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Appends the UTF-8 encoding of `cp` to `out`.
void AppendUtf8(char32_t cp, std::string* out);

// Code points of `bytes`, invalid subsequences replaced by U+FFFD.
std::vector<char32_t> DecodeUtf8Lossy(absl::string_view bytes);

// `bytes` as valid UTF-8 (unchanged when already valid).
std::string Utf8Lossy(absl::string_view bytes);

bool IsValidUtf8(absl::string_view bytes);

// UTF-8 encoding of code points.
std::string EncodeUtf8(const std::vector<char32_t>& cps);

// Python's str.isspace() for one code point.
bool IsUnicodeSpace(char32_t cp);

}  // namespace verl::models

#endif  // VERL_MODELS_TOKENIZER_UTF8_H_
