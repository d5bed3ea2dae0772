#include "verl/models/tokenizer/tokenizer.h"

#include <climits>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/models/tokenizer/tokenizer_builtin.h"
#include "verl/models/tokenizer/tokenizer_utf8.h"

namespace verl::models {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::ordered_json;

// GPT-2 byte-to-unicode, written out independently of the library: printable
// Latin-1 bytes map to themselves, the other 68 bytes to U+0100.. in order.
std::string RefByteChar(int b) {
  static const std::vector<std::string> table = [] {
    std::vector<std::string> t(256);
    int next = 256;
    for (int x = 0; x < 256; ++x) {
      bool printable = (x >= 33 && x <= 126) || (x >= 161 && x <= 172) ||
                       (x >= 174 && x <= 255);
      std::string s;
      AppendUtf8(printable ? x : next++, &s);
      t[x] = s;
    }
    return t;
  }();
  return table[b];
}

std::string RefByteLevel(const std::string& text) {
  std::string out;
  for (unsigned char c : text) out += RefByteChar(c);
  return out;
}

// A tokenizer.json with the 256 byte tokens, `merges` and a configurable
// pre-tokenizer / post-processor / added tokens.
Json BaseTokenizerJson(
    const std::vector<std::pair<std::string, std::string>>& merges) {
  Json vocab = Json::object();
  for (int b = 0; b < 256; ++b) vocab[RefByteChar(b)] = b;
  Json merge_list = Json::array();
  for (const auto& [a, b] : merges) {
    if (!vocab.contains(a + b)) vocab[a + b] = static_cast<int>(vocab.size());
    merge_list.push_back(Json::array({a, b}));
  }
  return {
      {"added_tokens", Json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"},
        {"add_prefix_space", false},
        {"use_regex", false}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
}

Tokenizer Load(const Json& json, const Json& config = Json::object()) {
  auto t = Tokenizer::FromJson(json.dump(), config.dump());
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<std::string> Tokens(const Tokenizer& t,
                                const std::vector<int64_t>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(t.IdToToken(id).value_or("<?>"));
  return out;
}

// Textbook BPE: repeatedly merge the adjacent pair of lowest rank (leftmost on
// ties) until no pair has a rank.
std::vector<std::string> NaiveBpe(
    const std::string& byte_level_text,
    const std::map<std::pair<std::string, std::string>, int>& ranks) {
  std::vector<std::string> syms;
  for (char32_t cp : DecodeUtf8Lossy(byte_level_text))
    syms.push_back(EncodeUtf8({cp}));
  while (true) {
    int best = -1, best_rank = INT_MAX;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ranks.find({syms[i], syms[i + 1]});
      if (it != ranks.end() && it->second < best_rank) {
        best = static_cast<int>(i);
        best_rank = it->second;
      }
    }
    if (best < 0) return syms;
    syms[best] += syms[best + 1];
    syms.erase(syms.begin() + best + 1);
  }
}

TEST(TokenizerTest, BpeMatchesNaiveReferenceOnRandomMerges) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abc d";
  std::vector<std::string> pool;
  for (char c : alphabet)
    pool.push_back(RefByteChar(static_cast<unsigned char>(c)));
  std::vector<std::pair<std::string, std::string>> merges;
  std::map<std::pair<std::string, std::string>, int> ranks;
  while (merges.size() < 80) {
    const std::string& a = pool[rng() % pool.size()];
    const std::string& b = pool[rng() % pool.size()];
    if (ranks.count({a, b})) continue;
    ranks[{a, b}] = static_cast<int>(merges.size());
    merges.emplace_back(a, b);
    pool.push_back(a + b);
  }
  Tokenizer tok = Load(BaseTokenizerJson(merges));
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    int len = 1 + rng() % 40;
    for (int i = 0; i < len; ++i) text += alphabet[rng() % alphabet.size()];
    std::vector<int64_t> ids = tok.Encode(text);
    EXPECT_EQ(Tokens(tok, ids), NaiveBpe(RefByteLevel(text), ranks)) << text;
    EXPECT_EQ(tok.Decode(ids), text);
  }
}

TEST(TokenizerTest, ByteAlphabetMatchesGpt2) {
  Tokenizer tok = MakeBuiltinTokenizer();
  for (int b = 0; b < 256; ++b)
    EXPECT_EQ(tok.IdToToken(b), RefByteChar(b)) << b;
  EXPECT_EQ(*tok.IdToToken(' '), "\u0120");   // Ġ
  EXPECT_EQ(*tok.IdToToken('\n'), "\u010a");  // Ċ
  EXPECT_EQ(*tok.IdToToken(0xAD), "\u0143");  // Last remapped byte.
}

TEST(TokenizerTest, DecodeInvalidUtf8LikeHf) {
  Tokenizer tok = MakeBuiltinTokenizer();
  const std::string r = "\xEF\xBF\xBD";  // U+FFFD
  EXPECT_EQ(tok.Decode({0xE4}), r);
  EXPECT_EQ(tok.Decode({0xE4, 0xBD}), r);  // Truncated: one maximal subpart.
  EXPECT_EQ(tok.Decode({0xE4, 'a'}), r + "a");
  EXPECT_EQ(tok.Decode({0xE4, 0xBD, 0xA0}), "你");
  EXPECT_EQ(tok.Decode({0xF0, 0x9F, 0x98, 0x80}), "😀");
  EXPECT_EQ(tok.Decode({0xC0, 0x80}), r + r);            // Overlong.
  EXPECT_EQ(tok.Decode({0xED, 0xA0, 0x80}), r + r + r);  // Surrogate.
  EXPECT_EQ(tok.Decode({0xFF, 'x'}), r + "x");
  // Split multi-byte characters decode exactly once joined.
  std::vector<int64_t> ids = tok.Encode("日本語 😀");
  EXPECT_EQ(tok.Decode(ids), "日本語 😀");
  // Unknown ids are skipped, as HF does.
  EXPECT_EQ(tok.Decode({'a', 100000, -1, 'b'}), "ab");
}

TEST(TokenizerTest, InvalidUtf8InputIsReplaced) {
  Tokenizer tok = MakeBuiltinTokenizer();
  EXPECT_EQ(tok.Decode(tok.Encode("a\xFF"
                                  "b")),
            "a\xEF\xBF\xBD"
            "b");
}

TEST(TokenizerTest, NfcNormalizer) {
  Tokenizer tok = MakeBuiltinTokenizer();
  EXPECT_EQ(tok.Encode("cafe\xCC\x81"), tok.Encode("caf\xC3\xA9"));
  EXPECT_EQ(tok.Decode(tok.Encode("cafe\xCC\x81")), "caf\xC3\xA9");
}

TEST(TokenizerTest, BuiltinSpecialTokensAndChatTemplate) {
  Tokenizer tok = MakeBuiltinTokenizer();
  EXPECT_EQ(tok.vocab_size(), kBuiltinVocabSize);
  EXPECT_EQ(tok.base_vocab_size(), kBuiltinVocabSize - 5);
  const int64_t im_start = *tok.TokenToId("<|im_start|>");
  const int64_t im_end = *tok.TokenToId("<|im_end|>");
  EXPECT_EQ(tok.eos_token_id(), im_end);
  EXPECT_EQ(tok.pad_token_id(), *tok.TokenToId("<|endoftext|>"));
  EXPECT_EQ(tok.bos_token_id(), -1);
  EXPECT_TRUE(tok.IsSpecialId(im_end));
  EXPECT_FALSE(tok.IsSpecialId('a'));

  ChatRequest req;
  req.messages_json = R"([{"role": "user", "content": "1 + 2 = ?"}])";
  req.add_generation_prompt = true;
  auto prompt = ApplyChatTemplate(tok, req);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  EXPECT_EQ(*prompt,
            "<|im_start|>user\n1 + 2 = ?<|im_end|>\n<|im_start|>assistant\n");
  std::vector<int64_t> ids = tok.Encode(*prompt);
  EXPECT_EQ(ids.front(), im_start);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), im_end), 1);
  EXPECT_EQ(tok.Decode(ids), *prompt);
  EXPECT_EQ(tok.Decode(ids, /*skip_special_tokens=*/true),
            "user\n1 + 2 = ?\nassistant\n");
  // Merged words are single tokens.
  EXPECT_EQ(Tokens(tok, tok.Encode("x = the answer 42")),
            (std::vector<std::string>{"x", "\u0120=", "\u0120the",
                                      "\u0120answer", "\u0120", "4", "2"}));
  EXPECT_THAT(ApplyChatTemplate(tok, req, "tool_use"),
              StatusIs(absl::StatusCode::kNotFound,
                       "<builtin tokenizer>: no chat template \"tool_use\""));
}

TEST(TokenizerTest, BuiltinHermesToolCallIsShort) {
  // The agent loop's calls cost ~20 tokens (a tiny model learns them in the
  // tool quickstart's warm start); <tool_call> is an added, non-special token
  // as in Qwen2.5, so skip_special_tokens keeps it.
  Tokenizer tok = MakeBuiltinTokenizer();
  const std::string call =
      "<tool_call>\n{\"name\": \"calculator\", \"arguments\": "
      "{\"expression\": \"57+38\"}}\n</tool_call>";
  std::vector<int64_t> ids = tok.Encode(call);
  EXPECT_EQ(Tokens(tok, ids),
            (std::vector<std::string>{
                "<tool_call>", "\u010a",    "{\"",         "name",
                "\":",         "\u0120\"",  "calculator",  "\",",
                "\u0120\"",    "arguments", "\":",         "\u0120{\"",
                "expression",  "\":",       "\u0120\"",    "5",
                "7",           "+",         "3",           "8",
                "\"}}",        "\u010a",    "</tool_call>"}));
  EXPECT_EQ(tok.Decode(ids, /*skip_special_tokens=*/true), call);
  EXPECT_EQ(ids.front(), kBuiltinSpecialTokenId - 2);
  EXPECT_FALSE(tok.IsSpecialId(ids.front()));
  // The specials are the last ids: <|im_end|> (the eos) is vocab_size - 1.
  EXPECT_EQ(*tok.TokenToId("<|endoftext|>"), kBuiltinSpecialTokenId);
  EXPECT_EQ(tok.eos_token_id(), kBuiltinVocabSize - 1);
}

TEST(TokenizerTest, SaveAndReloadIsIdentical) {
  Tokenizer tok = MakeBuiltinTokenizer();
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/hf_tok";
  ASSERT_TRUE(tok.SaveToDirectory(dir).ok());
  auto reloaded = Tokenizer::FromDirectory(dir);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status();
  EXPECT_EQ(*core::ReadFile(dir + "/tokenizer.json"), tok.tokenizer_json());
  EXPECT_EQ(*core::ReadFile(dir + "/tokenizer_config.json"),
            tok.tokenizer_config_json());
  const std::string text = "<|im_start|>x = 3 * 4\n\n####  the total<|im_end|>";
  EXPECT_EQ(reloaded->Encode(text), tok.Encode(text));
  EXPECT_EQ(reloaded->chat_templates(), tok.chat_templates());

  // chat_template.jinja overrides the config's template and is saved back.
  ASSERT_TRUE(
      core::WriteFileAtomic(dir + "/chat_template.jinja", "T{{ 1 }}").ok());
  auto with_file = Tokenizer::FromDirectory(dir);
  ASSERT_TRUE(with_file.ok());
  EXPECT_EQ(*ApplyChatTemplate(*with_file, ChatRequest()), "T1");
  const std::string dir2 = dir + "2";
  ASSERT_TRUE(with_file->SaveToDirectory(dir2).ok());
  EXPECT_EQ(*core::ReadFile(dir2 + "/chat_template.jinja"), "T{{ 1 }}");
}

TEST(TokenizerTest, AddedTokensStripAndSingleWord) {
  Json json = BaseTokenizerJson({});
  json["added_tokens"] = Json::array(
      {{{"id", 300}, {"content", "<L>"}, {"lstrip", true}, {"special", true}},
       {{"id", 301}, {"content", "<R>"}, {"rstrip", true}, {"special", false}},
       {{"id", 302}, {"content", "cat"}, {"single_word", true}},
       {{"id", 303}, {"content", "<LONG>"}, {"special", true}},
       {{"id", 304}, {"content", "<LONGER>"}, {"special", true}}});
  Tokenizer tok = Load(json);
  EXPECT_THAT(tok.Encode("a  <L>b"), ElementsAre('a', 300, 'b'));
  EXPECT_THAT(tok.Encode("a<R>  b"), ElementsAre('a', 301, 'b'));
  EXPECT_THAT(tok.Encode("cat concat cats"),
              ElementsAre(302, ' ', 'c', 'o', 'n', 'c', 'a', 't', ' ', 'c', 'a',
                          't', 's'));
  EXPECT_THAT(tok.Encode("<LONGER><LONG>"), ElementsAre(304, 303));
  EXPECT_EQ(tok.Decode({'a', 300, 301, 'b'}, /*skip_special_tokens=*/true),
            "a<R>b");
}

TEST(TokenizerTest, SplitBehaviors) {
  const std::string a = "a", b = "b", dash = "-";
  const auto encode = [&](const std::string& behavior,
                          const std::string& text) {
    Json json = BaseTokenizerJson({{a, dash}, {dash, b}, {dash, dash}});
    json["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"},
                                        {"pattern", {{"String", "-"}}},
                                        {"behavior", behavior}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"use_regex", false}}})}};
    Tokenizer tok = Load(json);
    return Tokens(tok, tok.Encode(text));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(encode("Isolated", "a-b"), (V{"a", "-", "b"}));
  EXPECT_EQ(encode("Removed", "a-b"), (V{"a", "b"}));
  EXPECT_EQ(encode("MergedWithPrevious", "a-b"), (V{"a-", "b"}));
  EXPECT_EQ(encode("MergedWithNext", "a-b"), (V{"a", "-b"}));
  EXPECT_EQ(encode("Contiguous", "a--b"), (V{"a", "--", "b"}));
  EXPECT_EQ(encode("Isolated", "a--b"), (V{"a", "-", "-", "b"}));
}

// The real Qwen2 and Llama 3 split patterns (PCRE2: \p{..}, (?i:..),
// \p{N}{1,3}, \s+(?!\S)) drive where merges may apply.
TEST(TokenizerTest, Qwen2AndLlama3SplitPatterns) {
  const std::string kQwen2 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string kLlama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  const std::string sp = RefByteChar(' ');
  const auto tokens = [&](const std::string& pattern, const std::string& text) {
    Json json = BaseTokenizerJson({{"1", "2"},
                                   {"12", "3"},
                                   {"3", "4"},
                                   {sp, sp},
                                   {sp, "b"},
                                   {"'", "L"},
                                   {"'L", "L"},
                                   {"a", "'"}});
    json["pre_tokenizer"] = {
        {"type", "Sequence"},
        {"pretokenizers", Json::array({{{"type", "Split"},
                                        {"pattern", {{"Regex", pattern}}},
                                        {"behavior", "Isolated"},
                                        {"invert", false}},
                                       {{"type", "ByteLevel"},
                                        {"add_prefix_space", false},
                                        {"use_regex", false}}})}};
    Tokenizer tok = Load(json);
    return Tokens(tok, tok.Encode(text));
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(tokens(kQwen2, "1234"), (V{"1", "2", "3", "4"}));
  EXPECT_EQ(tokens(kLlama3, "1234"), (V{"123", "4"}));
  // A whitespace run gives its last space to the following word.
  EXPECT_EQ(tokens(kQwen2, "a   b"), (V{"a", sp + sp, sp + "b"}));
  // Case-insensitive contractions are split off ("a'" never merges).
  EXPECT_EQ(tokens(kQwen2, "a'LL"), (V{"a", "'LL"}));
  EXPECT_EQ(tokens(kLlama3, "a'LL"), (V{"a", "'LL"}));
}

TEST(TokenizerTest, Llama3StylePostProcessorAndIgnoreMerges) {
  const std::string h = "h", e = "e", l = "l", o = "o";
  Json json = BaseTokenizerJson({{h, e}, {l, l}});
  json["model"]["vocab"]["hello"] = 400;  // Reachable only via ignore_merges.
  json["model"]["ignore_merges"] = true;
  json["added_tokens"] = Json::array(
      {{{"id", 500}, {"content", "<|begin_of_text|>"}, {"special", true}}});
  json["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", Json::array({{{"SpecialToken",
                                {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"},
          {"ids", {500}},
          {"tokens", {"<|begin_of_text|>"}}}}}}};
  Tokenizer tok = Load(json, {{"bos_token", "<|begin_of_text|>"}});
  EXPECT_THAT(tok.Encode("hello"), ElementsAre(400));
  EXPECT_THAT(tok.Encode("hello", /*add_special_tokens=*/true),
              ElementsAre(500, 400));
  EXPECT_EQ(Tokens(tok, tok.Encode("helo")),
            (std::vector<std::string>{"he", "l", "o"}));
  EXPECT_EQ(tok.bos_token_id(), 500);
}

TEST(TokenizerTest, NamedChatTemplates) {
  Json config = {{"chat_template",
                  Json::array({{{"name", "default"}, {"template", "D"}},
                               {{"name", "tool_use"}, {"template", "T"}}})}};
  Tokenizer tok = Load(BaseTokenizerJson({}), config);
  ChatRequest req;
  EXPECT_EQ(*ApplyChatTemplate(tok, req), "D");
  req.tools_json = "[]";
  EXPECT_EQ(*ApplyChatTemplate(tok, req), "T");
  EXPECT_EQ(*ApplyChatTemplate(tok, req, "default"), "D");
  auto missing = ApplyChatTemplate(tok, req, "nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("have: default, tool_use"));
}

TEST(TokenizerTest, CleanUpTokenizationSpaces) {
  Tokenizer tok =
      Load(BaseTokenizerJson({}), {{"clean_up_tokenization_spaces", true}});
  EXPECT_EQ(tok.Decode(tok.Encode("Hi , there . I 'm ok")),
            "Hi, there. I'm ok");
}

struct MalformedCase {
  const char* name;
  std::function<void(Json*, Json*)> mutate;
  const char* message;
};

TEST(TokenizerTest, MalformedInputsGiveClearErrors) {
  const std::string a = "a";
  const std::vector<MalformedCase> cases = {
      {"missing model", [](Json* j, Json*) { j->erase("model"); },
       "missing \"model\""},
      {"model not BPE",
       [](Json* j, Json*) { (*j)["model"]["type"] = "WordPiece"; },
       "model.type \"WordPiece\" is not supported"},
      {"no vocab", [](Json* j, Json*) { (*j)["model"].erase("vocab"); },
       "model.vocab must be an object"},
      {"bad vocab id",
       [](Json* j, Json*) { (*j)["model"]["vocab"]["zz"] = "x"; },
       "model.vocab[\"zz\"] is not a valid id"},
      {"merges not list", [](Json* j, Json*) { (*j)["model"]["merges"] = 3; },
       "model.merges must be an array"},
      {"merge token unknown",
       [](Json* j, Json*) { (*j)["model"]["merges"].push_back("a QQ"); },
       "model.merges[1]: token \"QQ\" is not in the vocab"},
      {"legacy merge malformed",
       [](Json* j, Json*) { (*j)["model"]["merges"].push_back("a b c"); },
       "model.merges[1] \"a b c\" is not \"left right\""},
      {"merge not pair",
       [](Json* j, Json*) {
         (*j)["model"]["merges"].push_back(Json::array({"a"}));
       },
       "is not a token pair"},
      {"unknown pre-tokenizer",
       [](Json* j, Json*) {
         (*j)["pre_tokenizer"] = {{"type", "Metaspace"}};
       },
       "pre_tokenizer type \"Metaspace\" is not supported"},
      {"no byte level",
       [](Json* j, Json*) {
         (*j)["pre_tokenizer"] = {{"type", "Split"},
                                  {"pattern", {{"Regex", "\\s+"}}},
                                  {"behavior", "Isolated"}};
       },
       "no ByteLevel step"},
      {"bad regex",
       [](Json* j, Json*) {
         (*j)["pre_tokenizer"] = {{"type", "Split"},
                                  {"pattern", {{"Regex", "(unclosed"}}},
                                  {"behavior", "Isolated"}};
       },
       "bad regex /(unclosed/"},
      {"bad split behavior",
       [](Json* j, Json*) {
         (*j)["pre_tokenizer"] = {{"type", "Split"},
                                  {"pattern", {{"String", "x"}}},
                                  {"behavior", "Sideways"}};
       },
       "behavior \"Sideways\" is not known"},
      {"unknown normalizer",
       [](Json* j, Json*) {
         (*j)["normalizer"] = {{"type", "BertNormalizer"}};
       },
       "normalizer type \"BertNormalizer\" is not supported"},
      {"decoder not byte level",
       [](Json* j, Json*) {
         (*j)["decoder"] = {{"type", "WordPiece"}};
       },
       "is not supported (only ByteLevel)"},
      {"unknown post-processor",
       [](Json* j, Json*) {
         (*j)["post_processor"] = {{"type", "BertProcessing"}};
       },
       "post_processor type \"BertProcessing\" is not supported"},
      {"added token without content",
       [](Json* j, Json*) {
         (*j)["added_tokens"] = Json::array({{{"id", 9}}});
       },
       "needs integer id and content"},
      {"config chat_template type",
       [](Json*, Json* c) { (*c)["chat_template"] = 5; },
       "(tokenizer_config): chat_template must be a string or a list"},
      {"config added_tokens_decoder id",
       [](Json*, Json* c) {
         (*c)["added_tokens_decoder"] = {{"x", {{"content", "q"}}}};
       },
       "added_tokens_decoder[\"x\"] is malformed"},
  };
  for (const MalformedCase& c : cases) {
    Json json = BaseTokenizerJson({{a, a}});
    Json config = Json::object();
    c.mutate(&json, &config);
    auto t = Tokenizer::FromJson(json.dump(), config.dump(), "",
                                 "my/tokenizer.json");
    ASSERT_THAT(
        t, StatusIs(absl::StatusCode::kInvalidArgument, "my/tokenizer.json"))
        << c.name;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.message))
        << c.name;
    EXPECT_THAT(std::string(t.status().message()),
                HasSubstr("my/tokenizer.json"))
        << c.name;
  }
  auto not_json = Tokenizer::FromJson("{\"model\": ", "", "", "t.json");
  EXPECT_THAT(std::string(not_json.status().message()), HasSubstr("t.json: "));
  EXPECT_THAT(std::string(not_json.status().message()),
              HasSubstr("parse error"));
  auto missing = Tokenizer::FromDirectory("/nonexistent/model");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/model/tokenizer.json"));
}

// Random edits of a valid tokenizer.json load or fail cleanly, never crash.
TEST(TokenizerTest, RandomlyMutatedTokenizerJsonNeverCrashes) {
  const std::string json = BuiltinTokenizerJson();
  const std::string config = BuiltinTokenizerConfigJson();
  std::mt19937 rng(11);
  int loaded = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string s = json, c = config;
    std::string* target = trial % 4 == 0 ? &c : &s;
    for (int edit = 0; edit < 2; ++edit) {
      size_t pos = rng() % target->size();
      switch (rng() % 3) {
        case 0:
          target->erase(pos, 1 + rng() % 6);
          break;
        case 1:
          target->insert(pos,
                         target->substr(rng() % target->size(), 1 + rng() % 6));
          break;
        default:
          (*target)[pos] = "{}[]\",:0- a\\"[rng() % 12];
      }
    }
    auto t = Tokenizer::FromJson(s, c);
    if (!t.ok()) {
      EXPECT_FALSE(t.status().message().empty());
      continue;
    }
    ++loaded;
    std::vector<int64_t> ids =
        t->Encode("<|im_start|>Hello 12 world\n<|im_end|>");
    t->Decode(ids);
  }
  EXPECT_GT(loaded, 0);
}

}  // namespace
}  // namespace verl::models
