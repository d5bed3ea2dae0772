// File: verl/rl/data/sft_dataset.cc
#include "verl/rl/data/sft_dataset.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "verl/core/status.h"
#include "verl/models/tokenizer/chat_template.h"
#include "verl/rl/data/parquet/dataset_file.h"

namespace verl::rl {

using nlohmann::json;

absl::StatusOr<SftTruncation> ParseSftTruncation(const std::string& name) {
  if (name == "error") return SftTruncation::kError;
  if (name == "left") return SftTruncation::kLeft;
  if (name == "right") return SftTruncation::kRight;
  return absl::InvalidArgumentError(absl::StrCat(
      "data.truncation: \"", name, "\" (expected error, left or right)"));
}

absl::StatusOr<std::string> ExtractSftField(
    const json& row, const std::string& key,
    const std::vector<std::string>& dict_keys) {
  std::vector<std::string> path = absl::StrSplit(key, '.');
  path.insert(path.end(), dict_keys.begin(), dict_keys.end());
  const json* node = &row;
  std::string walked;
  for (const std::string& part : path) {
    walked = walked.empty() ? part : absl::StrCat(walked, ".", part);
    if (!node->is_object() || !node->contains(part)) {
      return absl::InvalidArgumentError(
          absl::StrCat("missing key '", walked, "'"));
    }
    node = &(*node)[part];
  }
  if (node->is_string()) return node->get<std::string>();
  if (node->is_number() || node->is_boolean()) return node->dump();
  return absl::InvalidArgumentError(absl::StrCat(
      "key '", walked, "' is a ", node->type_name(), ", expected a string"));
}

namespace {

// Truncates `ids` (with `trained[i]` marking target tokens) to max_length and
// right-pads it into a sample. `what` describes the sequence in errors.
absl::StatusOr<SftSample> PackSample(const models::Tokenizer& tokenizer,
                                     const std::vector<int64_t>& ids,
                                     const std::vector<char>& trained,
                                     int64_t max_length,
                                     SftTruncation truncation,
                                     const std::string& what) {
  const int64_t total = static_cast<int64_t>(ids.size());
  int64_t begin = 0;  // first kept token
  if (total > max_length) {
    switch (truncation) {
      case SftTruncation::kError:
        return absl::InvalidArgumentError(absl::StrCat(
            "sequence of ", total, " tokens (", what, ") exceeds max_length ",
            max_length, " (data.truncation=error)"));
      case SftTruncation::kLeft:
        begin = total - max_length;
        break;
      case SftTruncation::kRight:
        break;
    }
  }
  const int64_t kept = std::min(total - begin, max_length);
  SftSample s;
  s.input_ids.assign(max_length, tokenizer.pad_token_id() >= 0
                                     ? tokenizer.pad_token_id()
                                     : tokenizer.eos_token_id());
  s.attention_mask.assign(max_length, 0);
  s.position_ids.assign(max_length, 0);
  s.loss_mask.assign(max_length, 0);
  for (int64_t i = 0; i < kept; ++i) {
    s.input_ids[i] = ids[begin + i];
    s.attention_mask[i] = 1;
    s.position_ids[i] = i;
    s.loss_mask[i] = (i > 0 && trained[begin + i]) ? 1 : 0;
  }
  return s;
}

// Appends the tokens of `text` to ids/trained.
void AppendText(const models::Tokenizer& tokenizer, absl::string_view text,
                bool train, std::vector<int64_t>* ids,
                std::vector<char>* trained) {
  for (int64_t id : tokenizer.Encode(text)) {
    ids->push_back(id);
    trained->push_back(train ? 1 : 0);
  }
}

absl::StatusOr<std::string> Render(const models::ChatFormatter& formatter,
                                   const json& messages, bool generation) {
  models::ChatRequest request;
  request.messages_json = messages.dump();
  request.add_generation_prompt = generation;
  return formatter.Apply(request);
}

}  // namespace

absl::StatusOr<SftSample> MakeSftSample(const models::Tokenizer& tokenizer,
                                        const std::string& prompt,
                                        const std::string& response,
                                        int64_t max_length,
                                        SftTruncation truncation) {
  return MakeSftSample(tokenizer, models::ChatFormatter(tokenizer), prompt,
                       response, max_length, truncation);
}

absl::StatusOr<SftSample> MakeSftSample(const models::Tokenizer& tokenizer,
                                        const models::ChatFormatter& formatter,
                                        const std::string& prompt,
                                        const std::string& response,
                                        int64_t max_length,
                                        SftTruncation truncation) {
  VERL_ASSIGN_OR_RETURN(
      std::string prompt_text,
      Render(formatter, json::array({{{"role", "user"}, {"content", prompt}}}),
             /*generation=*/true));
  std::vector<int64_t> ids;
  std::vector<char> trained;
  AppendText(tokenizer, prompt_text, false, &ids, &trained);
  const size_t prompt_len = ids.size();
  AppendText(tokenizer, response, true, &ids, &trained);
  ids.push_back(tokenizer.eos_token_id());
  trained.push_back(1);
  return PackSample(tokenizer, ids, trained, max_length, truncation,
                    absl::StrCat("prompt ", prompt_len, ", response ",
                                 ids.size() - prompt_len, " incl. EOS"));
}

absl::StatusOr<SftSample> MakeMultiTurnSftSample(
    const models::Tokenizer& tokenizer, const json& messages,
    int64_t max_length, SftTruncation truncation) {
  return MakeMultiTurnSftSample(tokenizer, models::ChatFormatter(tokenizer),
                                messages, max_length, truncation);
}

absl::StatusOr<SftSample> MakeMultiTurnSftSample(
    const models::Tokenizer& tokenizer, const models::ChatFormatter& formatter,
    const json& messages, int64_t max_length, SftTruncation truncation) {
  if (!messages.is_array() || messages.empty()) {
    return absl::InvalidArgumentError("messages must be a non-empty list");
  }
  std::vector<int64_t> ids;
  std::vector<char> trained;
  std::string rendered;  // template of messages[:i]
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("message ", i, " has no string 'role'"));
    }
    const json prefix(messages.begin(), messages.begin() + i + 1);
    const bool assistant = m["role"] == "assistant";
    if (assistant) {  // the generation prompt is context, not a target
      VERL_ASSIGN_OR_RETURN(
          std::string with_prompt,
          Render(formatter, json(messages.begin(), messages.begin() + i),
                 /*generation=*/true));
      if (with_prompt.compare(0, rendered.size(), rendered) != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("chat template output for message ", i,
                         " does not extend the previous messages' output"));
      }
      AppendText(tokenizer,
                 absl::string_view(with_prompt).substr(rendered.size()), false,
                 &ids, &trained);
      rendered = with_prompt;
    }
    VERL_ASSIGN_OR_RETURN(std::string full,
                          Render(formatter, prefix, /*generation=*/false));
    if (full.compare(0, rendered.size(), rendered) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("chat template output for message ", i,
                       " does not extend the previous messages' output"));
    }
    AppendText(tokenizer, absl::string_view(full).substr(rendered.size()),
               assistant, &ids, &trained);
    rendered = full;
  }
  return PackSample(tokenizer, ids, trained, max_length, truncation,
                    absl::StrCat(messages.size(), " messages"));
}

absl::StatusOr<SftDataset> SftDataset::FromRows(
    const std::vector<json>& rows, const models::Tokenizer& tokenizer,
    const SftDatasetOptions& options) {
  if (options.max_length < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data.max_length: ", options.max_length, " (must be >= 2)"));
  }
  SftDataset out;
  out.max_length_ = options.max_length;
  const models::ChatFormatter formatter(tokenizer);  // Compiles once.
  const int64_t n = options.max_samples >= 0
                        ? std::min<int64_t>(options.max_samples, rows.size())
                        : static_cast<int64_t>(rows.size());
  out.samples_.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    const std::string where = absl::StrCat("row ", i);
    if (options.multiturn) {
      const json* messages = nullptr;
      if (rows[i].is_object() && rows[i].contains(options.messages_key)) {
        messages = &rows[i][options.messages_key];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": missing key '", options.messages_key, "'"));
      }
      absl::StatusOr<SftSample> sample =
          MakeMultiTurnSftSample(tokenizer, formatter, *messages,
                                 options.max_length, options.truncation);
      if (!sample.ok()) return Annotate(sample.status(), where);
      out.samples_.push_back(*std::move(sample));
      continue;
    }
    absl::StatusOr<std::string> prompt =
        ExtractSftField(rows[i], options.prompt_key, options.prompt_dict_keys);
    if (!prompt.ok()) return Annotate(prompt.status(), where);
    absl::StatusOr<std::string> response = ExtractSftField(
        rows[i], options.response_key, options.response_dict_keys);
    if (!response.ok()) return Annotate(response.status(), where);
    absl::StatusOr<SftSample> sample =
        MakeSftSample(tokenizer, formatter, *prompt, *response,
                      options.max_length, options.truncation);
    if (!sample.ok()) return Annotate(sample.status(), where);
    out.samples_.push_back(*std::move(sample));
  }
  return out;
}

absl::StatusOr<SftDataset> SftDataset::Load(
    const std::vector<std::string>& files, const models::Tokenizer& tokenizer,
    const SftDatasetOptions& options) {
  if (files.empty()) {
    return absl::InvalidArgumentError("no data files given");
  }
  SftDataset out;
  out.max_length_ = options.max_length;
  for (const std::string& file : files) {
    VERL_ASSIGN_OR_RETURN(std::vector<json> rows,
                          parquet::ReadDatasetFile(file));
    SftDatasetOptions part = options;
    if (options.max_samples >= 0) {
      part.max_samples = options.max_samples - out.size();
      if (part.max_samples <= 0) break;
    }
    absl::StatusOr<SftDataset> ds = FromRows(rows, tokenizer, part);
    if (!ds.ok()) return Annotate(ds.status(), file);
    for (SftSample& s : ds->samples_) out.samples_.push_back(std::move(s));
  }
  if (out.samples_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no samples in ", files.front()));
  }
  return out;
}

}  // namespace verl::rl
