// File: verl/rl/workers/reward_model.cc
#include "verl/rl/workers/reward_model.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/grad_mode.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/models/hf_checkpoint.h"
#include "verl/models/padding.h"

namespace verl::rl {

absl::StatusOr<std::unique_ptr<RewardModel>> RewardModel::Load(
    const std::string& dir, int64_t min_vocab_size,
    const MicroBatchOptions& micro) {
  VERL_ASSIGN_OR_RETURN(models::HfCheckpoint hf, models::LoadHfConfigs(dir));
  if (!hf.config.is_value_model) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward_model.model.path: ", dir, " holds ", hf.config.architecture,
        ", not a value model (*ForTokenClassification with num_labels 1)"));
  }
  if (hf.config.vocab_size < min_vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward_model.model.path: ", dir, " has vocab_size ",
        hf.config.vocab_size, " < the actor tokenizer's ", min_vocab_size,
        " (a reward model with its own tokenizer is not supported)"));
  }
  auto model = models::CreateModel(hf.config, /*seed=*/0);
  std::map<std::string, at::Tensor> dst;
  for (auto& item : model->named_parameters()) dst[item.key()] = item.value();
  VERL_RETURN_IF_ERROR(models::LoadHfWeightsInto(dir, &dst));
  for (at::Tensor& p : model->parameters()) p.requires_grad_(false);
  return std::make_unique<RewardModel>(std::move(model), micro);
}

RewardModel::RewardModel(std::shared_ptr<models::CausalLM> model,
                         const MicroBatchOptions& micro)
    : model_(std::move(model)), micro_(micro) {}

absl::StatusOr<at::Tensor> RewardModel::ComputeRmScore(
    const core::Batch& batch) {
  VERL_ASSIGN_OR_RETURN(at::Tensor input_ids, batch.GetTensor("input_ids"));
  VERL_ASSIGN_OR_RETURN(at::Tensor attention_mask,
                        batch.GetTensor("attention_mask"));
  VERL_ASSIGN_OR_RETURN(at::Tensor position_ids,
                        batch.GetTensor("position_ids"));
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  const int64_t R = responses.size(1);
  const int64_t L = input_ids.size(1);
  VERL_ASSIGN_OR_RETURN(auto micro_rows, MicroBatchIndices(batch, micro_));
  torch::NoGradGuard no_grad;
  model_->eval();
  at::Tensor rm_scores = at::zeros({batch.size(), R}, at::kFloat);
  for (const auto& rows : micro_rows) {
    at::Tensor idx = at::tensor(rows, at::kLong);
    at::Tensor mask = attention_mask.index_select(0, idx).to(at::kBool);
    const models::UnpadInfo info = models::Unpad(mask);
    models::ForwardOutput out = model_->ForwardPacked(
        models::UnpadTensor(input_ids.index_select(0, idx), info),
        models::UnpadTensor(position_ids.index_select(0, idx), info),
        info.cu_seqlens);
    at::Tensor values = out.values.to(at::kFloat);  // [T] packed
    // Valid response tokens per row (responses are right-padded).
    at::Tensor resp_len = mask.narrow(1, L - R, R).sum(1).to(at::kLong);
    auto len_acc = resp_len.accessor<int64_t, 1>();
    for (size_t i = 0; i < rows.size(); ++i) {
      const int64_t len = len_acc[i];
      const int64_t end = info.cu_seqlens[i + 1];
      if (len == 0 || end == info.cu_seqlens[i]) continue;
      // The packed sequence's last token is the last valid token.
      rm_scores[rows[i]][len - 1] = values[end - 1];
    }
  }
  return rm_scores;
}

}  // namespace verl::rl
