#include "verl/rl/data/prompt_encoder.h"

#include <torch/types.h>

#include "absl/strings/str_cat.h"
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

absl::StatusOr<std::vector<int64_t>> PromptEncoder::EncodeRow(
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
      raw_prompt, agent_name;
  for (int64_t b = 0; b < B; ++b) {
    const nlohmann::json& row = rows[b];
    VERL_ASSIGN_OR_RETURN(std::vector<int64_t> tokens, EncodeRow(row));
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
        return absl::InvalidArgumentError(absl::StrCat(
            "prompt of ", n, " tokens exceeds data.max_prompt_length=", P,
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
