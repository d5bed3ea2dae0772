// File: verl/models/padding.h
//
// Conversions between verl's padded layout ([B, L] with attention_mask) and
// the packed layout (real tokens only, concatenated), like flash-attn's
// unpad_input / pad_input that verl's use_remove_padding path relies on.
#ifndef VERL_MODELS_PADDING_H_
#define VERL_MODELS_PADDING_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace verl::models {

struct UnpadInfo {
  at::Tensor indices;               // [T] int64 flat indices into B*L
  std::vector<int64_t> cu_seqlens;  // [B+1] real tokens per row, cumulated
  int64_t batch = 0;
  int64_t seqlen = 0;
};

// Real tokens (mask != 0) of each row become one sequence, in row order.
UnpadInfo Unpad(const at::Tensor& attention_mask);

// x [B, L, ...] -> [T, ...] (real tokens only).
at::Tensor UnpadTensor(const at::Tensor& x, const UnpadInfo& info);

// x [T, ...] -> [B, L, ...], zeros at padding. Differentiable.
at::Tensor PadTensor(const at::Tensor& x, const UnpadInfo& info);

}  // namespace verl::models

#endif  // VERL_MODELS_PADDING_H_
