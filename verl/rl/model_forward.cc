#include "verl/rl/model_forward.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <torch/types.h>

#include "verl/core/status.h"
#include "verl/models/attention.h"
#include "verl/models/logprob.h"
#include "verl/models/padding.h"
#include "verl/profiler/profile_scope.h"

namespace verl::rl {

ResponseForward ForwardResponses(models::CausalLM& model,
                                 const at::Tensor& input_ids,
                                 const at::Tensor& attention_mask,
                                 const at::Tensor& position_ids,
                                 int64_t response_length, double temperature,
                                 bool with_entropy) {
  const int64_t batch = input_ids.size(0);
  const int64_t length = input_ids.size(1);
  const int64_t prompt_length = length - response_length;
  const at::Tensor mask = attention_mask.to(at::kBool);
  const models::UnpadInfo info = models::Unpad(mask);
  const at::Tensor ids = models::UnpadTensor(input_ids, info);
  const at::Tensor pos = models::UnpadTensor(position_ids, info);

  ResponseForward out;
  out.attention = std::make_shared<models::VarlenCausalAttention>(
      info.cu_seqlens, model.LayerWindows());
  at::Tensor hidden = model.Forward(ids, pos, *out.attention);

  // Positions P-1 .. L-2 predict response tokens P .. L-1; keep the ones whose
  // target is a real token. Flat indices into [B, L].
  at::Tensor predicts = at::zeros({batch, length}, at::kBool);
  predicts.narrow(1, prompt_length - 1, response_length)
      .copy_(mask.narrow(1, prompt_length, response_length));
  // The packed row of each real token, so we can select hidden rows.
  at::Tensor packed_row = at::full({batch * length}, -1, at::kLong);
  packed_row.index_copy_(0, info.indices,
                         at::arange(info.indices.size(0), at::kLong));
  const at::Tensor flat_src =
      predicts.reshape(-1).nonzero().reshape(-1);  // b*L + t
  const at::Tensor rows = packed_row.index_select(0, flat_src);
  const at::Tensor targets =
      input_ids.reshape(-1).index_select(0, flat_src + 1);
  const at::Tensor selected = hidden.index_select(0, rows);

  // Scatter per-token results back to [B, R].
  const at::Tensor b = at::div(flat_src, length, "floor");
  const at::Tensor r = flat_src - b * length - (prompt_length - 1);
  const at::Tensor dest = b * response_length + r;
  auto scatter = [&](const at::Tensor& values) {
    at::Tensor full = at::zeros({batch * response_length}, values.options());
    return full.index_copy(0, dest, values).view({batch, response_length});
  };
  if (model.config().is_value_model) {
    out.values = scatter(model.Values(selected).to(at::kFloat));
    return out;
  }
  const models::LogProbEntropy lp = models::LogProbsAndEntropy(
      model.Logits(selected), targets, temperature, with_entropy);
  out.log_probs = scatter(lp.log_probs);
  if (with_entropy) out.entropy = scatter(lp.entropy);
  return out;
}

absl::StatusOr<ResponseForward> ForwardBatchNoGrad(
    models::CausalLM& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy) {
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  const int64_t R = responses.size(1);
  VERL_ASSIGN_OR_RETURN(auto micro_rows, MicroBatchIndices(batch, micro));
  at::NoGradGuard no_grad;
  model.eval();
  const bool value_model = model.config().is_value_model;
  auto zeros = [&] { return torch::zeros({batch.size(), R}, torch::kFloat); };
  ResponseForward out;
  if (value_model) {
    out.values = zeros();
  } else {
    out.log_probs = zeros();
    if (with_entropy) out.entropy = zeros();
  }
  for (const auto& rows : micro_rows) {
    profiler::ProfileScope micro_scope("micro_batch");
    profiler::ProfileScope forward("forward",
                                   profiler::MemoryCategory::kActivations);
    at::Tensor idx = torch::tensor(rows, torch::kLong);
    auto take = [&](const char* key) {
      return batch.tensor(key).index_select(0, idx);
    };
    ResponseForward f =
        ForwardResponses(model, take("input_ids"), take("attention_mask"),
                         take("position_ids"), R, temperature, with_entropy);
    if (value_model) {
      out.values.index_copy_(0, idx, f.values);
      continue;
    }
    out.log_probs.index_copy_(0, idx, f.log_probs);
    if (with_entropy) out.entropy.index_copy_(0, idx, f.entropy);
  }
  return out;
}

}  // namespace verl::rl
