// File: verl/rl/workers/reward_model.h
//
// The reward-model role (verl's legacy RewardModelWorker, reward_model.enable):
// a value-head model (HF *ForTokenClassification, num_labels 1) loaded from
// reward_model.model.path scores each trajectory with its output at the last
// valid token of prompt + response; the score is written at the last valid
// response position of `rm_scores` [B, R] (zeros elsewhere, all zeros for an
// empty response), as verl's _expand_to_token_level does. The trainer calls
// it through its worker-group seam (each rank scores its shard).
//
// The RM reads the actor's token ids as they are: a reward model with its
// own tokenizer / chat template (reward_model.model.input_tokenizer
// re-templating) is not supported.
#ifndef VERL_RL_WORKERS_REWARD_MODEL_H_
#define VERL_RL_WORKERS_REWARD_MODEL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "verl/core/batch.h"
#include "verl/models/decoder.h"
#include "verl/rl/workers/ppo_update.h"

namespace verl::rl {

class RewardModel {
 public:
  // Loads the HF folder `dir`; errors name the folder when it is not a value
  // model or its vocabulary is smaller than `min_vocab_size` (the actor's).
  static absl::StatusOr<std::unique_ptr<RewardModel>> Load(
      const std::string& dir, int64_t min_vocab_size,
      const MicroBatchOptions& micro);

  RewardModel(std::shared_ptr<models::CausalLM> model,
              const MicroBatchOptions& micro);

  // Needs input_ids, attention_mask, position_ids [B, P+R] and responses
  // [B, R]; returns rm_scores [B, R] fp32.
  absl::StatusOr<at::Tensor> ComputeRmScore(const core::Batch& batch);

  models::CausalLM& model() { return *model_; }

 private:
  std::shared_ptr<models::CausalLM> model_;
  MicroBatchOptions micro_;
};

}  // namespace verl::rl

#endif  // VERL_RL_WORKERS_REWARD_MODEL_H_
