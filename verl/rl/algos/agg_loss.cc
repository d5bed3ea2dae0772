// File: verl/rl/algos/agg_loss.cc
#include "verl/rl/algos/agg_loss.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/scalar_tensor.h>

#include "absl/strings/str_cat.h"
#include "verl/rl/algos/torch_functional.h"

namespace verl::rl {

absl::Status ValidateLossAggMode(const std::string& mode) {
  if (mode == kTokenMean || mode == kSeqMeanTokenSum ||
      mode == kSeqMeanTokenMean || mode == kSeqMeanTokenSumNorm) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "loss_agg_mode: unknown value '", mode,
      "' (expected token-mean, seq-mean-token-sum, seq-mean-token-mean or "
      "seq-mean-token-sum-norm)"));
}

absl::StatusOr<at::Tensor> AggLoss(const at::Tensor& loss_mat,
                                   const at::Tensor& mask,
                                   const std::string& mode,
                                   const AggOptions& options) {
  absl::Status valid = ValidateLossAggMode(mode);
  if (!valid.ok()) return valid;
  at::Tensor m = mask.to(loss_mat.scalar_type());
  if (mode == kTokenMean) {
    at::Tensor n_tok =
        options.batch_num_tokens.has_value()
            ? at::scalar_tensor(*options.batch_num_tokens, loss_mat.options())
            : m.sum();
    return MaskedSum(loss_mat, m) / n_tok * options.dp_size;
  }
  if (mode == kSeqMeanTokenSumNorm) {
    const double k = options.loss_scale_factor.has_value()
                         ? *options.loss_scale_factor
                         : static_cast<double>(loss_mat.size(-1));
    return MaskedSum(loss_mat, m) / k;
  }
  at::Tensor seq_losses = MaskedSum(loss_mat, m, -1);
  if (mode == kSeqMeanTokenMean) seq_losses = seq_losses / (m.sum(-1) + 1e-8);
  at::Tensor seq_mask = (m.sum(-1) > 0).to(loss_mat.scalar_type());
  at::Tensor n_seq =
      options.global_batch_size.has_value()
          ? at::scalar_tensor(*options.global_batch_size, loss_mat.options())
          : seq_mask.sum();
  return MaskedSum(seq_losses, seq_mask) / n_seq * options.dp_size;
}

}  // namespace verl::rl
