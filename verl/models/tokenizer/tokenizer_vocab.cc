#include "verl/models/tokenizer/tokenizer_vocab.h"

#include <algorithm>
#include <cctype>

namespace verl::models::tokenizer_internal {

void Vocab::SetToken(int id, const std::string& token) {
  if (id >= static_cast<int>(id_to_token.size())) {
    id_to_token.resize(id + 1);
    known.resize(id + 1, 0);
    special.resize(id + 1, 0);
    added_index.resize(id + 1, -1);
  }
  id_to_token[id] = token;
  known[id] = 1;
}

void Vocab::AddAddedToken(const AddedToken& token) {
  if (token.id < static_cast<int>(added_index.size()) &&
      added_index[token.id] >= 0) {
    return;  // Already known (tokenizer.json wins).
  }
  SetToken(token.id, token.content);
  token_to_id[token.content] = token.id;
  added_index[token.id] = static_cast<int>(added.size());
  if (token.special) special[token.id] = 1;
  added.push_back(token);
  auto& bucket =
      added_by_first_byte[static_cast<unsigned char>(token.content[0])];
  bucket.push_back(added_index[token.id]);
  std::stable_sort(bucket.begin(), bucket.end(), [&](int x, int y) {
    return added[x].content.size() > added[y].content.size();
  });
}

std::vector<std::pair<absl::string_view, int>> Vocab::SplitAdded(
    absl::string_view text) const {
  std::vector<std::pair<absl::string_view, int>> out;
  const auto is_word = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  };
  const auto is_space = [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
           c == '\f';
  };
  size_t segment_start = 0, i = 0;
  while (i < text.size()) {
    int found = -1;
    for (int idx : added_by_first_byte[static_cast<unsigned char>(text[i])]) {
      const AddedToken& t = added[idx];
      if (text.compare(i, t.content.size(), t.content) != 0) continue;
      size_t end = i + t.content.size();
      if (t.single_word && ((i > 0 && is_word(text[i - 1])) ||
                            (end < text.size() && is_word(text[end]))))
        continue;
      found = idx;
      break;
    }
    if (found < 0) {
      ++i;
      continue;
    }
    const AddedToken& t = added[found];
    size_t begin = i, end = i + t.content.size();
    if (t.lstrip)
      while (begin > segment_start && is_space(text[begin - 1])) --begin;
    if (t.rstrip)
      while (end < text.size() && is_space(text[end])) ++end;
    if (begin > segment_start)
      out.emplace_back(text.substr(segment_start, begin - segment_start), -1);
    out.emplace_back(text.substr(begin, end - begin), t.id);
    segment_start = i = end;
  }
  if (segment_start < text.size())
    out.emplace_back(text.substr(segment_start), -1);
  return out;
}

}  // namespace verl::models::tokenizer_internal
