// File: verl/models/tokenizer/tokenizer_vocab.h
//
// A tokenizer's vocabulary: the BPE model's token <-> id map plus the added
// tokens of tokenizer.json (`added_tokens`) and tokenizer_config.json
// (`added_tokens_decoder`), and the matching of added tokens in raw text
// (step 1 of encoding: leftmost-longest, honouring lstrip, rstrip and
// single_word; matched tokens are never split further).
#ifndef VERL_MODELS_TOKENIZER_VOCAB_H_
#define VERL_MODELS_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace verl::models {

// An entry of tokenizer.json's `added_tokens` (or tokenizer_config.json's
// `added_tokens_decoder`).
struct AddedToken {
  int id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
  bool normalized = false;
};

namespace tokenizer_internal {

struct Vocab {
  absl::flat_hash_map<std::string, int> token_to_id;
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> known;    // id has a token
  std::vector<uint8_t> special;  // id is special
  std::vector<int> added_index;  // id -> index into `added`, or -1
  int base_vocab_size = 0;       // Entries of the model's own vocab.
  std::vector<AddedToken> added;
  std::vector<int> added_by_first_byte[256];  // Indices, longest first.

  // Records `token` as the text of `id` (growing the id tables).
  void SetToken(int id, const std::string& token);
  // Adds an added token (content must be non-empty); an id that already is
  // an added token is kept as it is (tokenizer.json wins over the config).
  void AddAddedToken(const AddedToken& token);
  // Segments of `text`: (piece, added-token id or -1 for plain text).
  std::vector<std::pair<absl::string_view, int>> SplitAdded(
      absl::string_view text) const;
};

}  // namespace tokenizer_internal
}  // namespace verl::models

#endif  // VERL_MODELS_TOKENIZER_VOCAB_H_
