#include "verl/models/tokenizer/tokenizer_builtin.h"

#include <iterator>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "verl/core/status.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models {
namespace {

using Json = nlohmann::ordered_json;

// Qwen2/2.5/3's pre-tokenizer split pattern.
constexpr char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Words that get their own token; each is built by left-to-right merges.
constexpr const char* kMergedWords[] = {
    " the", " is",  " answer", "####", " =",   " +",    " -",
    " *",   "\n\n", "  ",      "    ", " of",  " and",  "er",
    "in",   " to",  " in",     "ing",  " The", " total"};

constexpr const char* kSpecialTokens[] = {"<|endoftext|>", "<|im_start|>",
                                          "<|im_end|>"};

// Hermes tool calling (the agent loop's format): the pieces of
// `<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+2"}}`
// as tokens, so a call costs ~20 tokens instead of ~80 bytes. ` {"` comes
// before `{"` so that its merges rank first.
constexpr const char* kToolWords[] = {
    "name", "arguments", "calculator", "expression", " {\"",
    "{\"",  "\":",       " \"",        "\",",        "\"}}"};

// Qwen2.5's non-special added tokens around a tool call.
constexpr const char* kToolTokens[] = {"<tool_call>", "</tool_call>"};

constexpr char kChatMlTemplate[] =
    "{%- for message in messages %}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "{{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

// GPT-2 byte-to-unicode character of `byte` (UTF-8).
std::string ByteChar(unsigned char byte) {
  bool printable = (byte >= '!' && byte <= '~') ||
                   (byte >= 0xA1 && byte <= 0xAC) || byte >= 0xAE;
  if (printable) {
    std::string s;
    AppendUtf8(byte, &s);
    return s;
  }
  int extra = 0;
  for (int b = 0; b < byte; ++b) {
    bool p = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    if (!p) ++extra;
  }
  std::string s;
  AppendUtf8(256 + extra, &s);
  return s;
}

Json AddedTokenJson(int id, const std::string& content, bool special) {
  return Json{{"id", id},          {"content", content}, {"single_word", false},
              {"lstrip", false},   {"rstrip", false},    {"normalized", false},
              {"special", special}};
}

// Adds the merges that build `word` left to right (new pieces get the next
// id, `*next_id`).
void AddWordMerges(const char* word, Json& vocab, Json& merges, int* next_id) {
  std::string current;
  for (const char* p = word; *p; ++p) {
    std::string next = ByteChar(static_cast<unsigned char>(*p));
    if (current.empty()) {
      current = next;
      continue;
    }
    std::string merged = current + next;
    if (!vocab.contains(merged)) {
      merges.push_back(Json::array({current, next}));
      vocab[merged] = (*next_id)++;
    }
    current = merged;
  }
}

// The added tokens as tokenizer_config.json's added_tokens_decoder lists
// them, and their ids: the tool tokens, then the specials as the last ids
// (presets take vocab_size - 1, <|im_end|>, as the eos).
std::vector<std::pair<int, Json>> AddedTokens() {
  std::vector<std::pair<int, Json>> out;
  int id = kBuiltinSpecialTokenId - static_cast<int>(std::size(kToolTokens));
  for (const char* tool : kToolTokens) {
    out.push_back({id, AddedTokenJson(id, tool, false)});
    ++id;
  }
  for (const char* special : kSpecialTokens) {
    out.push_back({id, AddedTokenJson(id, special, true)});
    ++id;
  }
  return out;
}

}  // namespace

std::string BuiltinTokenizerJson() {
  Json vocab = Json::object();
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(ByteChar(static_cast<unsigned char>(b)));
    vocab[tokens.back()] = b;
  }
  Json merges = Json::array();
  int id = static_cast<int>(vocab.size());
  for (const char* word : kMergedWords) AddWordMerges(word, vocab, merges, &id);
  for (const char* word : kToolWords) AddWordMerges(word, vocab, merges, &id);
  CHECK_EQ(id + static_cast<int>(std::size(kToolTokens)),
           kBuiltinSpecialTokenId)
      << "update kBuiltinSpecialTokenId";
  CHECK_EQ(kBuiltinSpecialTokenId + static_cast<int>(std::size(kSpecialTokens)),
           kBuiltinVocabSize);
  Json added = Json::array();
  for (auto& [token_id, token] : AddedTokens()) added.push_back(token);
  Json byte_level = {{"type", "ByteLevel"},
                     {"add_prefix_space", false},
                     {"trim_offsets", false},
                     {"use_regex", false}};
  Json root = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", kQwen2Pattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       byte_level})}}},
      {"post_processor", byte_level},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", ""},
        {"end_of_word_suffix", ""},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}}};
  return root.dump(2);
}

std::string BuiltinTokenizerConfigJson() {
  Json decoder = Json::object();
  for (auto& [id, token] : AddedTokens()) {
    token.erase("id");
    decoder[std::to_string(id)] = token;
  }
  Json config = {{"add_bos_token", false},
                 {"add_prefix_space", false},
                 {"added_tokens_decoder", decoder},
                 {"bos_token", nullptr},
                 {"chat_template", kChatMlTemplate},
                 {"clean_up_tokenization_spaces", false},
                 {"eos_token", "<|im_end|>"},
                 {"errors", "replace"},
                 {"model_max_length", 32768},
                 {"pad_token", "<|endoftext|>"},
                 {"split_special_tokens", false},
                 {"tokenizer_class", "Qwen2Tokenizer"},
                 {"unk_token", nullptr}};
  return config.dump(2);
}

Tokenizer MakeBuiltinTokenizer() {
  static const Tokenizer* tokenizer = [] {
    auto t = Tokenizer::FromJson(BuiltinTokenizerJson(),
                                 BuiltinTokenizerConfigJson(), "",
                                 "<builtin tokenizer>");
    VERL_CHECK_OK(t.status());
    return new Tokenizer(*std::move(t));
  }();
  return *tokenizer;
}

}  // namespace verl::models
