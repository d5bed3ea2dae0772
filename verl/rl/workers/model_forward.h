// File: verl/rl/workers/model_forward.h
//
// Forward passes the RL roles share, on verl's sequence layout: input_ids =
// left-padded prompt [P] + right-padded response [R], with attention_mask and
// position_ids [B, P+R]. The model runs on packed real tokens only (verl's
// use_remove_padding); the LM head runs only on the positions that predict a
// response token, so logits are [response tokens, V], never [B, L, V].
//
// Ulysses sequence parallelism (SequenceParallel with a group of sp > 1
// ranks, which all pass the same rows): the packed token stream is padded to
// a multiple of sp (the padding forms its own sequence) and each rank runs
// the decoder on its contiguous slice of T / sp tokens with their global
// positions (RoPE); attention all-to-alls to head-sharded q/k/v over whole
// sequences and back (verl/parallel/ulysses.h); each rank computes the heads
// on its own slice and the per-token results are all-gathered, so every rank
// returns the full [B, R] outputs, equal to the single-process ones.
#ifndef VERL_RL_WORKERS_MODEL_FORWARD_H_
#define VERL_RL_WORKERS_MODEL_FORWARD_H_

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/models/decoder.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/models/padding.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/workers/ppo_update.h"

namespace verl::rl {

// The sp group of this rank (null or size 1: no sequence parallelism).
// Backward through the gathered outputs scales this rank's gradient by the
// group size: the train states average gradients over every rank (dp x sp),
// while the ranks of one sp group compute one and the same loss.
struct SequenceParallel {
  std::shared_ptr<parallel::Communicator> group;
  bool enabled() const { return group && group->size() > 1; }
};

// Under sp: the packed stream (ids/pos [T], sequences at `cu_seqlens`)
// padded to sp equal slices (the padding forms its own sequence, so no real
// token attends to it) and this rank's slice [lo, lo + size) with the
// Ulysses attention backend over the whole stream.
struct UlyssesSlice {
  std::shared_ptr<models::AttentionBackend> attention;
  at::Tensor ids, pos;  // this rank's slice
  int64_t lo = 0, size = 0;
};
UlyssesSlice SliceForSequenceParallel(const models::CausalLM& model,
                                      const at::Tensor& ids,
                                      const at::Tensor& pos,
                                      std::vector<int64_t> cu_seqlens,
                                      const SequenceParallel& sp);

struct ResponseForward {
  at::Tensor log_probs;  // [B, R] fp32, 0 at response padding
  at::Tensor entropy;    // [B, R] fp32 when requested
  at::Tensor values;     // [B, R] for value models (verl: positions [-R-1:-1])
  at::Tensor sum_pi_squared;  // [B, R] Σπ² of softmax(logits / T), when asked
  at::Tensor prompt_hidden;   // [B, H] when asked (see ForwardExtras)
  // Keeps the attention backend alive until backward() (gradient checkpointing
  // recomputes layers with it).
  std::shared_ptr<models::AttentionBackend> attention;
};

// Images of vision-language rows (verl's multi_modal_inputs): every row's
// pixel_values and image_grid_thw concatenated in row order. Undefined: no
// row has images.
struct ImageInputs {
  at::Tensor pixel_values;    // [patches, 1176]
  at::Tensor image_grid_thw;  // [images, 3]
  // Images per row, in row order: only a row's own images are spliced in,
  // so <|image_pad|> tokens its response sampled stay text.
  std::vector<int64_t> images_per_row;
  bool defined() const { return image_grid_thw.defined(); }
};
// The images of `batch`'s rows from its multi_modal_inputs column (none
// without the column); a malformed value is InvalidArgument.
absl::StatusOr<ImageInputs> BatchImageInputs(const core::Batch& batch);

// Inputs and outputs beyond ids/positions and log-probs/entropy/values.
struct ForwardExtras {
  // Σπ² (verl's calculate_sum_pi_squared, for the optimal-token-baseline
  // estimators; no gradient flows through it).
  bool sum_pi_squared = false;
  // FlowRL's log Z input as the recipe takes it: the mean final hidden state
  // over each row's real prompt tokens except the last prompt position
  // (differentiable). Not with Ulysses sequence parallelism (Megatron's
  // sequence parallelism is fine: its hidden states are gathered).
  bool prompt_hidden = false;
  // The rows' images: the model (a Qwen2VLForConditionalGeneration) splices
  // the vision tower's embeddings at the <|image_pad|> tokens and runs the
  // decoder with M-RoPE positions from input_ids and image_grid_thw, as
  // ForwardMultimodal does (the batch's position_ids are the text
  // positions). Not with Ulysses sequence parallelism.
  ImageInputs images;
};

// verl's response positions in the packed stream of real tokens.
struct PackedResponses {
  models::UnpadInfo info;  // indices of the real tokens, cu_seqlens
  at::Tensor ids, pos;     // packed real tokens [T]
  at::Tensor rows;     // packed row predicting each response token (ascending)
  at::Tensor targets;  // that response token
  int64_t batch = 0, length = 0, response_length = 0;
  at::Tensor dest;  // flat [B * R] slot of each of `rows`
  // One value per element of `rows` -> [B, R], 0 at response padding.
  at::Tensor Scatter(const at::Tensor& values) const;
  // FlowRL's log-Z input from the packed hidden states [T, H]: per row, the
  // mean over its real prompt tokens except the last prompt position -> [B, H]
  // (differentiable).
  at::Tensor PromptMean(const at::Tensor& hidden) const;
};
PackedResponses PackResponses(const at::Tensor& input_ids,
                              const at::Tensor& attention_mask,
                              const at::Tensor& position_ids,
                              int64_t response_length);

// input_ids/attention_mask/position_ids [B, L]; `response_length` = R.
// Log-probs and entropy come from logits / temperature (verl scales before
// both). Value models return `values` instead.
ResponseForward ForwardResponses(
    models::CausalLM& model, const at::Tensor& input_ids,
    const at::Tensor& attention_mask, const at::Tensor& position_ids,
    int64_t response_length, double temperature, bool with_entropy,
    const SequenceParallel& sp = {}, const ForwardExtras& extras = {});

// Forward-only pass over a whole batch (input_ids, attention_mask,
// position_ids, responses, and multi_modal_inputs when present) in
// micro-batches, in eval mode without autograd: log_probs/entropy [B, R] for
// LM models, values [B, R] for value models.
absl::StatusOr<ResponseForward> ForwardBatchNoGrad(
    models::CausalLM& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy,
    const SequenceParallel& sp = {}, bool with_sum_pi_squared = false);

// strategy: megatron — the same passes on the tensor-parallel model: every
// tp rank passes the same rows and gets the same (full) results; log-probs
// and entropy come from the vocab-parallel logits without gathering the
// vocabulary (parallel/megatron/vocab_parallel.h). prompt_hidden comes from
// the final hidden states gathered over tp under sequence parallelism
// (MegatronGPTModel::Forward's final_hidden). No Σπ².
//
// Pipeline parallelism (pp > 1): the model is one stage. `stage_output`
// (last stage, inside a schedule) is the stage's output for these rows;
// the results come from it instead of running the model (the schedule ran
// it). ForwardBatchNoGrad runs the forward-only schedule over the
// micro-batches and broadcasts the last stage's [B, R] results over pp, so
// every rank gets them. No FlowRL prompt_hidden with pp > 1.
ResponseForward ForwardResponses(
    models::MegatronGPTModel& model, const at::Tensor& input_ids,
    const at::Tensor& attention_mask, const at::Tensor& position_ids,
    int64_t response_length, double temperature, bool with_entropy,
    const ForwardExtras& extras = {}, const at::Tensor& stage_output = {});
absl::StatusOr<ResponseForward> ForwardBatchNoGrad(
    models::MegatronGPTModel& model, const core::Batch& batch,
    const MicroBatchOptions& micro, double temperature, bool with_entropy);

// RunPpoUpdate's runner for a pipeline-parallel model (null when pp = 1):
// the micro-batches go through the 1F1B schedule; while `loss(m)` runs on
// the last stage, *stage_output holds micro-batch m's stage output (pass it
// to ForwardResponses). The caller shares the metrics from the last stage
// (BroadcastMetrics over the pp group).
MicroBatchRunner MegatronPipelineRunner(models::MegatronGPTModel& model,
                                        at::Tensor* stage_output);

// A role's update on `model`: the pipeline runner above and, before each
// mini-batch, the MoE load-balancing loss scale 1 / its micro-batches
// (Megatron's MoEAuxLossAutoScaler with num_microbatches).
void UseMegatronModel(models::MegatronGPTModel& model, at::Tensor* stage_output,
                      PpoUpdateOptions* update);

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_MODEL_FORWARD_H_
