// File: verl/parallel/megatron/tp_layers.cc
#include "verl/parallel/megatron/tp_layers.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace verl::parallel::megatron {

int64_t PaddedVocabSize(int64_t vocab, int64_t divisible_by, int64_t tp) {
  CHECK_GE(divisible_by, 1);
  CHECK_GE(tp, 1);
  const int64_t multiple = divisible_by * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

absl::StatusOr<at::Tensor> ShardOf(const at::Tensor& full, int64_t dim,
                                   int rank, int size, const char* what) {
  if (full.dim() <= dim || full.size(dim) % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": dim ", dim, " of shape [", absl::StrJoin(full.sizes(), ", "),
        "] does not split over tensor_model_parallel_size=", size));
  }
  const int64_t n = full.size(dim) / size;
  return full.narrow(dim, rank * n, n);
}

ColumnParallelLinear::ColumnParallelLinear(int64_t in, int64_t out, bool bias_,
                                           bool gather, bool sp, CommPtr tp)
    : in_features(in),
      out_features(out),
      gather_output(gather),
      sequence_parallel(sp && tp->size() > 1),
      tp_(std::move(tp)) {
  CHECK_EQ(out % tp_->size(), 0)
      << "ColumnParallelLinear: " << out << " outputs over tp=" << tp_->size();
  CHECK(!(gather_output && sequence_parallel))
      << "gather_output with sequence parallelism";
  out_per_partition = out / tp_->size();
  weight = register_parameter("weight", at::zeros({out_per_partition, in}));
  if (bias_) bias = register_parameter("bias", at::zeros({out_per_partition}));
}

at::Tensor ColumnParallelForward(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, bool gather_output,
                                 bool sequence_parallel, const CommPtr& tp) {
  const bool sp = sequence_parallel && tp->size() > 1;
  at::Tensor input = sp ? GatherFromSequenceParallelRegion(x, tp)
                        : CopyToTensorParallelRegion(x, tp);
  at::Tensor y = at::linear(input, weight, bias);
  return gather_output ? GatherFromTensorParallelRegion(y, tp) : y;
}

at::Tensor ColumnParallelLinear::Forward(const at::Tensor& x) const {
  return ColumnParallelForward(x, weight, bias, gather_output,
                               sequence_parallel, tp_);
}

RowParallelLinear::RowParallelLinear(int64_t in, int64_t out, bool bias_,
                                     bool input_parallel, bool sp, CommPtr tp)
    : in_features(in),
      out_features(out),
      input_is_parallel(input_parallel),
      sequence_parallel(sp && tp->size() > 1),
      tp_(std::move(tp)) {
  CHECK_EQ(in % tp_->size(), 0)
      << "RowParallelLinear: " << in << " inputs over tp=" << tp_->size();
  CHECK(input_is_parallel || !sequence_parallel)
      << "sequence parallelism needs input_is_parallel";
  in_per_partition = in / tp_->size();
  weight = register_parameter("weight", at::zeros({out, in_per_partition}));
  if (bias_) bias = register_parameter("bias", at::zeros({out}));
}

at::Tensor RowParallelLinear::Forward(const at::Tensor& x) const {
  at::Tensor input =
      input_is_parallel ? x : ScatterToTensorParallelRegion(x, tp_);
  at::Tensor partial = at::linear(input, weight);
  at::Tensor y = sequence_parallel
                     ? ReduceScatterToSequenceParallelRegion(partial, tp_)
                     : ReduceFromTensorParallelRegion(partial, tp_);
  return bias.defined() ? y + bias : y;
}

VocabParallelEmbedding::VocabParallelEmbedding(int64_t vocab, int64_t hidden,
                                               bool sp, CommPtr tp)
    : sequence_parallel(sp && tp->size() > 1), tp_(std::move(tp)) {
  CHECK_EQ(vocab % tp_->size(), 0) << "VocabParallelEmbedding: padded vocab "
                                   << vocab << " over tp=" << tp_->size();
  vocab_per_partition = vocab / tp_->size();
  vocab_start_ = tp_->rank() * vocab_per_partition;
  weight =
      register_parameter("weight", at::zeros({vocab_per_partition, hidden}));
}

at::Tensor VocabParallelEmbedding::Forward(const at::Tensor& ids) const {
  if (tp_->size() == 1) return at::embedding(weight, ids);
  at::Tensor outside =
      (ids < vocab_start_)
          .logical_or(ids >= vocab_start_ + vocab_per_partition);
  at::Tensor local = (ids - vocab_start_).masked_fill(outside, 0);
  at::Tensor partial =
      at::embedding(weight, local).masked_fill(outside.unsqueeze(-1), 0.0);
  return sequence_parallel ? ReduceScatterToSequenceParallelRegion(partial, tp_)
                           : ReduceFromTensorParallelRegion(partial, tp_);
}

void SumGradsOverTensorParallel(const std::vector<at::Tensor>& params,
                                Communicator& tp) {
  if (tp.size() == 1) return;
  for (const at::Tensor& p : params) {
    at::Tensor& grad = p.mutable_grad();
    at::Tensor g = grad.defined() ? grad : at::zeros_like(p);
    at::Tensor sum = AllReduceSum(g, tp);
    if (grad.defined()) {
      grad.copy_(sum);
    } else {
      grad = sum;
    }
  }
}

}  // namespace verl::parallel::megatron
