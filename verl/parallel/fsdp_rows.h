// Row views shared by fsdp.cc and fsdp_plan.cc (private to the fsdp target):
// a parameter as [dim0, row_numel] rows, padded to world x shard_rows rows so
// that every rank's shard has the same size.
#ifndef VERL_PARALLEL_FSDP_ROWS_H_
#define VERL_PARALLEL_FSDP_ROWS_H_

#include <ATen/core/Tensor.h>
#include <ATen/ops/constant_pad_nd.h>

#include <cstdint>

#include "verl/parallel/fsdp.h"

namespace verl::parallel::fsdp_rows {

// `t` as [dim0, row_numel] rows.
inline at::Tensor AsRows(const at::Tensor& t, const ShardLayout& l) {
  return t.reshape({l.dim0, l.row_numel});
}

// `t` as [padded_rows, row_numel], zero rows appended.
inline at::Tensor PaddedRows(const at::Tensor& t, const ShardLayout& l) {
  at::Tensor rows = AsRows(t, l);
  if (l.padded_rows() == l.dim0) return rows;
  return at::constant_pad_nd(rows, {0, 0, 0, l.padded_rows() - l.dim0});
}

// Full tensor from the [world, shard_numel] concatenation of shards.
inline at::Tensor FromShardRows(const at::Tensor& per_rank,
                                const ShardLayout& l) {
  return per_rank.reshape({l.padded_rows(), l.row_numel})
      .narrow(0, 0, l.dim0)
      .reshape(l.full_shape)
      .contiguous();
}

inline int64_t Bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace verl::parallel::fsdp_rows

#endif  // VERL_PARALLEL_FSDP_ROWS_H_
