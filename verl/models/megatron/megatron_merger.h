// File: verl/models/megatron/megatron_merger.h
//
// `model_merger merge --backend megatron`: a Megatron role folder
// (.../global_step_N/actor with dist_ckpt/ and huggingface/) into an HF
// folder, as verl's MegatronModelMerger: every model tensor of dist_ckpt/
// (Megatron names, global tp = 1 layout) is assembled from the ranks'
// chunks and mapped to HF (models::MegatronFullToHf: linear_qkv split per
// query group into q/k/v, linear_fc1 into gate/up, norms, final norm,
// lm_head or, for --is-value-model, score); `tie_word_embedding` leaves
// lm_head out. Output, temp folder and streaming are the FSDP merger's
// (ckpt::MergeIntoTarget / WriteMergedWeights): the output is planned from
// `.metadata` alone, then one Megatron tensor at a time is read (pread of
// the overlapping chunks) and split, so peak memory is about one fused
// tensor, not the model. Optimizer and RNG entries are not merged.
#ifndef VERL_MODELS_MEGATRON_MEGATRON_MERGER_H_
#define VERL_MODELS_MEGATRON_MEGATRON_MERGER_H_

#include "absl/status/statusor.h"
#include "verl/ckpt/merger/checkpoint_merger.h"

namespace verl::models {

// Errors (one line naming the file; nothing left at target_dir): no
// dist_ckpt/ (an FSDP folder: "use --backend fsdp"), a missing or truncated
// rank file, `.metadata` inconsistent with the files, tensors whose shapes
// do not fit config.json, no config.json.
absl::StatusOr<ckpt::MergeStats> MergeMegatronCheckpoint(
    const ckpt::MergeOptions& options);

}  // namespace verl::models

#endif  // VERL_MODELS_MEGATRON_MEGATRON_MERGER_H_
