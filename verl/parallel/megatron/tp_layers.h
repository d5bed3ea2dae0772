// File: verl/parallel/megatron/tp_layers.h
//
// Megatron's tensor-parallel layers (megatron/core/tensor_parallel/
// layers.py) as torch::nn::Modules holding only this rank's shard:
//
//   ColumnParallelLinear  Y = X A, A split by output columns: rank r holds
//                         rows [r*out/tp, (r+1)*out/tp) of weight [out, in].
//   RowParallelLinear     Y = X A, A split by input rows: rank r holds
//                         columns [r*in/tp, ...) of weight [out, in]; the
//                         partial products are summed over tp, then the
//                         (replicated) bias is added.
//   VocabParallelEmbedding rows [r*V/tp, ...) of the table; out-of-range
//                         ids give 0 and the partial lookups are summed.
//
// With sequence parallelism the activations outside these layers are split
// along the token dim (dim 0): the column layer all-gathers its input
// (reduce-scatter in backward), the row layer and the embedding
// reduce-scatter their output (all-gather in backward). Parameters that are
// replicated over tp but see only part of the tokens (norm weights, the row
// layer's bias) then carry partial gradients: SumGradsOverTensorParallel()
// adds them up, as Megatron's finalize_model_grads does.
#ifndef VERL_PARALLEL_MEGATRON_TP_LAYERS_H_
#define VERL_PARALLEL_MEGATRON_TP_LAYERS_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "verl/parallel/megatron/mappings.h"

namespace verl::parallel::megatron {

// Megatron's _vocab_size_with_padding: `vocab` rounded up to a multiple of
// divisible_by * tp (make_vocab_size_divisible_by, default 128).
int64_t PaddedVocabSize(int64_t vocab, int64_t divisible_by, int64_t tp);

// Rows [r*n/tp, (r+1)*n/tp) of dim `dim` of `full`: this rank's shard.
// InvalidArgument naming `what` when the dim does not split evenly.
absl::StatusOr<at::Tensor> ShardOf(const at::Tensor& full, int64_t dim,
                                   int rank, int size, const char* what);

// The column-parallel forward with a given weight shard [out/tp, in]
// (Megatron passes the embedding table here when the output layer shares
// it): input copy (or sequence all-gather), linear, optional output gather.
at::Tensor ColumnParallelForward(const at::Tensor& x, const at::Tensor& weight,
                                 const at::Tensor& bias, bool gather_output,
                                 bool sequence_parallel, const CommPtr& tp);

class ColumnParallelLinear : public torch::nn::Module {
 public:
  // CHECKs that tp divides `out`.
  ColumnParallelLinear(int64_t in, int64_t out, bool bias, bool gather_output,
                       bool sequence_parallel, CommPtr tp);
  // x [T, in] ([T/tp, in] with sequence parallelism) -> [T, out/tp]
  // ([T, out] when gather_output).
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t in_features, out_features, out_per_partition;
  bool gather_output, sequence_parallel;
  at::Tensor weight;  // [out/tp, in]
  at::Tensor bias;    // [out/tp] or undefined

 private:
  CommPtr tp_;
};

class RowParallelLinear : public torch::nn::Module {
 public:
  // CHECKs that tp divides `in`.
  RowParallelLinear(int64_t in, int64_t out, bool bias, bool input_is_parallel,
                    bool sequence_parallel, CommPtr tp);
  // x [T, in/tp] ([T, in] unless input_is_parallel) -> [T, out]
  // ([T/tp, out] with sequence parallelism).
  at::Tensor Forward(const at::Tensor& x) const;

  int64_t in_features, out_features, in_per_partition;
  bool input_is_parallel, sequence_parallel;
  at::Tensor weight;  // [out, in/tp]
  at::Tensor bias;    // [out], replicated; undefined without bias

 private:
  CommPtr tp_;
};

class VocabParallelEmbedding : public torch::nn::Module {
 public:
  // `vocab` is the padded size (a multiple of tp; CHECKed).
  VocabParallelEmbedding(int64_t vocab, int64_t hidden, bool sequence_parallel,
                         CommPtr tp);
  // ids [T] -> [T, hidden] ([T/tp, hidden] with sequence parallelism).
  at::Tensor Forward(const at::Tensor& ids) const;

  int64_t vocab_start() const { return vocab_start_; }
  int64_t vocab_per_partition;
  bool sequence_parallel;
  at::Tensor weight;  // [vocab/tp, hidden]

 private:
  CommPtr tp_;
  int64_t vocab_start_;
};

// Sums the gradients of `params` over tp in place (parameters without a
// gradient contribute zeros, so every rank joins the collective).
void SumGradsOverTensorParallel(const std::vector<at::Tensor>& params,
                                Communicator& tp);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_TP_LAYERS_H_
