// File: verl/models/tokenizer/tokenizer_bpe.h
//
// Byte-level BPE, the model of tokenizer.json (`"type": "BPE"`): a piece's
// bytes map to GPT-2's byte-to-unicode alphabet, then merges apply by rank
// (a priority queue over a linked symbol list, ties to the leftmost
// position, exactly like HF `tokenizers`). With `ignore_merges` (Llama 3) the
// whole piece is looked up first. Results are cached per piece.
#ifndef VERL_MODELS_TOKENIZER_BPE_H_
#define VERL_MODELS_TOKENIZER_BPE_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "verl/models/tokenizer/tokenizer_vocab.h"

namespace verl::models::tokenizer_internal {

// GPT-2's reversible byte <-> printable-code-point mapping.
struct ByteAlphabet {
  std::string byte_to_char[256];  // UTF-8 of the code point of each byte.
  int char_to_byte[324];          // Code point -> byte, -1 if none.
};
const ByteAlphabet& GetByteAlphabet();

class Bpe {
 public:
  // Adds the merge `left right` -> `merged` with `rank` (lower applies
  // first); a pair seen before keeps its first rank.
  void AddMerge(int left, int right, int rank, int merged);
  // Looks up each byte's token in `vocab` (missing: `unk_id`, or dropped
  // when that is -1). Call after the model vocab is loaded.
  void SetByteIds(const Vocab& vocab, int unk_id);
  void set_ignore_merges(bool ignore) { ignore_merges_ = ignore; }

  // Token ids of one pre-tokenized piece (raw bytes). Thread-safe.
  std::vector<int> Encode(absl::string_view piece, const Vocab& vocab) const;

 private:
  std::vector<int> EncodeUncached(absl::string_view piece,
                                  const Vocab& vocab) const;
  static uint64_t PairKey(int a, int b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
           static_cast<uint32_t>(b);
  }

  absl::flat_hash_map<uint64_t, std::pair<int, int>> merges_;  // rank, id
  int byte_ids_[256];
  bool ignore_merges_ = false;
  mutable absl::Mutex cache_mu_;
  mutable absl::flat_hash_map<std::string, std::vector<int>> cache_
      ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace verl::models::tokenizer_internal

#endif  // VERL_MODELS_TOKENIZER_BPE_H_
