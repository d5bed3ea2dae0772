#include "verl/rl/data/prompt_encoder.h"

#include <torch/types.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "verl/core/status.h"

namespace verl::rl {

absl::StatusOr<nlohmann::json> GetDotted(const nlohmann::json& row,
                                         const std::string& key) {
  const nlohmann::json* node = &row;
  for (absl::string_view part : absl::StrSplit(key, '.')) {
    const std::string name(part);
    if (!node->is_object() || !node->contains(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("row has no \"", key, "\""));
    }
    node = &(*node)[name];
  }
  return *node;
}

std::vector<int64_t> MaskedIds(const at::Tensor& ids, const at::Tensor& mask,
                               int64_t i) {
  at::Tensor row = ids[i]
                       .masked_select(mask[i].to(torch::kBool))
                       .to(torch::kLong)
                       .contiguous();
  const int64_t* p = row.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + row.numel());
}

namespace {

// "row 3 of the batch (extra_info.index 17, data_source geo3k)".
std::string RowName(const nlohmann::json& row, int64_t b) {
  std::string name = absl::StrCat("row ", b, " of the batch");
  std::vector<std::string> parts;
  if (row.contains("extra_info") && row["extra_info"].is_object() &&
      row["extra_info"].contains("index")) {
    parts.push_back(
        absl::StrCat("extra_info.index ", row["extra_info"]["index"].dump()));
  }
  if (row.contains("data_source") && row["data_source"].is_string()) {
    parts.push_back(
        absl::StrCat("data_source ", row["data_source"].get<std::string>()));
  }
  if (!parts.empty())
    absl::StrAppend(&name, " (", absl::StrJoin(parts, ", "), ")");
  return name;
}

// Decodes entry `k` of a row's images column (bytes, a path, or
// {"bytes": ...} / {"path": ...}).
absl::StatusOr<models::vlm::Image> DecodeEntry(
    const nlohmann::json& entry, const std::string& name,
    const models::vlm::DecodeLimits& limits) {
  const nlohmann::json* v = &entry;
  if (entry.is_object()) {
    auto bytes = entry.find("bytes");
    if (bytes != entry.end() && bytes->is_binary()) {
      v = &*bytes;
    } else if (auto path = entry.find("path"); path != entry.end()) {
      v = &*path;
    }
  }
  if (v->is_binary()) {
    const auto& b = v->get_binary();
    return models::vlm::DecodeImage(
        absl::string_view(reinterpret_cast<const char*>(b.data()), b.size()),
        name, limits);
  }
  if (v->is_string()) {
    return models::vlm::ReadImageFile(v->get<std::string>(), limits);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(name, " is neither image bytes nor a path"));
}

}  // namespace

PromptEncoder::PromptEncoder(const models::Tokenizer* tokenizer,
                             PromptEncoderOptions options)
    : tokenizer_(tokenizer),
      chat_formatter_(*tokenizer),
      options_(std::move(options)) {
  if (options_.image_processor.has_value()) {
    processor_.emplace(*tokenizer_, *options_.image_processor);
  }
}

absl::StatusOr<models::vlm::ProcessedPrompt> PromptEncoder::EncodeRowMultimodal(
    const nlohmann::json& row) const {
  const std::string& key = options_.image_key;
  // A null or empty images column is a text row.
  const bool has_images = !key.empty() && row.is_object() &&
                          row.contains(key) && !row[key].is_null() &&
                          !(row[key].is_array() && row[key].empty());
  if (!has_images) {
    models::vlm::ProcessedPrompt out;
    VERL_ASSIGN_OR_RETURN(out.input_ids, EncodeText(row));
    return out;
  }
  if (!processor_.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the row has images (\"", key,
        "\") but the model has no image processor (a text-only model)"));
  }
  const nlohmann::json& entries = row[key];
  if (!entries.is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", key, "\" must be a list of images"));
  }
  std::vector<models::vlm::Image> images;
  for (size_t k = 0; k < entries.size(); ++k) {
    VERL_ASSIGN_OR_RETURN(
        models::vlm::Image image,
        DecodeEntry(entries[k], absl::StrCat(key, "[", k, "]"),
                    options_.image_limits));
    images.push_back(std::move(image));
  }
  VERL_ASSIGN_OR_RETURN(nlohmann::json messages,
                        GetDotted(row, options_.prompt_key));
  return processor_->ProcessMessages(messages, images,
                                     /*add_generation_prompt=*/true,
                                     options_.apply_chat_template_kwargs);
}

absl::StatusOr<std::vector<int64_t>> PromptEncoder::EncodeRow(
    const nlohmann::json& row) const {
  VERL_ASSIGN_OR_RETURN(models::vlm::ProcessedPrompt p,
                        EncodeRowMultimodal(row));
  return std::move(p.input_ids);
}

absl::StatusOr<std::vector<int64_t>> PromptEncoder::EncodeText(
    const nlohmann::json& row) const {
  VERL_ASSIGN_OR_RETURN(nlohmann::json messages,
                        GetDotted(row, options_.prompt_key));
  models::ChatRequest request;
  request.messages_json = messages.dump();
  request.add_generation_prompt = true;
  request.kwargs_json = options_.apply_chat_template_kwargs;
  VERL_ASSIGN_OR_RETURN(std::string text, chat_formatter_.Apply(request));
  return tokenizer_->Encode(text);
}

absl::StatusOr<core::Batch> PromptEncoder::Encode(
    const std::vector<nlohmann::json>& rows,
    const std::vector<std::string>& uids) const {
  const int64_t B = rows.size();
  const int64_t P = options_.max_prompt_length;
  const int64_t pad = std::max<int64_t>(tokenizer_->pad_token_id(), 0);
  at::Tensor ids = torch::full({B, P}, pad, torch::kLong);
  at::Tensor mask = torch::zeros({B, P}, torch::kLong);
  auto ids_acc = ids.accessor<int64_t, 2>();
  auto mask_acc = mask.accessor<int64_t, 2>();
  std::vector<nlohmann::json> data_source, reward_model, extra_info, uid,
      raw_prompt, agent_name, multi_modal_inputs;
  for (int64_t b = 0; b < B; ++b) {
    const nlohmann::json& row = rows[b];
    absl::StatusOr<models::vlm::ProcessedPrompt> encoded =
        EncodeRowMultimodal(row);
    if (!encoded.ok()) return verl::Annotate(encoded.status(), RowName(row, b));
    std::vector<int64_t> tokens = std::move(encoded->input_ids);
    const bool has_images = encoded->image_grid_thw.defined();
    if (has_images && static_cast<int64_t>(tokens.size()) > P) {
      return absl::InvalidArgumentError(absl::StrCat(
          RowName(row, b), ": prompt with images of ", tokens.size(),
          " tokens exceeds data.max_prompt_length=", P,
          "; truncation would cut image tokens (set "
          "data.filter_overlong_prompts=true or raise max_prompt_length)"));
    }
    if (processor_.has_value()) {
      multi_modal_inputs.push_back(
          has_images ? models::vlm::MultiModalInputsToJson(
                           encoded->pixel_values, encoded->image_grid_thw)
                     : nlohmann::json());
    }
    if (static_cast<int64_t>(tokens.size()) > P) {
      const std::string& mode = options_.truncation;
      const int64_t n = tokens.size();
      if (mode == "left") {
        tokens.erase(tokens.begin(), tokens.end() - P);  // keeps the last P
      } else if (mode == "right") {
        tokens.resize(P);
      } else if (mode == "middle") {
        std::vector<int64_t> kept(tokens.begin(), tokens.begin() + P / 2);
        kept.insert(kept.end(), tokens.end() - (P - P / 2), tokens.end());
        tokens = std::move(kept);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat(RowName(row, b), ": prompt of ", n,
                         " tokens exceeds data.max_prompt_length=", P,
                         " (set data.filter_overlong_prompts=true or "
                         "data.truncation=left|right|middle)"));
      }
    }
    const int64_t offset = P - static_cast<int64_t>(tokens.size());
    for (size_t t = 0; t < tokens.size(); ++t) {
      ids_acc[b][offset + t] = tokens[t];
      mask_acc[b][offset + t] = 1;
    }
    data_source.push_back(row.value("data_source", ""));
    reward_model.push_back(row.value("reward_model", nlohmann::json::object()));
    extra_info.push_back(row.value("extra_info", nlohmann::json::object()));
    uid.push_back(uids[b]);
    if (options_.return_raw_chat) {
      raw_prompt.push_back(row.value(options_.prompt_key, nlohmann::json()));
      agent_name.push_back(row.value("agent_name", ""));
    }
  }
  std::map<std::string, std::vector<nlohmann::json>> non_tensors = {
      {"data_source", data_source},
      {"reward_model", reward_model},
      {"extra_info", extra_info},
      {"uid", uid}};
  if (processor_.has_value()) {
    non_tensors["multi_modal_inputs"] = std::move(multi_modal_inputs);
  }
  if (options_.return_raw_chat) {
    non_tensors["raw_prompt"] = std::move(raw_prompt);
    non_tensors["agent_name"] = std::move(agent_name);
  }
  return core::Batch::FromColumns(
      {{"input_ids", ids},
       {"attention_mask", mask},
       {"position_ids", (mask.cumsum(1) - 1).clamp_min(0)}},
      std::move(non_tensors));
}

}  // namespace verl::rl
