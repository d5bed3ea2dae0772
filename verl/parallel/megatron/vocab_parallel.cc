// File: verl/parallel/megatron/vocab_parallel.cc
#include "verl/parallel/megatron/vocab_parallel.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

namespace verl::parallel::megatron {
namespace {

using torch::autograd::variable_list;

// This rank's valid (unpadded) columns, as z = logits / T in fp32.
struct Shard {
  int64_t start = 0;  // global id of local column 0
  int64_t valid = 0;  // local columns < vocab_size
};

Shard ShardOfRank(const at::Tensor& logits, int64_t vocab_size,
                  const Communicator& tp) {
  const int64_t per = logits.size(-1);
  Shard s;
  s.start = tp.rank() * per;
  s.valid = std::clamp<int64_t>(vocab_size - s.start, 0, per);
  CHECK_GE(per * tp.size(), vocab_size)
      << "vocab-parallel logits: " << per << " columns x tp=" << tp.size()
      << " < vocab_size " << vocab_size;
  return s;
}

at::Tensor ScaledValid(const at::Tensor& logits, const Shard& s,
                       double temperature) {
  const auto dtype =
      logits.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  return logits.narrow(-1, 0, s.valid).to(dtype) / temperature;
}

// Target logit on the owning rank (0 elsewhere) and the in-shard mask.
std::pair<at::Tensor, at::Tensor> LocalTarget(const at::Tensor& z,
                                              const at::Tensor& labels,
                                              const Shard& s) {
  at::Tensor local = labels - s.start;
  at::Tensor mine = (local >= 0).logical_and(local < s.valid);
  if (s.valid == 0) return {at::zeros(labels.sizes(), z.options()), mine};
  at::Tensor idx = local.masked_fill(mine.logical_not(), 0).unsqueeze(-1);
  at::Tensor target =
      z.gather(-1, idx).squeeze(-1).masked_fill(mine.logical_not(), 0.0);
  return {target, mine};
}

class VocabParallelBackward : public torch::autograd::Node {
 public:
  std::string name() const override { return "VocabParallelLogProbBackward"; }

  variable_list apply(variable_list&& grads) override {
    at::Tensor grad_logits = at::zeros(logits_.sizes(), logits_.options());
    if (shard_.valid > 0) {
      at::Tensor z = ScaledValid(logits_, shard_, temperature_);
      at::Tensor p = (z - lse_.unsqueeze(-1)).exp();
      at::Tensor gz = at::zeros_like(z);
      if (grads[0].defined()) {  // d logp / dz = onehot - p
        at::Tensor g = grads[0].to(z.scalar_type()).unsqueeze(-1);
        gz = gz - p * g;
        auto [unused, mine] = LocalTarget(z, labels_, shard_);
        at::Tensor idx = (labels_ - shard_.start)
                             .masked_fill(mine.logical_not(), 0)
                             .unsqueeze(-1);
        gz =
            gz.scatter_add(-1, idx, g * mine.unsqueeze(-1).to(z.scalar_type()));
      }
      if (grads.size() > 1 && grads[1].defined()) {  // -p (z - E[z])
        at::Tensor g = grads[1].to(z.scalar_type()).unsqueeze(-1);
        gz = gz - g * p * (z - mean_z_.unsqueeze(-1));
      }
      grad_logits.narrow(-1, 0, shard_.valid).copy_(gz / temperature_);
    }
    release_variables();
    return {grad_logits};
  }

  void release_variables() override {
    logits_.reset();
    labels_.reset();
    lse_.reset();
    mean_z_.reset();
  }

  at::Tensor logits_, labels_, lse_, mean_z_;
  Shard shard_;
  double temperature_ = 1.0;
};

}  // namespace

VocabParallelOutput VocabParallelLogProbsAndEntropy(
    const at::Tensor& logits, const at::Tensor& labels, int64_t vocab_size,
    const CommPtr& tp, double temperature, bool with_entropy) {
  CHECK_GT(temperature, 0.0);
  CHECK(labels.sizes() == logits.sizes().slice(0, logits.dim() - 1))
      << "labels must match logits without the vocab dim";
  const Shard shard = ShardOfRank(logits, vocab_size, *tp);
  VocabParallelOutput out;
  at::Tensor lse, mean_z;
  {
    at::NoGradGuard no_grad;
    at::Tensor z = ScaledValid(logits.detach(), shard, temperature);
    const double lowest = -std::numeric_limits<double>::infinity();
    at::Tensor local_max = shard.valid > 0
                               ? z.amax(-1)
                               : at::full(labels.sizes(), lowest, z.options());
    at::Tensor max = AllReduceMax(local_max, *tp);
    at::Tensor e = (z - max.unsqueeze(-1)).exp();
    auto [target, unused] = LocalTarget(z, labels, shard);
    // One sum all-reduce: [sum exp, target logit, sum exp * z] per token.
    at::Tensor stats =
        AllReduceSum(at::stack({e.sum(-1), target, (e * z).sum(-1)}, -1), *tp);
    at::Tensor sum_exp = stats.select(-1, 0);
    lse = max + sum_exp.log();
    out.log_probs = stats.select(-1, 1) - lse;
    if (with_entropy) {
      mean_z = stats.select(-1, 2) / sum_exp;
      out.entropy = lse - mean_z;
    }
  }
  if (!at::GradMode::is_enabled() || !logits.requires_grad()) return out;
  auto node = std::shared_ptr<VocabParallelBackward>(
      new VocabParallelBackward(), torch::autograd::deleteNode);
  node->logits_ = logits.detach();
  node->labels_ = labels;
  node->lse_ = lse;
  node->mean_z_ = mean_z;
  node->shard_ = shard;
  node->temperature_ = temperature;
  node->set_next_edges(torch::autograd::collect_next_edges(logits));
  torch::autograd::set_history(out.log_probs, node);
  if (with_entropy) torch::autograd::set_history(out.entropy, node);
  return out;
}

at::Tensor VocabParallelCrossEntropy(const at::Tensor& logits,
                                     const at::Tensor& labels,
                                     int64_t vocab_size, const CommPtr& tp) {
  return -VocabParallelLogProbsAndEntropy(logits, labels, vocab_size, tp, 1.0,
                                          /*with_entropy=*/false)
              .log_probs;
}

at::Tensor GatherVocabParallelLogits(const at::Tensor& logits,
                                     int64_t vocab_size, const CommPtr& tp) {
  return GatherFromTensorParallelRegion(logits, tp).narrow(-1, 0, vocab_size);
}

}  // namespace verl::parallel::megatron
