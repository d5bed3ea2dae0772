// File: verl/models/tokenizer/tokenizer.h
//
// Byte-level BPE tokenizer loaded from a HuggingFace `tokenizer.json` (+
// `tokenizer_config.json`, optional `chat_template.jinja`), as used by
// Qwen2/2.5/3 and Llama 3. Encoding follows the `tokenizers` pipeline:
//   1. added tokens are matched first (leftmost-longest, honouring lstrip,
//      rstrip and single_word) and never split;
//   2. each remaining segment is normalized (NFC/NFD/NFKC/NFKD, Sequence);
//   3. pre-tokenized (Split with a PCRE2 UTF+UCP regex and any split
//      behaviour, ByteLevel with its GPT-2 regex, Sequence);
//   4. every piece's bytes are mapped to GPT-2's byte-to-unicode alphabet and
//      merged by BPE merge rank (priority queue, per-piece cache; honours
//      `ignore_merges`);
//   5. post-processor ByteLevel (no-op) or TemplateProcessing (e.g. Llama 3's
//      <|begin_of_text|>) when add_special_tokens is set.
// Decoding maps tokens back to bytes and converts them to UTF-8 lossily like
// HF (each maximal invalid subsequence becomes U+FFFD).
//
// Input text that is not valid UTF-8 is first converted lossily (U+FFFD), as
// Python's bytes.decode(errors="replace") would.
//
// This class is the facade; the parts are tokenizer_vocab.h (vocabulary,
// added tokens: step 1), tokenizer_pretokenize.h (steps 2-3),
// tokenizer_bpe.h (step 4) and tokenizer_json.h (reading the files).
//
// Example:
//   VERL_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromDirectory(model_dir));
//   std::vector<int64_t> ids = tok.Encode("Hello world");
//   std::string text = tok.Decode(ids, /*skip_special_tokens=*/true);
// Chat templates are rendered by chat_template.h (ApplyChatTemplate(tok, ...),
// ChatFormatter), so users of the tokenizer alone do not link Jinja.
#ifndef VERL_MODELS_TOKENIZER_H_
#define VERL_MODELS_TOKENIZER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "verl/models/tokenizer/tokenizer_vocab.h"  // AddedToken

namespace verl::models {

namespace tokenizer_internal {
struct TokenizerData;
}  // namespace tokenizer_internal

// Immutable after loading; cheap to copy; Encode/Decode are thread-safe.
// Token ids are int64_t, like the engine's and torch's kLong tensors.
class Tokenizer {
 public:
  // Loads `dir`/tokenizer.json, `dir`/tokenizer_config.json (optional) and
  // `dir`/chat_template.jinja (optional; overrides the config's template).
  static absl::StatusOr<Tokenizer> FromDirectory(const std::string& dir);

  // Loads from file contents. `config_json` may be empty ("{}").
  // `source` names the origin in error messages.
  static absl::StatusOr<Tokenizer> FromJson(
      absl::string_view tokenizer_json, absl::string_view config_json = "",
      absl::string_view chat_template_jinja = "",
      absl::string_view source = "tokenizer.json");

  // Writes tokenizer.json and tokenizer_config.json (and chat_template.jinja
  // when loaded from one) into `dir` (created if needed), each atomically.
  // Files loaded from disk are written back byte for byte.
  absl::Status SaveToDirectory(const std::string& dir) const;

  // Token ids of `text`. With `add_special_tokens` the post-processor's
  // template (e.g. a BOS token) is applied, as HF's default encode does; the
  // default (false) matches encoding an already templated chat prompt.
  std::vector<int64_t> Encode(absl::string_view text,
                              bool add_special_tokens = false) const;

  // Text of `ids` (ids outside the vocabulary are skipped, like HF).
  // Applies clean_up_tokenization_spaces when the config enables it.
  std::string Decode(absl::Span<const int64_t> ids,
                     bool skip_special_tokens = false) const;

  // len(tokenizer) in transformers: highest id + 1, added tokens included.
  int vocab_size() const;
  // Number of entries of the BPE model's own vocab.
  int base_vocab_size() const;

  std::optional<int64_t> TokenToId(absl::string_view token) const;
  // The token string of `id` (byte-level alphabet), nullopt if unknown.
  std::optional<std::string> IdToToken(int64_t id) const;
  // True for added tokens flagged special and tokens named by the config
  // (bos/eos/pad/unk/additional_special_tokens).
  bool IsSpecialId(int64_t id) const;
  const std::vector<AddedToken>& added_tokens() const;

  // Special tokens from tokenizer_config.json; "" / -1 when not set.
  const std::string& bos_token() const;
  const std::string& eos_token() const;
  const std::string& pad_token() const;
  const std::string& unk_token() const;
  int64_t bos_token_id() const;
  int64_t eos_token_id() const;
  int64_t pad_token_id() const;
  int64_t unk_token_id() const;

  // Chat templates by name; a plain string template is named "default".
  const std::map<std::string, std::string>& chat_templates() const;
  bool has_chat_template() const { return !chat_templates().empty(); }

  // Names the origin in errors (the tokenizer.json path or `source`).
  const std::string& source() const;

  // The files as they will be saved.
  const std::string& tokenizer_json() const;
  const std::string& tokenizer_config_json() const;

 private:
  Tokenizer() = default;  // Only the loaders create tokenizers.
  std::shared_ptr<const tokenizer_internal::TokenizerData> data_;
};

}  // namespace verl::models

#endif  // VERL_MODELS_TOKENIZER_H_
