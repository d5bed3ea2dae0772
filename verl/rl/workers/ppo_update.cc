#include "verl/rl/workers/ppo_update.h"

#include <torch/types.h>

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/profiler/profile_scope.h"
#include "verl/rl/data/seqlen_balancing.h"

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
  auto parts = RearrangeMicroBatches(seqlens, options.max_token_len, 0,
                                     options.num_batches_divided_by);
  parallel::Communicator* group = options.same_count_group;
  if (group == nullptr || group->size() == 1) return parts;
  // Max over the group of (this count, -rows, failed): the common count,
  // the fewest rows any member has, and whether any member failed.
  const int64_t count = parts.ok() ? static_cast<int64_t>(parts->size()) : 0;
  const std::vector<double> local = {static_cast<double>(count),
                                     -static_cast<double>(n),
                                     parts.ok() ? 0.0 : 1.0};
  at::Tensor t = torch::tensor(local, torch::kDouble);
  VERL_RETURN_IF_ERROR(group->AllReduce(t, parallel::ReduceOp::kMax));
  if (!parts.ok()) return parts;
  const int64_t common = static_cast<int64_t>(t[0].item<double>());
  const int64_t fewest = static_cast<int64_t>(-t[1].item<double>());
  if (t[2].item<double>() > 0) {
    return absl::InvalidArgumentError(
        "dynamic micro-batching failed on another data-parallel rank");
  }
  if (common > fewest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dynamic batching: ", common,
        " micro-batches on every rank, but a rank has only ", fewest, " rows"));
  }
  if (common == count) return parts;
  return RearrangeMicroBatches(seqlens, options.max_token_len, common,
                               options.num_batches_divided_by);
}

absl::Status BroadcastMetrics(parallel::Communicator& group, int root,
                              MetricMap* metrics) {
  if (group.size() == 1) return absl::OkStatus();
  // "key\n" lines and the values, sized first.
  std::string keys;
  std::vector<double> values;
  for (const auto& [k, v] : *metrics) {
    absl::StrAppend(&keys, k, "\n");
    values.push_back(v);
  }
  at::Tensor sizes = at::tensor(
      {static_cast<int64_t>(keys.size()), static_cast<int64_t>(values.size())},
      at::kLong);
  VERL_RETURN_IF_ERROR(group.Broadcast(sizes, root));
  at::Tensor text = at::zeros({sizes[0].item<int64_t>() + 1}, at::kByte);
  at::Tensor nums = at::zeros({sizes[1].item<int64_t>() + 1}, at::kDouble);
  if (group.rank() == root) {
    std::memcpy(text.data_ptr(), keys.data(), keys.size());
    std::memcpy(nums.data_ptr(), values.data(), values.size() * sizeof(double));
  }
  VERL_RETURN_IF_ERROR(group.Broadcast(text, root));
  VERL_RETURN_IF_ERROR(group.Broadcast(nums, root));
  if (group.rank() == root) return absl::OkStatus();
  metrics->clear();
  const std::string all(static_cast<const char*>(text.data_ptr()),
                        sizes[0].item<int64_t>());
  const double* v = nums.data_ptr<double>();
  size_t start = 0, i = 0;
  for (size_t nl = all.find('\n'); nl != std::string::npos;
       start = nl + 1, nl = all.find('\n', start)) {
    (*metrics)[all.substr(start, nl - start)] = v[i++];
  }
  return absl::OkStatus();
}

absl::StatusOr<MetricMap> RunPpoUpdate(const core::Batch& batch,
                                       const PpoUpdateOptions& options,
                                       parallel::Communicator& dp_group,
                                       TrainState& train_state,
                                       const MicroBatchFn& micro_fn) {
  const int64_t n = batch.size();
  const int64_t mini = options.mini_batch_size;
  if (mini < 1 || n % mini != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        n, " local rows are not a multiple of the mini-batch size ", mini));
  }
  const double dp = dp_group.size();
  MetricMap summed, token_means;
  double grad_norm_sum = 0;
  int64_t steps = 0;
  for (int64_t epoch = 0; epoch < options.epochs; ++epoch) {
    for (int64_t start = 0; start < n; start += mini) {
      VERL_ASSIGN_OR_RETURN(core::Batch mb, batch.Slice(start, start + mini));
      VERL_ASSIGN_OR_RETURN(at::Tensor mask, mb.GetTensor(options.mask_key));
      // Global counts (verl's batch_num_tokens / global_batch_size).
      std::vector<double> counts = {mask.sum().item<double>(),
                                    (mask.sum(1) > 0).sum().item<double>()};
      VERL_RETURN_IF_ERROR(AllReduceSum(&dp_group, counts));
      AggOptions agg;
      agg.dp_size = dp;
      agg.batch_num_tokens = counts[0];
      agg.global_batch_size = counts[1];

      MicroBatchOptions micro_options = options.micro;
      if (micro_options.same_count_group == nullptr)
        micro_options.same_count_group = &dp_group;
      VERL_ASSIGN_OR_RETURN(auto micro, MicroBatchIndices(mb, micro_options));
      if (options.before_mini_batch) {
        options.before_mini_batch(static_cast<int64_t>(micro.size()));
      }
      train_state.ZeroGrad();
      MetricMap mini_values;  // summed parts and token-share-weighted means
      auto add = [&](const core::Batch& mbatch, const MicroBatchResult& r) {
        const double share =
            mbatch.tensor(options.mask_key).sum().item<double>() /
            std::max(counts[0], 1.0);
        for (const auto& [k, v] : r.summed) mini_values["s:" + k] += v;
        for (const auto& [k, v] : r.token_means)
          mini_values["m:" + k] += v * share;
      };
      if (options.runner) {
        std::vector<core::Batch> batches;
        for (const auto& rows : micro) {
          VERL_ASSIGN_OR_RETURN(core::Batch mbatch, mb.Index(rows));
          batches.push_back(std::move(mbatch));
        }
        std::vector<std::shared_ptr<void>> keep_alive;
        VERL_RETURN_IF_ERROR(options.runner(
            batches, [&](int64_t m) -> absl::StatusOr<at::Tensor> {
              VERL_ASSIGN_OR_RETURN(MicroBatchResult r,
                                    micro_fn(batches[m], agg));
              add(batches[m], r);
              keep_alive.push_back(r.keep_alive);
              return r.loss;
            }));
      }
      for (size_t i = 0; !options.runner && i < micro.size(); ++i) {
        profiler::ProfileScope micro_scope("micro_batch");
        VERL_ASSIGN_OR_RETURN(core::Batch mbatch, mb.Index(micro[i]));
        std::optional<profiler::ProfileScope> forward;
        forward.emplace("forward", profiler::MemoryCategory::kActivations);
        VERL_ASSIGN_OR_RETURN(MicroBatchResult r, micro_fn(mbatch, agg));
        forward.reset();
        add(mbatch, r);
        profiler::ProfileScope backward("backward",
                                        profiler::MemoryCategory::kGradients);
        r.loss.backward();
      }
      std::optional<profiler::ProfileScope> optimizer;
      optimizer.emplace("optimizer_step",
                        profiler::MemoryCategory::kOptimizerState);
      VERL_ASSIGN_OR_RETURN(double grad_norm, train_state.Step());
      optimizer.reset();
      std::vector<std::string> keys;
      std::vector<double> values;
      for (const auto& [k, v] : mini_values) {
        keys.push_back(k);
        values.push_back(v);
      }
      VERL_RETURN_IF_ERROR(AllReduceSum(&dp_group, values));
      for (size_t i = 0; i < keys.size(); ++i) {
        (keys[i][0] == 's' ? summed : token_means)[keys[i].substr(2)] +=
            values[i];
      }
      grad_norm_sum += grad_norm;
      ++steps;
    }
  }
  MetricMap metrics = summed;
  for (const auto& [k, v] : token_means) metrics[k] = v / steps;
  if (!options.grad_norm_key.empty())
    metrics[options.grad_norm_key] = grad_norm_sum / steps;
  return metrics;
}

}  // namespace verl::rl
