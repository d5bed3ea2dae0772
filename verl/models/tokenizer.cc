#include "verl/models/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/locid.h>
#include <unicode/normalizer2.h>
#include <unicode/unistr.h>

#include <cstdint>
#include <functional>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/synchronization/mutex.h"
#include "glog/logging.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/status.h"
#include "verl/models/tokenizer_utf8.h"

namespace verl::models {
namespace tokenizer_internal {
namespace {

// Plain (sorted) JSON: ordered_json inserts in O(n), too slow for a 150k vocab.
using Json = nlohmann::json;

// GPT-2's reversible byte <-> printable-code-point mapping.
struct ByteAlphabet {
  std::string byte_to_char[256];
  int char_to_byte[324];
};

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

// The GPT-2 split regex ByteLevel uses when `use_regex` is true.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A compiled PCRE2 pattern (UTF + UCP, JIT when available).
class Regex {
 public:
  static absl::StatusOr<std::shared_ptr<const Regex>> Compile(
      const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(
        reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
        PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return absl::InvalidArgumentError(
          absl::StrCat("bad regex /", pattern, "/ at offset ", err_offset, ": ",
                       reinterpret_cast<const char*>(msg)));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);  // Optional speed-up.
    auto regex = std::shared_ptr<Regex>(new Regex);
    regex->code_ = code;
    return std::shared_ptr<const Regex>(std::move(regex));
  }
  ~Regex() { pcre2_code_free(code_); }

  // [begin, end) byte ranges of all non-overlapping non-empty matches.
  std::vector<std::pair<size_t, size_t>> FindAll(absl::string_view text) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t offset = 0;
    while (offset < text.size()) {
      int rc = pcre2_match(code_, subject, text.size(), offset,
                           PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
        rc = pcre2_match(code_, subject, text.size(), offset,
                         PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, nullptr);
      }
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        LOG(WARNING) << "PCRE2 match error " << rc
                     << "; keeping the rest of the text as one piece";
        break;
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0]) {  // Empty match: step over one code point.
        offset = ov[0] + 1;
        while (offset < text.size() && (text[offset] & 0xC0) == 0x80) ++offset;
        continue;
      }
      out.emplace_back(ov[0], ov[1]);
      offset = ov[1];
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  Regex() = default;
  pcre2_code* code_ = nullptr;
};

enum class NormalizerKind { kNfc, kNfd, kNfkc, kNfkd, kLowercase };

enum class SplitBehavior {
  kRemoved,
  kIsolated,
  kMergedWithPrevious,
  kMergedWithNext,
  kContiguous
};

struct PreTokenizerStep {
  bool byte_level = false;
  // Split, or ByteLevel with use_regex (GPT-2 pattern, isolated).
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;  // ByteLevel only.
};

std::string IcuNormalize(NormalizerKind kind, absl::string_view text) {
  bool ascii = true;
  for (char c : text) ascii &= (static_cast<unsigned char>(c) < 0x80);
  if (ascii && kind != NormalizerKind::kLowercase) return std::string(text);
  icu::UnicodeString u = icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size())));
  UErrorCode err = U_ZERO_ERROR;
  icu::UnicodeString result;
  if (kind == NormalizerKind::kLowercase) {
    result = u.toLower(icu::Locale::getRoot());
  } else {
    const icu::Normalizer2* n =
        kind == NormalizerKind::kNfc   ? icu::Normalizer2::getNFCInstance(err)
        : kind == NormalizerKind::kNfd ? icu::Normalizer2::getNFDInstance(err)
        : kind == NormalizerKind::kNfkc
            ? icu::Normalizer2::getNFKCInstance(err)
            : icu::Normalizer2::getNFKDInstance(err);
    CHECK(U_SUCCESS(err)) << "ICU normalizer unavailable: " << u_errorName(err);
    result = n->normalize(u, err);
    CHECK(U_SUCCESS(err)) << "ICU normalize failed: " << u_errorName(err);
  }
  std::string out;
  result.toUTF8String(out);
  return out;
}

// Applies a Split behaviour to the [begin, end, is_match] ranges covering a
// piece (mirrors tokenizers' SplitDelimiterBehavior).
std::vector<std::pair<size_t, size_t>> ApplyBehavior(
    const std::vector<std::tuple<size_t, size_t, bool>>& ranges,
    SplitBehavior behavior) {
  std::vector<std::pair<size_t, size_t>> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (const auto& [b, e, m] : ranges) out.emplace_back(b, e);
      break;
    case SplitBehavior::kRemoved:
      for (const auto& [b, e, m] : ranges)
        if (!m) out.emplace_back(b, e);
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& [b, e, m] : ranges) {
        if (m && !previous_match && !out.empty()) {
          out.back().second = e;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (auto it = ranges.rbegin(); it != ranges.rend(); ++it) {
        const auto& [b, e, m] = *it;
        if (m && !previous_match && !out.empty()) {
          out.back().first = b;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      std::reverse(out.begin(), out.end());
      break;
    case SplitBehavior::kContiguous:
      for (const auto& [b, e, m] : ranges) {
        if (m == previous_match && !out.empty()) {
          out.back().second = e;
        } else {
          out.emplace_back(b, e);
        }
        previous_match = m;
      }
      break;
  }
  return out;
}

absl::Status Invalid(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// Optional-bool field with default.
bool BoolField(const Json& obj, const char* key, bool dflt) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return dflt;
  return it->get<bool>();
}

}  // namespace

struct State {
  std::string source;
  std::string tokenizer_json, config_json, chat_template_file;

  absl::flat_hash_map<std::string, int> token_to_id;
  std::vector<std::string> id_to_token;
  std::vector<uint8_t> known;    // id has a token
  std::vector<uint8_t> special;  // id is special
  std::vector<int> added_index;  // id -> index into `added`, or -1
  int base_vocab_size = 0;

  absl::flat_hash_map<uint64_t, std::pair<int, int>> merges;  // -> rank, id
  int byte_ids[256];
  bool ignore_merges = false;
  int model_unk_id = -1;

  std::vector<AddedToken> added;
  std::vector<int> added_by_first_byte[256];  // longest first

  std::vector<NormalizerKind> normalizers;
  std::vector<PreTokenizerStep> pre_tokenizers;
  std::vector<int> bos_template_ids, eos_template_ids;

  bool clean_up_spaces = false;
  std::string bos, eos, pad, unk;
  int bos_id = -1, eos_id = -1, pad_id = -1, unk_id = -1;
  std::map<std::string, std::string> chat_templates;

  mutable absl::Mutex cache_mu;
  mutable absl::flat_hash_map<std::string, std::vector<int>> cache
      ABSL_GUARDED_BY(cache_mu);
  std::optional<ChatFormatter> chat_formatter;

  static uint64_t PairKey(int a, int b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) |
           static_cast<uint32_t>(b);
  }

  void SetToken(int id, const std::string& token) {
    if (id >= static_cast<int>(id_to_token.size())) {
      id_to_token.resize(id + 1);
      known.resize(id + 1, 0);
      special.resize(id + 1, 0);
      added_index.resize(id + 1, -1);
    }
    id_to_token[id] = token;
    known[id] = 1;
  }

  absl::Status ParseModel(const Json& model);
  absl::Status ParseAddedTokens(const Json& list);
  absl::Status AddAddedToken(const AddedToken& token);
  absl::Status ParseNormalizer(const Json& node);
  absl::Status ParsePreTokenizer(const Json& node);
  absl::Status ParsePostProcessor(const Json& node);
  absl::Status ParseDecoder(const Json& node);
  absl::Status ParseConfig(const Json& config);

  // Segments of `text`: (piece, added-token id or -1).
  std::vector<std::pair<absl::string_view, int>> SplitAdded(
      absl::string_view text) const;
  std::vector<std::string> PreTokenize(std::string text) const;
  void EncodeSegment(absl::string_view text, std::vector<int>* ids) const;
  std::vector<int> Bpe(absl::string_view piece) const;
  std::vector<int> BpeUncached(absl::string_view piece) const;
};

absl::Status State::ParseModel(const Json& model) {
  if (!model.is_object()) return Invalid(source, "missing \"model\" object");
  if (model.contains("type") &&
      (!model["type"].is_string() || model["type"] != "BPE")) {
    return Invalid(source, absl::StrCat("model.type ", model["type"].dump(),
                                        " is not supported (only \"BPE\")"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
      return Invalid(source, absl::StrCat("model.", key, " is not supported"));
  }
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object())
    return Invalid(source, "model.vocab must be an object {token: id}");
  for (const auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > (1 << 30)) {
      return Invalid(source,
                     absl::StrCat("model.vocab[\"", token,
                                  "\"] is not a valid id: ", id.dump()));
    }
    int i = id.get<int>();
    token_to_id[token] = i;
    SetToken(i, token);
  }
  base_vocab_size = static_cast<int>(vocab_it->size());

  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array())
    return Invalid(source, "model.merges must be an array");
  merges.reserve(merges_it->size());
  int rank = 0;
  for (const Json& m : *merges_it) {
    std::string a, b;
    if (m.is_string()) {  // Legacy "a b".
      const std::string s = m.get<std::string>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != s.npos)
        return Invalid(source, absl::StrCat("model.merges[", rank, "] \"", s,
                                            "\" is not \"left right\""));
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
               m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return Invalid(source, absl::StrCat("model.merges[", rank, "] ", m.dump(),
                                          " is not a token pair"));
    }
    auto ia = token_to_id.find(a), ib = token_to_id.find(b),
         iab = token_to_id.find(a + b);
    for (auto [it, tok] : {std::pair{ia, a}, {ib, b}, {iab, a + b}}) {
      if (it == token_to_id.end())
        return Invalid(source,
                       absl::StrCat("model.merges[", rank, "]: token \"", tok,
                                    "\" is not in the vocab"));
    }
    merges.try_emplace(PairKey(ia->second, ib->second), rank, iab->second);
    ++rank;
  }
  ignore_merges = BoolField(model, "ignore_merges", false);
  auto unk_it = model.find("unk_token");
  if (unk_it != model.end() && unk_it->is_string()) {
    auto it = token_to_id.find(unk_it->get<std::string>());
    if (it != token_to_id.end()) model_unk_id = it->second;
  }
  const ByteAlphabet& alphabet = GetByteAlphabet();
  for (int b = 0; b < 256; ++b) {
    auto it = token_to_id.find(alphabet.byte_to_char[b]);
    byte_ids[b] = it == token_to_id.end() ? model_unk_id : it->second;
  }
  return absl::OkStatus();
}

absl::Status State::AddAddedToken(const AddedToken& token) {
  if (token.content.empty())
    return Invalid(
        source, absl::StrCat("added token ", token.id, " has empty content"));
  if (token.id < static_cast<int>(added_index.size()) &&
      added_index[token.id] >= 0) {
    return absl::OkStatus();  // Already known (tokenizer.json wins).
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
  return absl::OkStatus();
}

AddedToken ParseAddedTokenFields(const Json& t) {
  AddedToken a;
  a.content = t.value("content", std::string());
  a.special = BoolField(t, "special", false);
  a.lstrip = BoolField(t, "lstrip", false);
  a.rstrip = BoolField(t, "rstrip", false);
  a.single_word = BoolField(t, "single_word", false);
  a.normalized = BoolField(t, "normalized", !a.special);
  return a;
}

absl::Status State::ParseAddedTokens(const Json& list) {
  if (list.is_null()) return absl::OkStatus();
  if (!list.is_array()) return Invalid(source, "added_tokens must be a list");
  for (const Json& t : list) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return Invalid(source, absl::StrCat("added_tokens entry ", t.dump(),
                                          " needs integer id and content"));
    }
    AddedToken a = ParseAddedTokenFields(t);
    a.id = t["id"].get<int>();
    VERL_RETURN_IF_ERROR(AddAddedToken(a));
  }
  return absl::OkStatus();
}

absl::Status State::ParseNormalizer(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array())
      return Invalid(source, "normalizer Sequence needs \"normalizers\"");
    for (const Json& n : node["normalizers"])
      VERL_RETURN_IF_ERROR(ParseNormalizer(n));
    return absl::OkStatus();
  }
  static const std::map<std::string, NormalizerKind> kKinds = {
      {"NFC", NormalizerKind::kNfc},
      {"NFD", NormalizerKind::kNfd},
      {"NFKC", NormalizerKind::kNfkc},
      {"NFKD", NormalizerKind::kNfkd},
      {"Lowercase", NormalizerKind::kLowercase}};
  auto it = kKinds.find(type);
  if (it == kKinds.end())
    return Invalid(source, absl::StrCat("normalizer type \"", type,
                                        "\" is not supported (NFC, NFD, "
                                        "NFKC, NFKD, Lowercase, Sequence)"));
  normalizers.push_back(it->second);
  return absl::OkStatus();
}

absl::Status State::ParsePreTokenizer(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      return Invalid(source, "pre_tokenizer Sequence needs \"pretokenizers\"");
    for (const Json& p : node["pretokenizers"])
      VERL_RETURN_IF_ERROR(ParsePreTokenizer(p));
    return absl::OkStatus();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = BoolField(node, "add_prefix_space", true);
    if (BoolField(node, "use_regex", true)) {
      static const auto* gpt2 = new std::shared_ptr<const Regex>(
          Regex::Compile(kGpt2Pattern).value());
      step.regex = *gpt2;
    }
  } else if (type == "Split") {
    const Json* pattern = node.contains("pattern") ? &node["pattern"] : nullptr;
    std::string regex;
    if (pattern && pattern->contains("Regex") &&
        (*pattern)["Regex"].is_string()) {
      regex = (*pattern)["Regex"].get<std::string>();
    } else if (pattern && pattern->contains("String") &&
               (*pattern)["String"].is_string()) {
      regex = "\\Q" + (*pattern)["String"].get<std::string>() + "\\E";
    } else {
      return Invalid(
          source, "pre_tokenizer Split needs pattern {\"Regex\"|\"String\"}");
    }
    auto compiled = Regex::Compile(regex);
    if (!compiled.ok())
      return Invalid(source, absl::StrCat("pre_tokenizer Split: ",
                                          compiled.status().message()));
    step.regex = *compiled;
    static const std::map<std::string, SplitBehavior> kBehaviors = {
        {"Removed", SplitBehavior::kRemoved},
        {"Isolated", SplitBehavior::kIsolated},
        {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
        {"MergedWithNext", SplitBehavior::kMergedWithNext},
        {"Contiguous", SplitBehavior::kContiguous}};
    auto b = kBehaviors.find(node.value("behavior", std::string("Isolated")));
    if (b == kBehaviors.end())
      return Invalid(source,
                     absl::StrCat("pre_tokenizer Split behavior ",
                                  node["behavior"].dump(), " is not known"));
    step.behavior = b->second;
    step.invert = BoolField(node, "invert", false);
  } else {
    return Invalid(source, absl::StrCat("pre_tokenizer type \"", type,
                                        "\" is not supported (Sequence, "
                                        "Split, ByteLevel)"));
  }
  pre_tokenizers.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status State::ParsePostProcessor(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "ByteLevel") return absl::OkStatus();  // Offsets only.
  if (type == "Sequence") {
    if (!node.contains("processors") || !node["processors"].is_array())
      return Invalid(source, "post_processor Sequence needs \"processors\"");
    for (const Json& p : node["processors"])
      VERL_RETURN_IF_ERROR(ParsePostProcessor(p));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing")
    return Invalid(source, absl::StrCat("post_processor type \"", type,
                                        "\" is not supported (ByteLevel, "
                                        "TemplateProcessing, Sequence)"));
  if (!node.contains("single") || !node["single"].is_array())
    return Invalid(source,
                   "post_processor TemplateProcessing needs \"single\"");
  bool seen_sequence = false;
  for (const Json& piece : node["single"]) {
    if (piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken"))
      return Invalid(source, absl::StrCat("post_processor template piece ",
                                          piece.dump(), " is not known"));
    const std::string name = piece["SpecialToken"].value("id", std::string());
    const Json* ids = nullptr;
    if (node.contains("special_tokens") &&
        node["special_tokens"].contains(name))
      ids = &node["special_tokens"][name]["ids"];
    if (ids == nullptr || !ids->is_array())
      return Invalid(source, absl::StrCat("post_processor special token \"",
                                          name, "\" has no ids"));
    for (const Json& id : *ids) {
      (seen_sequence ? eos_template_ids : bos_template_ids)
          .push_back(id.get<int>());
    }
  }
  return absl::OkStatus();
}

absl::Status State::ParseDecoder(const Json& node) {
  const std::string type = node.is_object() ? node.value("type", "") : "";
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence" && node.contains("decoders") &&
      node["decoders"].is_array() && node["decoders"].size() == 1)
    return ParseDecoder(node["decoders"][0]);
  return Invalid(source, absl::StrCat("decoder ", node.dump(),
                                      " is not supported (only ByteLevel)"));
}

absl::Status State::ParseConfig(const Json& config) {
  if (!config.is_object())
    return Invalid(source, "tokenizer_config.json must be a JSON object");
  // Tokens given as "text" or {"content": "text", ...}.
  const auto token_field = [&](const char* key) -> std::string {
    auto it = config.find(key);
    if (it == config.end()) return "";
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content"))
      return (*it)["content"].get<std::string>();
    return "";
  };
  if (config.contains("added_tokens_decoder")) {
    const Json& dec = config["added_tokens_decoder"];
    if (!dec.is_object())
      return Invalid(source, "added_tokens_decoder must be an object");
    for (const auto& [id_str, t] : dec.items()) {
      int id = 0;
      if (!absl::SimpleAtoi(id_str, &id) || id < 0 || !t.is_object() ||
          !t.contains("content") || !t["content"].is_string())
        return Invalid(source, absl::StrCat("added_tokens_decoder[\"", id_str,
                                            "\"] is malformed"));
      AddedToken a = ParseAddedTokenFields(t);
      a.id = id;
      VERL_RETURN_IF_ERROR(AddAddedToken(a));
    }
  }
  const auto resolve = [&](const std::string& tok, int* id) {
    if (tok.empty()) return;
    auto it = token_to_id.find(tok);
    if (it != token_to_id.end()) {
      *id = it->second;
      special[*id] = 1;
    }
  };
  bos = token_field("bos_token");
  eos = token_field("eos_token");
  pad = token_field("pad_token");
  unk = token_field("unk_token");
  resolve(bos, &bos_id);
  resolve(eos, &eos_id);
  resolve(pad, &pad_id);
  resolve(unk, &unk_id);
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    for (const Json& t : config["additional_special_tokens"]) {
      int id = -1;
      if (t.is_string()) resolve(t.get<std::string>(), &id);
    }
  }
  clean_up_spaces = BoolField(config, "clean_up_tokenization_spaces", false);
  if (config.contains("chat_template")) {
    const Json& ct = config["chat_template"];
    if (ct.is_string()) {
      chat_templates["default"] = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const Json& named : ct) {
        if (!named.is_object() || !named.contains("name") ||
            !named.contains("template") || !named["name"].is_string() ||
            !named["template"].is_string())
          return Invalid(source,
                         "chat_template list entries need name and template");
        chat_templates[named["name"].get<std::string>()] =
            named["template"].get<std::string>();
      }
    } else if (!ct.is_null()) {
      return Invalid(source, "chat_template must be a string or a list");
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<absl::string_view, int>> State::SplitAdded(
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

std::vector<std::string> State::PreTokenize(std::string text) const {
  std::vector<std::string> pieces;
  pieces.push_back(std::move(text));
  for (const PreTokenizerStep& step : pre_tokenizers) {
    std::vector<std::string> next;
    for (std::string& piece : pieces) {
      if (step.byte_level && step.add_prefix_space && piece[0] != ' ')
        piece.insert(piece.begin(), ' ');
      if (step.regex == nullptr) {
        next.push_back(std::move(piece));
        continue;
      }
      std::vector<std::tuple<size_t, size_t, bool>> ranges;
      size_t pos = 0;
      for (auto [b, e] : step.regex->FindAll(piece)) {
        if (b > pos) ranges.emplace_back(pos, b, step.invert);
        ranges.emplace_back(b, e, !step.invert);
        pos = e;
      }
      if (pos < piece.size())
        ranges.emplace_back(pos, piece.size(), step.invert);
      for (auto [b, e] : ApplyBehavior(ranges, step.behavior))
        if (e > b) next.push_back(piece.substr(b, e - b));
    }
    pieces = std::move(next);
  }
  return pieces;
}

std::vector<int> State::BpeUncached(absl::string_view piece) const {
  const ByteAlphabet& alphabet = GetByteAlphabet();
  if (ignore_merges) {
    std::string mapped;
    for (char c : piece)
      mapped += alphabet.byte_to_char[static_cast<unsigned char>(c)];
    auto it = token_to_id.find(mapped);
    if (it != token_to_id.end()) return {it->second};
  }
  struct Symbol {
    int id, prev, next;
    bool alive;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (char c : piece) {
    int id = byte_ids[static_cast<unsigned char>(c)];
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
    auto it = merges.find(PairKey(sym[left].id, sym[right].id));
    if (it != merges.end())
      queue.push({it->second.first, left, it->second.second});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i);
  while (!queue.empty()) {
    Candidate c = queue.top();
    queue.pop();
    Symbol& left = sym[c.pos];
    if (!left.alive || left.next < 0) continue;
    auto it = merges.find(PairKey(left.id, sym[left.next].id));
    if (it == merges.end() || it->second.second != c.new_id) continue;
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

std::vector<int> State::Bpe(absl::string_view piece) const {
  std::string key(piece);
  {
    absl::MutexLock lock(&cache_mu);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::vector<int> ids = BpeUncached(piece);
  absl::MutexLock lock(&cache_mu);
  if (cache.size() >= 200000) cache.clear();  // Bound memory.
  cache.emplace(std::move(key), ids);
  return ids;
}

void State::EncodeSegment(absl::string_view text, std::vector<int>* ids) const {
  std::string normalized(text);
  for (NormalizerKind n : normalizers) normalized = IcuNormalize(n, normalized);
  if (normalized.empty()) return;
  for (const std::string& piece : PreTokenize(std::move(normalized))) {
    std::vector<int> word = Bpe(piece);
    ids->insert(ids->end(), word.begin(), word.end());
  }
}

}  // namespace tokenizer_internal

using tokenizer_internal::Json;
using tokenizer_internal::State;

absl::StatusOr<Tokenizer> Tokenizer::FromJson(
    absl::string_view tokenizer_json, absl::string_view config_json,
    absl::string_view chat_template_jinja, absl::string_view source) {
  auto state = std::make_shared<State>();
  state->source = std::string(source);
  state->tokenizer_json = std::string(tokenizer_json);
  state->config_json = config_json.empty() ? "{}" : std::string(config_json);
  state->chat_template_file = std::string(chat_template_jinja);
  try {
    Json root = Json::parse(state->tokenizer_json);
    if (!root.is_object())
      return tokenizer_internal::Invalid(source, "top level is not an object");
    if (!root.contains("model"))
      return tokenizer_internal::Invalid(source, "missing \"model\"");
    VERL_RETURN_IF_ERROR(state->ParseModel(root["model"]));
    VERL_RETURN_IF_ERROR(
        state->ParseAddedTokens(root.value("added_tokens", Json())));
    VERL_RETURN_IF_ERROR(
        state->ParseNormalizer(root.value("normalizer", Json())));
    VERL_RETURN_IF_ERROR(
        state->ParsePreTokenizer(root.value("pre_tokenizer", Json())));
    bool byte_level = false;
    for (const auto& step : state->pre_tokenizers)
      byte_level |= step.byte_level;
    if (!byte_level)
      return tokenizer_internal::Invalid(
          source,
          "pre_tokenizer has no ByteLevel step (only byte-level BPE "
          "is supported)");
    VERL_RETURN_IF_ERROR(
        state->ParsePostProcessor(root.value("post_processor", Json())));
    VERL_RETURN_IF_ERROR(state->ParseDecoder(root.value("decoder", Json())));
  } catch (const nlohmann::json::exception& e) {
    return tokenizer_internal::Invalid(source, e.what());
  }
  try {
    std::string config_source = absl::StrCat(source, " (tokenizer_config)");
    std::swap(state->source, config_source);
    VERL_RETURN_IF_ERROR(state->ParseConfig(Json::parse(state->config_json)));
    std::swap(state->source, config_source);
  } catch (const nlohmann::json::exception& e) {
    return tokenizer_internal::Invalid(
        absl::StrCat(source, " (tokenizer_config)"), e.what());
  }
  if (!state->chat_template_file.empty())
    state->chat_templates["default"] = state->chat_template_file;
  state->chat_formatter.emplace(
      state->chat_templates,
      std::map<std::string, std::string>{{"bos_token", state->bos},
                                         {"eos_token", state->eos},
                                         {"pad_token", state->pad},
                                         {"unk_token", state->unk}},
      state->source);
  Tokenizer tokenizer;
  tokenizer.state_ = std::move(state);
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
      core::WriteFileAtomic(dir + "/tokenizer.json", state_->tokenizer_json));
  VERL_RETURN_IF_ERROR(core::WriteFileAtomic(dir + "/tokenizer_config.json",
                                             state_->config_json));
  if (!state_->chat_template_file.empty()) {
    VERL_RETURN_IF_ERROR(core::WriteFileAtomic(dir + "/chat_template.jinja",
                                               state_->chat_template_file));
  }
  return absl::OkStatus();
}

std::vector<int> Tokenizer::Encode(absl::string_view text,
                                   bool add_special_tokens) const {
  const State& s = *state_;
  std::string valid;
  if (!IsValidUtf8(text)) {
    valid = Utf8Lossy(text);
    text = valid;
  }
  std::vector<int> ids;
  if (add_special_tokens) ids = s.bos_template_ids;
  for (auto [segment, added_id] : s.SplitAdded(text)) {
    if (added_id >= 0) {
      ids.push_back(added_id);
    } else {
      s.EncodeSegment(segment, &ids);
    }
  }
  if (add_special_tokens)
    ids.insert(ids.end(), s.eos_template_ids.begin(), s.eos_template_ids.end());
  return ids;
}

std::string Tokenizer::Decode(absl::Span<const int> ids,
                              bool skip_special_tokens) const {
  const State& s = *state_;
  const auto& alphabet = tokenizer_internal::GetByteAlphabet();
  std::string text, bytes;
  const auto flush = [&] {
    text += Utf8Lossy(bytes);
    bytes.clear();
  };
  for (int id : ids) {
    if (id < 0 || id >= static_cast<int>(s.known.size()) || !s.known[id])
      continue;
    if (skip_special_tokens && s.special[id]) continue;
    const std::string& token = s.id_to_token[id];
    if (s.added_index[id] >= 0) {  // Added tokens decode to their content.
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
  if (s.clean_up_spaces) {
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
  return static_cast<int>(state_->id_to_token.size());
}
int Tokenizer::base_vocab_size() const { return state_->base_vocab_size; }

std::optional<int> Tokenizer::TokenToId(absl::string_view token) const {
  auto it = state_->token_to_id.find(token);
  if (it == state_->token_to_id.end()) return std::nullopt;
  return it->second;
}

std::optional<std::string> Tokenizer::IdToToken(int id) const {
  if (id < 0 || id >= vocab_size() || !state_->known[id]) return std::nullopt;
  return state_->id_to_token[id];
}

bool Tokenizer::IsSpecialId(int id) const {
  return id >= 0 && id < vocab_size() && state_->special[id];
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
  return state_->added;
}
const std::string& Tokenizer::bos_token() const { return state_->bos; }
const std::string& Tokenizer::eos_token() const { return state_->eos; }
const std::string& Tokenizer::pad_token() const { return state_->pad; }
const std::string& Tokenizer::unk_token() const { return state_->unk; }
int Tokenizer::bos_token_id() const { return state_->bos_id; }
int Tokenizer::eos_token_id() const { return state_->eos_id; }
int Tokenizer::pad_token_id() const { return state_->pad_id; }
int Tokenizer::unk_token_id() const { return state_->unk_id; }
const std::map<std::string, std::string>& Tokenizer::chat_templates() const {
  return state_->chat_templates;
}
const std::string& Tokenizer::tokenizer_json() const {
  return state_->tokenizer_json;
}
const std::string& Tokenizer::tokenizer_config_json() const {
  return state_->config_json;
}

absl::StatusOr<std::string> Tokenizer::ApplyChatTemplate(
    const ChatRequest& request, absl::string_view template_name) const {
  return state_->chat_formatter->Apply(request, template_name);
}

}  // namespace verl::models
