// File: verl/rl/workers/critic.h
//
// The value function (verl's DataParallelPPOCritic): V̂ at response positions
// from a value-head model, and the clipped value-loss update
//   vf_loss = ½·agg(max((V̂−R)², (clip(V̂, V_old±c)−R)²))
// with the same global normalisation and mini/micro-batch loop as the actor.
#ifndef VERL_RL_WORKERS_CRITIC_H_
#define VERL_RL_WORKERS_CRITIC_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/models/decoder.h"
#include "verl/models/megatron/megatron_gpt.h"
#include "verl/parallel/process_group.h"
#include "verl/rl/workers/ppo_update.h"
#include "verl/rl/workers/train_state.h"

namespace verl::rl {

struct CriticOptions {
  MicroBatchOptions update_micro;
  MicroBatchOptions forward_micro;
  int64_t mini_batch_size = 1;  // trajectories per rank per optimizer step
  int64_t ppo_epochs = 1;
  double cliprange_value = 0.5;
  std::string loss_agg_mode = "token-mean";
  // Ulysses sequence parallelism: this rank's sp group (null: none).
  std::shared_ptr<parallel::Communicator> sp_group;
  // strategy: megatron: the value model's tensor-parallel copy, which the
  // forward passes run on (as ActorOptions::megatron).
  std::shared_ptr<models::MegatronGPTModel> megatron;
};

class Critic {
 public:
  Critic(std::shared_ptr<models::CausalLM> model,
         std::unique_ptr<TrainState> train_state, CriticOptions options,
         std::shared_ptr<parallel::Communicator> dp_group);

  // values [B, R], zero outside response_mask.
  absl::StatusOr<at::Tensor> ComputeValues(const core::Batch& batch);
  // Needs values (old), returns, response_mask. critic/* metrics.
  absl::StatusOr<MetricMap> UpdateCritic(const core::Batch& batch);

  models::CausalLM& model() { return *model_; }
  TrainState* train_state() { return train_state_.get(); }

 private:
  std::shared_ptr<models::CausalLM> model_;
  std::unique_ptr<TrainState> train_state_;
  CriticOptions options_;
  std::shared_ptr<parallel::Communicator> dp_group_;
  at::Tensor stage_output_;  // pipeline stages: see Actor
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_CRITIC_H_
