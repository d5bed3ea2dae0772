#include "verl/models/tokenizer/tokenizer_json.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "verl/core/status.h"

namespace verl::models::tokenizer_internal {
namespace {

// Plain (sorted) JSON: ordered_json inserts in O(n), too slow for a 150k vocab.
using Json = nlohmann::json;

absl::Status Invalid(absl::string_view source, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": ", what));
}

// Optional-bool field with default.
bool BoolField(const Json& obj, const char* key, bool dflt) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_boolean()) return dflt;
  return it->get<bool>();
}

AddedToken ParseAddedTokenFields(const Json& t);

// Fills `d_` from the parsed JSON; `source_` prefixes error messages.
class Parser {
 public:
  Parser(TokenizerData& data, std::string source_name)
      : d_(data), source_(std::move(source_name)) {}

  absl::Status ParseModel(const Json& model);
  absl::Status ParseAddedTokens(const Json& list);
  absl::Status AddAddedToken(const AddedToken& token);
  absl::Status ParseNormalizer(const Json& node);
  absl::Status ParsePreTokenizer(const Json& node);
  absl::Status ParsePostProcessor(const Json& node);
  absl::Status ParseDecoder(const Json& node);
  absl::Status ParseConfig(const Json& config);

 private:
  TokenizerData& d_;
  const std::string source_;
};

absl::Status Parser::ParseModel(const Json& model) {
  if (!model.is_object()) return Invalid(source_, "missing \"model\" object");
  if (model.contains("type") &&
      (!model["type"].is_string() || model["type"] != "BPE")) {
    return Invalid(source_, absl::StrCat("model.type ", model["type"].dump(),
                                         " is not supported (only \"BPE\")"));
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    auto it = model.find(key);
    if (it != model.end() && it->is_string() && !it->get<std::string>().empty())
      return Invalid(source_, absl::StrCat("model.", key, " is not supported"));
  }
  auto vocab_it = model.find("vocab");
  if (vocab_it == model.end() || !vocab_it->is_object())
    return Invalid(source_, "model.vocab must be an object {token: id}");
  for (const auto& [token, id] : vocab_it->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
        id.get<int64_t>() > (1 << 30)) {
      return Invalid(source_,
                     absl::StrCat("model.vocab[\"", token,
                                  "\"] is not a valid id: ", id.dump()));
    }
    int i = id.get<int>();
    d_.vocab.token_to_id[token] = i;
    d_.vocab.SetToken(i, token);
  }
  d_.vocab.base_vocab_size = static_cast<int>(vocab_it->size());

  auto merges_it = model.find("merges");
  if (merges_it == model.end() || !merges_it->is_array())
    return Invalid(source_, "model.merges must be an array");
  int rank = 0;
  for (const Json& m : *merges_it) {
    std::string a, b;
    if (m.is_string()) {  // Legacy "a b".
      const std::string s = m.get<std::string>();
      size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != s.npos)
        return Invalid(source_, absl::StrCat("model.merges[", rank, "] \"", s,
                                             "\" is not \"left right\""));
      a = s.substr(0, space);
      b = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() &&
               m[1].is_string()) {
      a = m[0].get<std::string>();
      b = m[1].get<std::string>();
    } else {
      return Invalid(source_, absl::StrCat("model.merges[", rank, "] ",
                                           m.dump(), " is not a token pair"));
    }
    auto ia = d_.vocab.token_to_id.find(a), ib = d_.vocab.token_to_id.find(b),
         iab = d_.vocab.token_to_id.find(a + b);
    for (auto [it, tok] : {std::pair{ia, a}, {ib, b}, {iab, a + b}}) {
      if (it == d_.vocab.token_to_id.end())
        return Invalid(source_,
                       absl::StrCat("model.merges[", rank, "]: token \"", tok,
                                    "\" is not in the vocab"));
    }
    d_.bpe.AddMerge(ia->second, ib->second, rank, iab->second);
    ++rank;
  }
  d_.bpe.set_ignore_merges(BoolField(model, "ignore_merges", false));
  int model_unk_id = -1;
  auto unk_it = model.find("unk_token");
  if (unk_it != model.end() && unk_it->is_string()) {
    auto it = d_.vocab.token_to_id.find(unk_it->get<std::string>());
    if (it != d_.vocab.token_to_id.end()) model_unk_id = it->second;
  }
  d_.bpe.SetByteIds(d_.vocab, model_unk_id);
  return absl::OkStatus();
}

absl::Status Parser::AddAddedToken(const AddedToken& token) {
  if (token.content.empty())
    return Invalid(
        source_, absl::StrCat("added token ", token.id, " has empty content"));
  d_.vocab.AddAddedToken(token);
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

absl::Status Parser::ParseAddedTokens(const Json& list) {
  if (list.is_null()) return absl::OkStatus();
  if (!list.is_array()) return Invalid(source_, "added_tokens must be a list");
  for (const Json& t : list) {
    if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() ||
        !t.contains("content") || !t["content"].is_string()) {
      return Invalid(source_, absl::StrCat("added_tokens entry ", t.dump(),
                                           " needs integer id and content"));
    }
    AddedToken a = ParseAddedTokenFields(t);
    a.id = t["id"].get<int>();
    VERL_RETURN_IF_ERROR(AddAddedToken(a));
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseNormalizer(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "Sequence") {
    if (!node.contains("normalizers") || !node["normalizers"].is_array())
      return Invalid(source_, "normalizer Sequence needs \"normalizers\"");
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
    return Invalid(source_, absl::StrCat("normalizer type \"", type,
                                         "\" is not supported (NFC, NFD, "
                                         "NFKC, NFKD, Lowercase, Sequence)"));
  d_.normalizers.push_back(it->second);
  return absl::OkStatus();
}

absl::Status Parser::ParsePreTokenizer(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "Sequence") {
    if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
      return Invalid(source_, "pre_tokenizer Sequence needs \"pretokenizers\"");
    for (const Json& p : node["pretokenizers"])
      VERL_RETURN_IF_ERROR(ParsePreTokenizer(p));
    return absl::OkStatus();
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.byte_level = true;
    step.add_prefix_space = BoolField(node, "add_prefix_space", true);
    if (BoolField(node, "use_regex", true)) {
      step.regex = Gpt2Regex();
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
          source_, "pre_tokenizer Split needs pattern {\"Regex\"|\"String\"}");
    }
    auto compiled = core::Regex::Compile(regex);
    if (!compiled.ok())
      return Invalid(source_, absl::StrCat("pre_tokenizer Split: ",
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
      return Invalid(source_,
                     absl::StrCat("pre_tokenizer Split behavior ",
                                  node["behavior"].dump(), " is not known"));
    step.behavior = b->second;
    step.invert = BoolField(node, "invert", false);
  } else {
    return Invalid(source_, absl::StrCat("pre_tokenizer type \"", type,
                                         "\" is not supported (Sequence, "
                                         "Split, ByteLevel)"));
  }
  d_.pre_tokenizers.push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status Parser::ParsePostProcessor(const Json& node) {
  if (node.is_null()) return absl::OkStatus();
  const std::string type = node.value("type", std::string());
  if (type == "ByteLevel") return absl::OkStatus();  // Offsets only.
  if (type == "Sequence") {
    if (!node.contains("processors") || !node["processors"].is_array())
      return Invalid(source_, "post_processor Sequence needs \"processors\"");
    for (const Json& p : node["processors"])
      VERL_RETURN_IF_ERROR(ParsePostProcessor(p));
    return absl::OkStatus();
  }
  if (type != "TemplateProcessing")
    return Invalid(source_, absl::StrCat("post_processor type \"", type,
                                         "\" is not supported (ByteLevel, "
                                         "TemplateProcessing, Sequence)"));
  if (!node.contains("single") || !node["single"].is_array())
    return Invalid(source_,
                   "post_processor TemplateProcessing needs \"single\"");
  bool seen_sequence = false;
  for (const Json& piece : node["single"]) {
    if (piece.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    if (!piece.contains("SpecialToken"))
      return Invalid(source_, absl::StrCat("post_processor template piece ",
                                           piece.dump(), " is not known"));
    const std::string name = piece["SpecialToken"].value("id", std::string());
    const Json* ids = nullptr;
    if (node.contains("special_tokens") &&
        node["special_tokens"].contains(name))
      ids = &node["special_tokens"][name]["ids"];
    if (ids == nullptr || !ids->is_array())
      return Invalid(source_, absl::StrCat("post_processor special token \"",
                                           name, "\" has no ids"));
    for (const Json& id : *ids) {
      (seen_sequence ? d_.eos_template_ids : d_.bos_template_ids)
          .push_back(id.get<int>());
    }
  }
  return absl::OkStatus();
}

absl::Status Parser::ParseDecoder(const Json& node) {
  const std::string type = node.is_object() ? node.value("type", "") : "";
  if (type == "ByteLevel") return absl::OkStatus();
  if (type == "Sequence" && node.contains("decoders") &&
      node["decoders"].is_array() && node["decoders"].size() == 1)
    return ParseDecoder(node["decoders"][0]);
  return Invalid(source_, absl::StrCat("decoder ", node.dump(),
                                       " is not supported (only ByteLevel)"));
}

absl::Status Parser::ParseConfig(const Json& config) {
  if (!config.is_object())
    return Invalid(source_, "tokenizer_config.json must be a JSON object");
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
      return Invalid(source_, "added_tokens_decoder must be an object");
    for (const auto& [id_str, t] : dec.items()) {
      int id = 0;
      if (!absl::SimpleAtoi(id_str, &id) || id < 0 || !t.is_object() ||
          !t.contains("content") || !t["content"].is_string())
        return Invalid(source_, absl::StrCat("added_tokens_decoder[\"", id_str,
                                             "\"] is malformed"));
      AddedToken a = ParseAddedTokenFields(t);
      a.id = id;
      VERL_RETURN_IF_ERROR(AddAddedToken(a));
    }
  }
  const auto resolve = [&](const std::string& tok, int* id) {
    if (tok.empty()) return;
    auto it = d_.vocab.token_to_id.find(tok);
    if (it != d_.vocab.token_to_id.end()) {
      *id = it->second;
      d_.vocab.special[*id] = 1;
    }
  };
  d_.bos = token_field("bos_token");
  d_.eos = token_field("eos_token");
  d_.pad = token_field("pad_token");
  d_.unk = token_field("unk_token");
  resolve(d_.bos, &d_.bos_id);
  resolve(d_.eos, &d_.eos_id);
  resolve(d_.pad, &d_.pad_id);
  resolve(d_.unk, &d_.unk_id);
  if (config.contains("additional_special_tokens") &&
      config["additional_special_tokens"].is_array()) {
    for (const Json& t : config["additional_special_tokens"]) {
      int id = -1;
      if (t.is_string()) resolve(t.get<std::string>(), &id);
    }
  }
  d_.clean_up_spaces = BoolField(config, "clean_up_tokenization_spaces", false);
  if (config.contains("chat_template")) {
    const Json& ct = config["chat_template"];
    if (ct.is_string()) {
      d_.chat_templates["default"] = ct.get<std::string>();
    } else if (ct.is_array()) {
      for (const Json& named : ct) {
        if (!named.is_object() || !named.contains("name") ||
            !named.contains("template") || !named["name"].is_string() ||
            !named["template"].is_string())
          return Invalid(source_,
                         "chat_template list entries need name and template");
        d_.chat_templates[named["name"].get<std::string>()] =
            named["template"].get<std::string>();
      }
    } else if (!ct.is_null()) {
      return Invalid(source_, "chat_template must be a string or a list");
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<TokenizerData>> ParseTokenizerFiles(
    absl::string_view tokenizer_json, absl::string_view config_json,
    absl::string_view chat_template_jinja, absl::string_view source) {
  auto data = std::make_shared<TokenizerData>();
  data->source = std::string(source);
  data->tokenizer_json = std::string(tokenizer_json);
  data->config_json = config_json.empty() ? "{}" : std::string(config_json);
  data->chat_template_file = std::string(chat_template_jinja);
  try {
    Parser parser(*data, std::string(source));
    Json root = Json::parse(data->tokenizer_json);
    if (!root.is_object()) return Invalid(source, "top level is not an object");
    if (!root.contains("model")) return Invalid(source, "missing \"model\"");
    VERL_RETURN_IF_ERROR(parser.ParseModel(root["model"]));
    VERL_RETURN_IF_ERROR(
        parser.ParseAddedTokens(root.value("added_tokens", Json())));
    VERL_RETURN_IF_ERROR(
        parser.ParseNormalizer(root.value("normalizer", Json())));
    VERL_RETURN_IF_ERROR(
        parser.ParsePreTokenizer(root.value("pre_tokenizer", Json())));
    bool byte_level = false;
    for (const auto& step : data->pre_tokenizers) byte_level |= step.byte_level;
    if (!byte_level)
      return Invalid(source,
                     "pre_tokenizer has no ByteLevel step (only byte-level BPE "
                     "is supported)");
    VERL_RETURN_IF_ERROR(
        parser.ParsePostProcessor(root.value("post_processor", Json())));
    VERL_RETURN_IF_ERROR(parser.ParseDecoder(root.value("decoder", Json())));
  } catch (const nlohmann::json::exception& e) {
    return Invalid(source, e.what());
  }
  const std::string config_source = absl::StrCat(source, " (tokenizer_config)");
  try {
    Parser parser(*data, config_source);
    VERL_RETURN_IF_ERROR(parser.ParseConfig(Json::parse(data->config_json)));
  } catch (const nlohmann::json::exception& e) {
    return Invalid(config_source, e.what());
  }
  if (!data->chat_template_file.empty())
    data->chat_templates["default"] = data->chat_template_file;
  return data;
}

}  // namespace verl::models::tokenizer_internal
