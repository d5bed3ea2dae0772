// File: verl/rl/workers/actor.h
//
// The policy roles (verl's DataParallelPPOActor): log-prob recomputation for
// the actor's old_log_prob and the reference policy, and the PPO update
//   loss = policy_loss − entropy_coeff·entropy + kl_loss_coef·kl_loss
// over mini-batches (one optimizer step each) and micro-batches (gradient
// accumulation), repeated ppo_epochs times.
//
// Normalisation is global (verl's engine path): each micro-batch's loss is
// divided by the token / sequence count of the whole mini-batch across all
// data-parallel ranks and multiplied by the DP size, so gradients (averaged
// over DP) and the logged losses do not depend on the number of ranks or
// micro-batches. Every rank calls UpdatePolicy with its own rows, in the same
// mini-batch structure (see trainer dispatch).
//
// Batch keys used: input_ids, attention_mask, position_ids [B, P+R],
// responses [B, R], response_mask [B, R]; for updates also old_log_probs,
// advantages, and ref_log_prob (use_kl_loss) / rollout_is_weights if present.
// With rollout_log_probs in the batch (and loss_mode != bypass_mode), each
// micro-batch also reports the current policy's drift from the rollout
// policy as rollout_corr/* off-policy metrics, as verl's dp_actor does.
//
// loss_mode "flowrl" (verl's recipe/flowrl): the update's loss is FlowRL's
// trajectory-balance loss alone (rl/algos/flowrl.h) with log Z from the
// actor's LogZHead on the prompt's mean hidden state; needs ref_log_prob.
// The head has its own optimizer, stepped with the policy's.
#ifndef VERL_RL_WORKERS_ACTOR_H_
#define VERL_RL_WORKERS_ACTOR_H_

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/models/decoder.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/algos/flowrl.h"
#include "verl/rl/algos/policy_loss.h"
#include "verl/rl/workers/flowrl_log_z.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/workers/ppo_update.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

struct ActorOptions {
  double temperature = 1.0;
  MicroBatchOptions update_micro;  // ppo_micro_batch_size_per_gpu / dynamic
  MicroBatchOptions
      log_prob_micro;           // log_prob_micro_batch_size_per_gpu / dynamic
  int64_t mini_batch_size = 1;  // trajectories per rank per optimizer step
  int64_t ppo_epochs = 1;
  std::string loss_mode = "vanilla";
  PolicyLossConfig policy_loss;
  double entropy_coeff = 0.0;
  bool calculate_entropy = false;
  // loss_mode == "flowrl": the loss settings, the log-Z head's depth, its
  // optimizer (the actor's AdamW settings) and init seed.
  FlowRlConfig flowrl;
  int64_t flowrl_log_z_layers = 3;
  OptimizerOptions flowrl_log_z_optim;
  uint64_t flowrl_log_z_seed = 0;
  // actor.calculate_sum_pi_squared: ComputeLogProb also returns Σπ² per
  // response position (the optimal-token-baseline estimators need it).
  bool calculate_sum_pi_squared = false;
  bool use_kl_loss = false;
  double kl_loss_coef = 0.001;
  std::string kl_loss_type = "low_var_kl";
  // Reference policy sharing the actor's LoRA model (verl's ref_in_actor):
  // ComputeLogProb runs with the adapters disabled, i.e. the base model.
  bool disable_lora = false;
  // Ulysses sequence parallelism: this rank's sp group (null: none); the
  // dp_group passed to the constructor is then the ranks with this sp index.
  std::shared_ptr<parallel::Communicator> sp_group;
  // strategy: megatron: the forward passes run on this tensor-parallel model
  // (the CausalLM given to the constructor only describes the policy) and
  // the dp_group is Megatron's dp group (the tp ranks share rows).
  std::shared_ptr<models::MegatronGPTModel> megatron;
};

// verl's on-policy shortcut (dp_actor: with one mini-batch and ppo_epochs ==
// 1, old_log_prob := log_prob.detach()) applied to the first mini-batch of
// any update with ppo_epochs == 1: its rows are still at the weights the
// old-log-prob pass would run at, so the trainer skips that pass for them and
// UpdatePolicy takes their old log-probs (and the old pass's entropy) from
// its own forward. `rows` = this rank's first mini-batch (the leading
// mini_batch_size rows); the batch's old_log_probs there are ignored.
struct OnPolicyCapture {
  int64_t rows = 0;
  at::Tensor log_probs;  // [rows, R], filled by UpdatePolicy
  at::Tensor entropy;    // [rows, R], temperature-scaled as ComputeLogProb's
};

struct LogProbResult {
  at::Tensor log_probs;       // [B, R]
  at::Tensor entropy;         // [B, R] when requested
  at::Tensor sum_pi_squared;  // [B, R] when calculate_sum_pi_squared
};

class Actor {
 public:
  // `train_state` may be null for a forward-only role (reference policy).
  Actor(std::shared_ptr<models::CausalLM> model,
        std::unique_ptr<TrainState> train_state, ActorOptions options,
        std::shared_ptr<parallel::Communicator> dp_group);

  absl::StatusOr<LogProbResult> ComputeLogProb(const core::Batch& batch,
                                               bool with_entropy);
  // `on_policy` (optional): see OnPolicyCapture; needs ppo_epochs == 1, a
  // loss_mode other than flowrl and no pipeline stages.
  absl::StatusOr<MetricMap> UpdatePolicy(const core::Batch& batch,
                                         OnPolicyCapture* on_policy = nullptr);

  models::CausalLM& model() { return *model_; }
  std::shared_ptr<models::CausalLM> shared_model() { return model_; }
  TrainState* train_state() { return train_state_.get(); }
  const ActorOptions& options() const { return options_; }
  // FlowRL's log-Z head and its train state (null unless loss_mode flowrl).
  LogZHead log_z_head() const { return log_z_head_; }
  TrainState* log_z_train_state() { return log_z_state_.get(); }

 private:
  // The strategy's forward pass (HF decoder or Megatron) on `mb`, with the
  // images of its multi_modal_inputs column when it has one.
  absl::StatusOr<ResponseForward> Forward(const core::Batch& mb,
                                          int64_t response_length,
                                          bool with_entropy,
                                          ForwardExtras extras = {});

  std::shared_ptr<models::CausalLM> model_;
  std::unique_ptr<TrainState> train_state_;
  ActorOptions options_;
  std::shared_ptr<parallel::Communicator> dp_group_;
  // Pipeline stages: the last stage's output of the micro-batch whose loss
  // the 1F1B schedule is computing (MegatronPipelineRunner).
  at::Tensor stage_output_;
  LogZHead log_z_head_{nullptr};
  std::unique_ptr<TrainState> log_z_state_;
  at::Generator log_z_dropout_ = at::detail::createCPUGenerator();
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_ACTOR_H_
