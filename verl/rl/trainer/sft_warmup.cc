// actor_rollout_ref.sft_warmup (this project's addition, docs/training.md):
// a supervised warm start on the training rows' reference answers before RL,
// maximising the log-likelihood of answer + EOS after the templated prompt.
// A reference answer may also be a trajectory (a list of messages after the
// prompt: assistant turns, tool answers, user turns): it is laid out as the
// agent loop lays out a rollout (assistant content + EOS, the other messages
// chat-templated without the system prompt) and only the assistant tokens
// are trained on.
#include <ATen/ops/cat.h>
#include <ATen/ops/full.h>
#include <ATen/ops/zeros.h>

#include <algorithm>

#include "glog/logging.h"
#include "verl/core/status.h"
#include "verl/infer/agent/agent_loop.h"
#include "verl/models/logprob.h"
#include "verl/rl/algos/agg_loss.h"
#include "verl/rl/trainer/ppo_trainer_internal.h"
#include "verl/rl/trainer/role_options.h"
#include "verl/rl/workers/model_forward.h"
#include "verl/rl/workers/ppo_update.h"

namespace verl::rl {

using core::Batch;

absl::Status PpoTrainer::SftWarmup(models::CausalLM& model,
                                   const MicroBatchOptions& micro) {
  const SftWarmupConfig& w = config_.actor_rollout_ref().sft_warmup();
  if (w.steps() <= 0) return absl::OkStatus();
  const int64_t R = config_.data().max_response_length();
  OptimizerOptions o;
  o.lr = w.lr();
  o.weight_decay = 0;
  // Replicated, not data-parallel: every rank trains on the whole batch, so
  // the warm-started weights (and the whole run) do not depend on the number
  // of processes; 300 steps amplify the last-bit differences of a dp split.
  const std::shared_ptr<parallel::Communicator> self =
      parallel::SingleProcessCommunicator();
  ReplicatedTrainState state(model.parameters(), o, self);
  // Lays out trajectory answers (null unless the agent loop is configured).
  VERL_ASSIGN_OR_RETURN(std::shared_ptr<infer::agent::AgentLoop> agent,
                        AgentLoopFromConfig(config_, tokenizer_.get()));
  // The warm start's own rows (sft_warmup.train_files) or the training rows.
  RLDataset* rows_set = sft_set_ != nullptr ? sft_set_.get() : train_set_.get();
  if (rows_set->size() < w.batch_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("actor_rollout_ref.sft_warmup.batch_size=", w.batch_size(),
                     " exceeds the warm start's ", rows_set->size(), " rows"));
  }
  DataLoader loader(rows_set, w.batch_size(), /*shuffle=*/true, seed_ + 17,
                    true);
  model.train();
  for (int64_t step = 0; step < w.steps(); ++step) {
    auto rows = loader.Next();
    if (!rows) rows = loader.Next();
    std::vector<std::string> uids(rows->size(), "");
    VERL_ASSIGN_OR_RETURN(Batch prompts, encoder_->Encode(*rows, uids));
    const int64_t B = rows->size();
    at::Tensor responses = at::full(
        {B, R}, std::max<int64_t>(tokenizer_->pad_token_id(), 0), at::kLong);
    at::Tensor rattn = at::zeros({B, R}, at::kLong);  // every real token
    at::Tensor rmask = at::zeros({B, R}, at::kLong);  // the trained ones
    for (int64_t b = 0; b < B; ++b) {
      VERL_ASSIGN_OR_RETURN(nlohmann::json answer,
                            GetDotted((*rows)[b], w.response_key()));
      std::vector<int64_t> ids, trained;
      if (answer.is_array()) {
        if (agent == nullptr) {
          return absl::InvalidArgumentError(absl::StrCat(
              "actor_rollout_ref.sft_warmup.response_key '", w.response_key(),
              "' is a list of messages (a trajectory): that needs the agent "
              "loop (actor_rollout_ref.rollout.multi_turn.enable=true)"));
        }
        absl::StatusOr<infer::agent::AgentLoop::LaidOut> laid =
            agent->LayOutTrajectory(
                nlohmann::ordered_json::parse(answer.dump()));
        if (!laid.ok()) {
          return Annotate(laid.status(),
                          absl::StrCat("actor_rollout_ref.sft_warmup."
                                       "response_key '",
                                       w.response_key(), "' of row ", b));
        }
        ids = std::move(laid->ids);
        trained = std::move(laid->mask);
      } else if (answer.is_string()) {
        ids = tokenizer_->Encode(answer.get<std::string>());
        ids.push_back(tokenizer_->eos_token_id());
        trained.assign(ids.size(), 1);
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "actor_rollout_ref.sft_warmup.response_key '", w.response_key(),
            "' is neither a string nor a list of messages in row ", b));
      }
      const int64_t len = std::min<int64_t>(ids.size(), R);
      for (int64_t k = 0; k < len; ++k) {
        responses[b][k] = ids[k];
        rmask[b][k] = trained[k];
      }
      rattn[b].narrow(0, 0, len).fill_(1);
    }
    VERL_ASSIGN_OR_RETURN(at::Tensor prompt_ids,
                          prompts.GetTensor("input_ids"));
    VERL_ASSIGN_OR_RETURN(at::Tensor pmask,
                          prompts.GetTensor("attention_mask"));
    at::Tensor mask = at::cat({pmask, rattn}, 1);
    at::Tensor pos = (mask.cumsum(1) - 1).clamp_min(0);
    VERL_ASSIGN_OR_RETURN(
        Batch batch,
        Batch::FromColumns({{"input_ids", at::cat({prompt_ids, responses}, 1)},
                            {"attention_mask", mask},
                            {"position_ids", pos},
                            {"responses", responses},
                            {"response_mask", rmask.to(at::kFloat)}}));
    if (prompts.HasNonTensor("multi_modal_inputs")) {  // the rows' images
      VERL_RETURN_IF_ERROR(batch.SetNonTensor(
          "multi_modal_inputs", prompts.non_tensor("multi_modal_inputs")));
    }
    PpoUpdateOptions u;
    u.mini_batch_size = batch.size();
    u.micro = micro;
    auto micro_fn =
        [&](const Batch& mb,
            const AggOptions& agg) -> absl::StatusOr<MicroBatchResult> {
      ForwardExtras extras;
      VERL_ASSIGN_OR_RETURN(extras.images, BatchImageInputs(mb));
      ResponseForward f = ForwardResponses(
          model, mb.tensor("input_ids"), mb.tensor("attention_mask"),
          mb.tensor("position_ids"), R, 1.0, false, {}, extras);
      VERL_ASSIGN_OR_RETURN(
          at::Tensor loss,
          AggLoss(-f.log_probs, mb.tensor("response_mask"), kTokenMean, agg));
      MicroBatchResult r;
      r.loss = loss;
      r.keep_alive = f.attention;
      r.summed["sft/loss"] = loss.item<double>() / agg.dp_size;
      return r;
    };
    VERL_ASSIGN_OR_RETURN(MetricMap m,
                          RunPpoUpdate(batch, u, *self, state, micro_fn));
    if (world_->rank() == 0 && (step % 10 == 0 || step + 1 == w.steps())) {
      LOG(INFO) << "sft warmup step " << step + 1 << "/" << w.steps()
                << " loss " << m["sft/loss"];
    }
  }
  return absl::OkStatus();
}

}  // namespace verl::rl
