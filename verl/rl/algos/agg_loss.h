// File: verl/rl/algos/agg_loss.h
//
// verl's `agg_loss` (core_algos.py): reduce a per-token loss matrix to a
// scalar with `loss_agg_mode`. Passing the GLOBAL token / sequence counts and
// the DP size makes the sum over micro-batches and ranks equal the
// full-mini-batch loss exactly (verl's engine-worker path); leaving them unset
// normalises locally (verl's legacy path).
#ifndef VERL_RL_ALGOS_AGG_LOSS_H_
#define VERL_RL_ALGOS_AGG_LOSS_H_

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace verl::rl {

inline constexpr char kTokenMean[] = "token-mean";
inline constexpr char kSeqMeanTokenSum[] = "seq-mean-token-sum";
inline constexpr char kSeqMeanTokenMean[] = "seq-mean-token-mean";
inline constexpr char kSeqMeanTokenSumNorm[] = "seq-mean-token-sum-norm";

// Normalisation context. Unset counts mean "this micro-batch's own count".
struct AggOptions {
  double dp_size = 1.0;
  // Σ mask over the whole mini-batch across all DP ranks (token-mean).
  std::optional<double> batch_num_tokens;
  // Number of valid sequences in the mini-batch across all DP ranks.
  std::optional<double> global_batch_size;
  // Divisor K of seq-mean-token-sum-norm (defaults to the padded length T).
  std::optional<double> loss_scale_factor;
};

// OK iff `mode` is one of the four verl modes; the error names the value.
absl::Status ValidateLossAggMode(const std::string& mode);

// token-mean:              Σℓm / N_tok · dp
// seq-mean-token-sum:      Σ_i (Σ_t ℓm)·[len_i>0] / N_seq · dp
// seq-mean-token-mean:     Σ_i (Σ_t ℓm / (len_i+1e-8)) / N_seq · dp
// seq-mean-token-sum-norm: Σℓm / K
absl::StatusOr<at::Tensor> AggLoss(const at::Tensor& loss_mat,
                                   const at::Tensor& mask,
                                   const std::string& mode,
                                   const AggOptions& options = {});

}  // namespace verl::rl

#endif  // VERL_RL_ALGOS_AGG_LOSS_H_
