#include "verl/rl/actor.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/rl/agg_loss.h"
#include "verl/rl/kl.h"
#include "verl/rl/model_forward.h"
#include "verl/rl/seqlen_balancing.h"
#include "verl/rl/value_loss.h"

namespace verl::rl {

absl::Status AllReduceSum(parallel::Communicator* group,
                          std::vector<double>& values) {
  if (!group || group->size() == 1 || values.empty()) return absl::OkStatus();
  at::Tensor t = torch::tensor(values, torch::kDouble);
  VERL_RETURN_IF_ERROR(group->AllReduce(t, parallel::ReduceOp::kSum));
  for (size_t i = 0; i < values.size(); ++i) values[i] = t[i].item<double>();
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<int64_t>>> MicroBatchIndices(
    const core::Batch& batch, const MicroBatchOptions& options) {
  const int64_t n = batch.size();
  if (!options.use_dynamic_bsz) {
    if (options.micro_batch_size < 1) {
      return absl::InvalidArgumentError("micro batch size must be >= 1");
    }
    std::vector<std::vector<int64_t>> out;
    for (int64_t start = 0; start < n; start += options.micro_batch_size) {
      std::vector<int64_t> idx;
      for (int64_t i = start; i < std::min(n, start + options.micro_batch_size);
           ++i) {
        idx.push_back(i);
      }
      out.push_back(std::move(idx));
    }
    return out;
  }
  VERL_ASSIGN_OR_RETURN(at::Tensor mask, batch.GetTensor("attention_mask"));
  at::Tensor lens = mask.sum(1).to(at::kLong).contiguous();
  std::vector<int64_t> seqlens(lens.data_ptr<int64_t>(),
                               lens.data_ptr<int64_t>() + n);
  return RearrangeMicroBatches(seqlens, options.max_token_len);
}

Actor::Actor(std::shared_ptr<models::CausalLM> model,
             std::unique_ptr<TrainState> train_state, ActorOptions options,
             std::shared_ptr<parallel::Communicator> dp_group)
    : model_(std::move(model)),
      train_state_(std::move(train_state)),
      options_(std::move(options)),
      dp_group_(dp_group ? std::move(dp_group)
                         : parallel::SingleProcessCommunicator()) {}

absl::StatusOr<LogProbResult> Actor::ComputeLogProb(const core::Batch& batch,
                                                    bool with_entropy) {
  VERL_ASSIGN_OR_RETURN(at::Tensor responses, batch.GetTensor("responses"));
  const int64_t R = responses.size(1);
  VERL_ASSIGN_OR_RETURN(auto micro,
                        MicroBatchIndices(batch, options_.log_prob_micro));
  torch::NoGradGuard no_grad;
  const auto& input_ids = batch.tensor("input_ids");
  const auto& attention_mask = batch.tensor("attention_mask");
  const auto& position_ids = batch.tensor("position_ids");
  LogProbResult result;
  result.log_probs = torch::zeros({batch.size(), R}, torch::kFloat);
  if (with_entropy)
    result.entropy = torch::zeros({batch.size(), R}, torch::kFloat);
  for (const auto& idx_vec : micro) {
    at::Tensor idx = torch::tensor(idx_vec, torch::kLong);
    ResponseForward f = ForwardResponses(
        *model_, input_ids.index_select(0, idx),
        attention_mask.index_select(0, idx), position_ids.index_select(0, idx),
        R, options_.temperature, with_entropy);
    result.log_probs.index_copy_(0, idx, f.log_probs);
    if (with_entropy) result.entropy.index_copy_(0, idx, f.entropy);
  }
  return result;
}

absl::StatusOr<MetricMap> Actor::UpdatePolicy(const core::Batch& batch) {
  if (!train_state_)
    return absl::FailedPreconditionError("this role has no optimizer");
  VERL_ASSIGN_OR_RETURN(PolicyLossFn loss_fn,
                        GetPolicyLoss(options_.loss_mode));
  for (const char* key :
       {"input_ids", "attention_mask", "position_ids", "responses",
        "response_mask", "old_log_probs", "advantages"}) {
    if (!batch.HasTensor(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("update_actor: batch lacks \"", key, "\""));
    }
  }
  if (options_.use_kl_loss && !batch.HasTensor("ref_log_prob")) {
    return absl::InvalidArgumentError(
        "update_actor: use_kl_loss needs \"ref_log_prob\"");
  }
  const int64_t n = batch.size();
  const int64_t mini = options_.mini_batch_size;
  if (mini < 1 || n % mini != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update_actor: ", n,
        " local rows are not a multiple of the mini-batch size ", mini));
  }
  const int64_t R = batch.tensor("responses").size(1);
  const bool want_entropy =
      options_.calculate_entropy || options_.entropy_coeff != 0;
  const double dp = dp_group_->size();
  model_->train();

  // Metrics: summed losses (verl sums pg_loss/kl_loss over optimizer steps),
  // token-weighted means for the rest, then averaged over mini-batches.
  double pg_loss_sum = 0, kl_loss_sum = 0;
  std::map<std::string, double>
      weighted;  // Σ over mini-batches of token-mean values
  std::vector<double> grad_norms;
  int64_t num_minis = 0;

  for (int64_t epoch = 0; epoch < options_.ppo_epochs; ++epoch) {
    for (int64_t start = 0; start < n; start += mini) {
      VERL_ASSIGN_OR_RETURN(core::Batch mb, batch.Slice(start, start + mini));
      const at::Tensor& mask = mb.tensor("response_mask");
      // Global counts over the DP group (verl's batch_num_tokens /
      // global_batch_size).
      std::vector<double> counts = {mask.sum().item<double>(),
                                    (mask.sum(1) > 0).sum().item<double>()};
      VERL_RETURN_IF_ERROR(AllReduceSum(dp_group_.get(), counts));
      PolicyLossConfig loss_config = options_.policy_loss;
      loss_config.agg.dp_size = dp;
      loss_config.agg.batch_num_tokens = counts[0];
      loss_config.agg.global_batch_size = counts[1];
      const AggOptions agg = loss_config.agg;

      VERL_ASSIGN_OR_RETURN(auto micro,
                            MicroBatchIndices(mb, options_.update_micro));
      train_state_->ZeroGrad();
      std::map<std::string, double> mini_weighted;
      double mini_pg = 0, mini_kl = 0;
      for (const auto& idx_vec : micro) {
        at::Tensor idx = torch::tensor(idx_vec, torch::kLong);
        auto take = [&](const char* key) {
          return mb.tensor(key).index_select(0, idx);
        };
        ResponseForward f = ForwardResponses(
            *model_, take("input_ids"), take("attention_mask"),
            take("position_ids"), R, options_.temperature, want_entropy);
        PolicyLossInputs in;
        in.old_log_prob = take("old_log_probs");
        in.log_prob = f.log_probs;
        in.advantages = take("advantages");
        in.response_mask = take("response_mask");
        if (mb.HasTensor("rollout_is_weights"))
          in.rollout_is_weights = take("rollout_is_weights");
        VERL_ASSIGN_OR_RETURN(PolicyLossOutput pg, loss_fn(in, loss_config));
        at::Tensor loss = pg.loss;
        // Token share of this micro-batch in the global mini-batch: weights
        // the micro-batch's mean metrics into a global token mean.
        const double share =
            in.response_mask.sum().item<double>() / std::max(counts[0], 1.0);
        for (const auto& [k, v] : pg.metrics) mini_weighted[k] += v * share;
        if (want_entropy) {
          VERL_ASSIGN_OR_RETURN(
              at::Tensor ent,
              ComputeEntropyLoss(f.entropy, in.response_mask,
                                 loss_config.loss_agg_mode, agg));
          mini_weighted["actor/entropy"] += ent.item<double>() / dp;
          if (options_.entropy_coeff != 0)
            loss = loss - options_.entropy_coeff * ent;
        }
        if (options_.use_kl_loss) {
          VERL_ASSIGN_OR_RETURN(at::Tensor kld,
                                KlPenalty(f.log_probs, take("ref_log_prob"),
                                          options_.kl_loss_type));
          VERL_ASSIGN_OR_RETURN(
              at::Tensor kl_loss,
              AggLoss(kld, in.response_mask, loss_config.loss_agg_mode, agg));
          loss = loss + options_.kl_loss_coef * kl_loss;
          mini_kl += kl_loss.item<double>() / dp;
        }
        mini_pg += pg.loss.item<double>() / dp;
        loss.backward();
      }
      VERL_ASSIGN_OR_RETURN(double grad_norm, train_state_->Step());
      // Sum the per-rank parts: each rank's micro losses add up to its share.
      std::vector<double> sums = {mini_pg, mini_kl};
      std::vector<std::string> keys;
      for (const auto& [k, v] : mini_weighted) {
        keys.push_back(k);
        sums.push_back(v);
      }
      VERL_RETURN_IF_ERROR(AllReduceSum(dp_group_.get(), sums));
      pg_loss_sum += sums[0];
      kl_loss_sum += sums[1];
      for (size_t i = 0; i < keys.size(); ++i) weighted[keys[i]] += sums[2 + i];
      grad_norms.push_back(grad_norm);
      ++num_minis;
    }
  }
  MetricMap metrics;
  metrics["actor/pg_loss"] = pg_loss_sum;
  if (options_.use_kl_loss) {
    metrics["actor/kl_loss"] = kl_loss_sum;
    metrics["actor/kl_coef"] = options_.kl_loss_coef;
  }
  for (const auto& [k, v] : weighted) metrics[k] = v / num_minis;
  double norm_sum = 0;
  for (double g : grad_norms) norm_sum += g;
  metrics["actor/grad_norm"] = norm_sum / grad_norms.size();
  metrics["actor/num_skipped_steps"] = train_state_->skipped_steps();
  return metrics;
}

}  // namespace verl::rl
