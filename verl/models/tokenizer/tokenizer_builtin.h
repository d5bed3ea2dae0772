// File: verl/models/tokenizer/tokenizer_builtin.h
//
// A small built-in tokenizer so tiny models, tests and demos need no download:
// Qwen2-style byte-level BPE (the 256 byte tokens, ids 0-255 in byte order,
// plus a few dozen merges for common words, arithmetic and whitespace runs),
// the ChatML special tokens <|endoftext|>, <|im_start|>, <|im_end|> and a
// ChatML chat template. It is built as real tokenizer.json /
// tokenizer_config.json text and loaded through the normal loader, so a saved
// HF folder is complete and readable by HF tooling.
#ifndef VERL_MODELS_TOKENIZER_BUILTIN_H_
#define VERL_MODELS_TOKENIZER_BUILTIN_H_

#include <string>

#include "verl/models/tokenizer/tokenizer.h"

namespace verl::models {

// tokenizer.json of the built-in tokenizer.
std::string BuiltinTokenizerJson();
// tokenizer_config.json of the built-in tokenizer (ChatML template,
// eos <|im_end|>, pad <|endoftext|>).
std::string BuiltinTokenizerConfigJson();

// The built-in tokenizer (vocab_size() == kBuiltinVocabSize): byte-level
// BPE with Qwen2's pre-tokenizer, a few merged words, merges for Hermes tool
// calls, Qwen2.5's <tool_call> and </tool_call>, then the ChatML specials
// <|endoftext|>, <|im_start|>, <|im_end|> (from kBuiltinSpecialTokenId on:
// <|im_end|>, the eos, is the last id as the presets expect).
Tokenizer MakeBuiltinTokenizer();
inline constexpr int kBuiltinSpecialTokenId = 331;
inline constexpr int kBuiltinVocabSize = 334;

}  // namespace verl::models

#endif  // VERL_MODELS_TOKENIZER_BUILTIN_H_
