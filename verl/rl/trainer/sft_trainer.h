// File: verl/rl/trainer/sft_trainer.h
//
// verl's fsdp_sft_trainer: supervised fine-tuning on (prompt, response) rows
// (verl/rl/data/sft_dataset.h) with token cross-entropy over the loss-mask
// tokens (the response incl. EOS). Each step takes `data.train_batch_size` rows
// (split evenly over the DP ranks, then into `micro_batch_size_per_gpu`
// micro-batches); the loss is normalised by the batch's loss-token count
// summed over all ranks, so the update does not depend on the number of
// ranks or micro-batches. AdamW with clipping and non-finite skip, cosine or
// wsd LR schedule stepped per step, validation every `trainer.test_freq`
// steps and at the last step, metrics with verl's names (`train/loss`,
// `train/lr(1e-3)`, `train/grad_norm`, `train/time(s)`, `val/loss`), and the
// model saved as an HF folder (tokenizer included) at
// `{trainer.default_local_dir}/global_step_{N}/huggingface` every
// `save_freq` steps and at the end.
//
// model.lora_rank > 0 trains LoRA adapters only (verl's PEFT path: rank,
// lora_alpha, target_modules); the HF folder then holds the merged weights
// (W + alpha/r·B·A, loadable as a plain model) and
// `global_step_{N}/lora_adapter` the adapter in PEFT's layout, as the PPO
// side's LoRA checkpoints. ulysses_sequence_parallel_size = sp > 1 splits
// each micro-batch's packed tokens over sp ranks (Ulysses; the world is
// dp x sp, rows are split over dp), with the same loss and update as sp = 1.
#ifndef VERL_RL_TRAINER_SFT_TRAINER_H_
#define VERL_RL_TRAINER_SFT_TRAINER_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/models/decoder.h"
#include "verl/models/tokenizer/tokenizer.h"
#include "verl/parallel/process_group.h"
#include "verl/profiler/tracking.h"
#include "verl/rl/data/sft_dataset.h"
#include "verl/rl/trainer/config/sft_config.pb.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

struct SftLossSum {
  at::Tensor loss_sum;  // differentiable fp32 scalar
  // Keeps the attention backend alive until backward() (gradient
  // checkpointing recomputes layers with it).
  std::shared_ptr<models::AttentionBackend> attention;
};

// Σ over loss-mask tokens of −log p(token | prefix) for a right-padded batch
// (input_ids/attention_mask/position_ids/loss_mask [B, L]); the token at t is
// predicted from position t−1. Runs the model on packed real tokens and the
// LM head only on predicting positions.
// Under sequence parallelism (`sp` enabled) every rank of the sp group
// passes the same rows and gets the same sum.
SftLossSum SftTokenLossSum(models::CausalLM& model, const at::Tensor& input_ids,
                           const at::Tensor& attention_mask,
                           const at::Tensor& position_ids,
                           const at::Tensor& loss_mask,
                           const SequenceParallel& sp = {});

// Stacks `rows` of `data` into [B, L] int64 tensors, in the order
// input_ids, attention_mask, position_ids, loss_mask.
std::vector<at::Tensor> CollateSft(const SftDataset& data,
                                   const std::vector<int64_t>& rows);

struct SftStepMetrics {
  double loss = 0;       // global token-mean CE of the batch
  double grad_norm = 0;  // pre-clip; non-finite => the step was skipped
  int64_t tokens = 0;    // global loss-token count
};

// One optimizer step on this rank's `rows` (its share of the global batch):
// all-reduces the token count, runs micro-batches of `micro_batch_size`
// (loss = Σ CE / global tokens · dp size, so DP-averaged gradients are the
// global token mean), then TrainState::Step(). `dp` may be null (1 rank);
// with `sp`, the state averages over dp x sp ranks.
absl::StatusOr<SftStepMetrics> SftTrainStep(
    models::CausalLM& model, TrainState& state, const SftDataset& data,
    const std::vector<int64_t>& rows, int64_t micro_batch_size,
    parallel::Communicator* dp, const SequenceParallel& sp = {});

// Global token-mean CE over the whole of `data` (rows split over the DP
// ranks), without gradients.
absl::StatusOr<double> SftEvalLoss(models::CausalLM& model,
                                   const SftDataset& data,
                                   int64_t micro_batch_size,
                                   parallel::Communicator* dp,
                                   const SequenceParallel& sp = {});

// OptimizerOptions from `optim.*` (betas default [0.9, 0.95]; warmup =
// floor(lr_warmup_steps_ratio · total_steps); lr_scheduler cosine | wsd).
absl::StatusOr<OptimizerOptions> SftOptimizerOptions(
    const SftOptimConfig& optim, int64_t total_steps);

struct SftRunOptions {
  // All ranks (dp x sp); null: a single process.
  std::shared_ptr<parallel::Communicator> dp_group;
  // Preloaded datasets; null: read data.train_files / data.val_files.
  const SftDataset* train_data = nullptr;
  const SftDataset* val_data = nullptr;
  // Log metrics via trainer.logger on rank 0.
  bool log_metrics = true;
  // Write HF folders (save_freq and the final step) on rank 0.
  bool save_model = true;
};

struct SftResult {
  int64_t global_steps = 0;
  std::vector<double> train_losses;                    // per step
  std::vector<std::pair<int64_t, double>> val_losses;  // (step, val/loss)
  std::string final_model_dir;                         // empty unless saved
};

// Trains `model` in place as configured (the PPO quickstart's warm start
// calls this with an in-memory model).
absl::StatusOr<SftResult> RunSft(const SftTrainerConfig& config,
                                 models::CausalLM& model,
                                 const models::Tokenizer& tokenizer,
                                 const SftRunOptions& options = {});

struct SftModel {
  std::shared_ptr<models::CausalLM> model;
  std::unique_ptr<models::Tokenizer> tokenizer;
};

// model.partial_pretrain (an HF folder with tokenizer files) or, when empty,
// model.preset with the built-in tokenizer, initialised from trainer.seed.
absl::StatusOr<SftModel> LoadSftModel(const SftTrainerConfig& config);

// Saves `model` + `tokenizer` as an HF folder at `dir` (replaced atomically);
// LoRA adapters are merged into the saved weights.
absl::Status SaveSftModel(const std::string& dir, models::CausalLM& model,
                          const models::Tokenizer& tokenizer);

// The file-based entry (tools/sft): LoadSftModel, then RunSft over `world`.
absl::StatusOr<SftResult> RunSftFromConfig(
    const SftTrainerConfig& config,
    std::shared_ptr<parallel::Communicator> world);

}  // namespace verl::rl

#endif  // VERL_RL_TRAINER_SFT_TRAINER_H_
