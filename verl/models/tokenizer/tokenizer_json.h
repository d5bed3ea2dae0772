// File: verl/models/tokenizer/tokenizer_json.h
//
// Reads HuggingFace tokenizer files into the parts a Tokenizer runs:
// tokenizer.json (model vocab and merges, added tokens, normalizer,
// pre-tokenizer, post-processor, decoder) and tokenizer_config.json (special
// tokens, added_tokens_decoder, clean_up_tokenization_spaces, chat
// templates). Anything unsupported or malformed is an InvalidArgument that
// names the file and the key.
#ifndef VERL_MODELS_TOKENIZER_JSON_H_
#define VERL_MODELS_TOKENIZER_JSON_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "verl/models/tokenizer/tokenizer_bpe.h"
#include "verl/models/tokenizer/tokenizer_pretokenize.h"
#include "verl/models/tokenizer/tokenizer_vocab.h"

namespace verl::models::tokenizer_internal {

// Everything loaded from a tokenizer's files. Immutable once parsed (the
// BPE cache is internally synchronized).
struct TokenizerData {
  std::string source;  // Names the origin in errors.
  // The files as loaded (saved back byte for byte).
  std::string tokenizer_json, config_json, chat_template_file;

  Vocab vocab;
  Bpe bpe;
  std::vector<NormalizerKind> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  // TemplateProcessing's `single`: ids before and after the sequence.
  std::vector<int> bos_template_ids, eos_template_ids;

  bool clean_up_spaces = false;
  std::string bos, eos, pad, unk;  // "" when not set.
  int bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  // By name; a plain string template is "default"; chat_template.jinja
  // overrides "default".
  std::map<std::string, std::string> chat_templates;
};

// Parses the files; `config_json` may be empty ("{}"), `chat_template_jinja`
// empty (none); `source` names the origin in error messages.
absl::StatusOr<std::shared_ptr<TokenizerData>> ParseTokenizerFiles(
    absl::string_view tokenizer_json, absl::string_view config_json,
    absl::string_view chat_template_jinja, absl::string_view source);

}  // namespace verl::models::tokenizer_internal

#endif  // VERL_MODELS_TOKENIZER_JSON_H_
