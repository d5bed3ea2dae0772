#include "verl/models/tokenizer/tokenizer_bpe.h"

#include <functional>
#include <queue>

#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models::tokenizer_internal {

const ByteAlphabet& GetByteAlphabet() {
  static const ByteAlphabet* alphabet = [] {
    auto* a = new ByteAlphabet;
    for (int& b : a->char_to_byte) b = -1;
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
                       (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? b : 256 + extra++;
      AppendUtf8(cp, &a->byte_to_char[b]);
      a->char_to_byte[cp] = b;
    }
    return a;
  }();
  return *alphabet;
}

void Bpe::AddMerge(int left, int right, int rank, int merged) {
  merges_.try_emplace(PairKey(left, right), rank, merged);
}

void Bpe::SetByteIds(const Vocab& vocab, int unk_id) {
  const ByteAlphabet& alphabet = GetByteAlphabet();
  for (int b = 0; b < 256; ++b) {
    auto it = vocab.token_to_id.find(alphabet.byte_to_char[b]);
    byte_ids_[b] = it == vocab.token_to_id.end() ? unk_id : it->second;
  }
}

std::vector<int> Bpe::EncodeUncached(absl::string_view piece,
                                     const Vocab& vocab) const {
  const ByteAlphabet& alphabet = GetByteAlphabet();
  if (ignore_merges_) {
    std::string mapped;
    for (char c : piece)
      mapped += alphabet.byte_to_char[static_cast<unsigned char>(c)];
    auto it = vocab.token_to_id.find(mapped);
    if (it != vocab.token_to_id.end()) return {it->second};
  }
  struct Symbol {
    int id, prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (char c : piece) {
    int id = byte_ids_[static_cast<unsigned char>(c)];
    if (id < 0) continue;  // Byte missing from the vocab and no unk token.
    int n = static_cast<int>(sym.size());
    sym.push_back({id, n - 1, n + 1, true});
  }
  if (sym.empty()) return {};
  sym.back().next = -1;
  // Candidate merges ordered by (rank, position), as tokenizers' BPE does.
  struct Candidate {
    int rank, pos, new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>,
                      std::greater<Candidate>>
      queue;
  const auto push = [&](int left) {
    int right = sym[left].next;
    if (right < 0) return;
    auto it = merges_.find(PairKey(sym[left].id, sym[right].id));
    if (it != merges_.end())
      queue.push({it->second.first, left, it->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    auto it = merges_.find(PairKey(left.id, sym[left.next].id));
    if (it == merges_.end() || it->second.second != c.new_id) continue;
    Symbol& right = sym[left.next];
    right.alive = false;
    left.id = c.new_id;
    left.next = right.next;
    if (left.next >= 0) sym[left.next].prev = c.pos;
    if (left.prev >= 0) push(left.prev);
    push(c.pos);
  }
  std::vector<int> ids;
  for (int i = 0; i >= 0; i = sym[i].next) ids.push_back(sym[i].id);
  return ids;
}

std::vector<int> Bpe::Encode(absl::string_view piece,
                             const Vocab& vocab) const {
  std::string key(piece);
  {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  std::vector<int> ids = EncodeUncached(piece, vocab);
  absl::MutexLock lock(&cache_mu_);
  if (cache_.size() >= 200000) cache_.clear();  // Bound memory.
  cache_.emplace(std::move(key), ids);
  return ids;
}

}  // namespace verl::models::tokenizer_internal
