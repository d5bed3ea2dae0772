#include "verl/models/tokenizer/tokenizer.h"

#include <utility>

#include "absl/strings/str_replace.h"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/tokenizer/tokenizer_json.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models {

using tokenizer_internal::TokenizerData;

namespace {

// Steps 2-4 of encoding for text between added tokens: normalize,
// pre-tokenize, BPE each piece.
void EncodeSegment(const TokenizerData& d, absl::string_view text,
                   std::vector<int64_t>* ids) {
  std::string normalized(text);
  for (tokenizer_internal::NormalizerKind n : d.normalizers)
    normalized = tokenizer_internal::Normalize(n, normalized);
  if (normalized.empty()) return;
  for (const std::string& piece : tokenizer_internal::PreTokenize(
           d.pre_tokenizers, std::move(normalized))) {
    const std::vector<int> word = d.bpe.Encode(piece, d.vocab);
    ids->insert(ids->end(), word.begin(), word.end());
  }
}

}  // namespace

absl::StatusOr<Tokenizer> Tokenizer::FromJson(
    absl::string_view tokenizer_json, absl::string_view config_json,
    absl::string_view chat_template_jinja, absl::string_view source) {
  VERL_ASSIGN_OR_RETURN(
      std::shared_ptr<TokenizerData> data,
      tokenizer_internal::ParseTokenizerFiles(tokenizer_json, config_json,
                                              chat_template_jinja, source));
  Tokenizer tokenizer;
  tokenizer.data_ = std::move(data);
  return tokenizer;
}

absl::StatusOr<Tokenizer> Tokenizer::FromDirectory(const std::string& dir) {
  const std::string json_path = dir + "/tokenizer.json";
  VERL_ASSIGN_OR_RETURN(std::string json, core::ReadFile(json_path));
  std::string config = "{}", jinja;
  auto config_or = core::ReadFile(dir + "/tokenizer_config.json");
  if (config_or.ok()) {
    config = *std::move(config_or);
  } else if (!absl::IsNotFound(config_or.status())) {
    return config_or.status();
  }
  auto jinja_or = core::ReadFile(dir + "/chat_template.jinja");
  if (jinja_or.ok()) {
    jinja = *std::move(jinja_or);
  } else if (!absl::IsNotFound(jinja_or.status())) {
    return jinja_or.status();
  }
  return FromJson(json, config, jinja, json_path);
}

absl::Status Tokenizer::SaveToDirectory(const std::string& dir) const {
  VERL_RETURN_IF_ERROR(core::MakeDirs(dir));
  VERL_RETURN_IF_ERROR(
      core::WriteFileAtomic(dir + "/tokenizer.json", data_->tokenizer_json));
  VERL_RETURN_IF_ERROR(core::WriteFileAtomic(dir + "/tokenizer_config.json",
                                             data_->config_json));
  if (!data_->chat_template_file.empty()) {
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(dir + "/chat_template.jinja",
                                               data_->chat_template_file));
  }
  return absl::OkStatus();
}

std::vector<int64_t> Tokenizer::Encode(absl::string_view text,
                                       bool add_special_tokens) const {
  const TokenizerData& d = *data_;
  std::string valid;
  if (!IsValidUtf8(text)) {
    valid = Utf8Lossy(text);
    text = valid;
  }
  std::vector<int64_t> ids;
  if (add_special_tokens)
    ids.assign(d.bos_template_ids.begin(), d.bos_template_ids.end());
  for (auto [segment, added_id] : d.vocab.SplitAdded(text)) {
    if (added_id >= 0) {
      ids.push_back(added_id);
    } else {
      EncodeSegment(d, segment, &ids);
    }
  }
  if (add_special_tokens)
    ids.insert(ids.end(), d.eos_template_ids.begin(), d.eos_template_ids.end());
  return ids;
}

std::string Tokenizer::Decode(absl::Span<const int64_t> ids,
                              bool skip_special_tokens) const {
  const TokenizerData& d = *data_;
  const auto& alphabet = tokenizer_internal::GetByteAlphabet();
  std::string text, bytes;
  const auto flush = [&] {
    text += Utf8Lossy(bytes);
    bytes.clear();
  };
  for (int64_t id : ids) {
    if (id < 0 || id >= static_cast<int64_t>(d.vocab.known.size()) ||
        !d.vocab.known[id])
      continue;
    if (skip_special_tokens && d.vocab.special[id]) continue;
    const std::string& token = d.vocab.id_to_token[id];
    if (d.vocab.added_index[id] >=
        0) {  // Added tokens decode to their content.
      flush();
      text += token;
      continue;
    }
    // ByteLevel decoder: map each char back to its byte; a token with a char
    // outside the alphabet contributes its raw UTF-8 instead (as HF does).
    std::string mapped;
    bool all_mapped = true;
    for (char32_t cp : DecodeUtf8Lossy(token)) {
      int b = cp < 324 ? alphabet.char_to_byte[cp] : -1;
      if (b < 0) {
        all_mapped = false;
        break;
      }
      mapped.push_back(static_cast<char>(b));
    }
    bytes += all_mapped ? mapped : token;
  }
  flush();
  if (d.clean_up_spaces) {
    // transformers' clean_up_tokenization, applied in its order.
    static const std::pair<const char*, const char*> kRules[] = {
        {" .", "."},     {" ?", "?"},     {" !", "!"},   {" ,", ","},
        {" ' ", "'"},    {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"},
        {" 've", "'ve"}, {" 're", "'re"}};
    for (const auto& [from, to] : kRules)
      text = absl::StrReplaceAll(text, {{from, to}});
  }
  return text;
}

int Tokenizer::vocab_size() const {
  return static_cast<int>(data_->vocab.id_to_token.size());
}
int Tokenizer::base_vocab_size() const { return data_->vocab.base_vocab_size; }

std::optional<int64_t> Tokenizer::TokenToId(absl::string_view token) const {
  auto it = data_->vocab.token_to_id.find(token);
  if (it == data_->vocab.token_to_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::IdToToken(int64_t id) const {
  if (id < 0 || id >= vocab_size() || !data_->vocab.known[id])
    return std::nullopt;
  return data_->vocab.id_to_token[id];
}

bool Tokenizer::IsSpecialId(int64_t id) const {
  return id >= 0 && id < vocab_size() && data_->vocab.special[id];
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return data_->vocab.added;
}
const std::string& Tokenizer::bos_token() const { return data_->bos; }
const std::string& Tokenizer::eos_token() const { return data_->eos; }
const std::string& Tokenizer::pad_token() const { return data_->pad; }
const std::string& Tokenizer::unk_token() const { return data_->unk; }
int64_t Tokenizer::bos_token_id() const { return data_->bos_id; }
int64_t Tokenizer::eos_token_id() const { return data_->eos_id; }
int64_t Tokenizer::pad_token_id() const { return data_->pad_id; }
int64_t Tokenizer::unk_token_id() const { return data_->unk_id; }
const std::map<std::string, std::string>& Tokenizer::chat_templates() const {
  return data_->chat_templates;
}
const std::string& Tokenizer::tokenizer_json() const {
  return data_->tokenizer_json;
}
const std::string& Tokenizer::tokenizer_config_json() const {
  return data_->config_json;
}

const std::string& Tokenizer::source() const { return data_->source; }

}  // namespace verl::models
