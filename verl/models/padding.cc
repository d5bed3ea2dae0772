// File: verl/models/padding.cc
#include "verl/models/padding.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/zeros.h>
#include <glog/logging.h>

namespace verl::models {

UnpadInfo Unpad(const at::Tensor& attention_mask) {
  CHECK_EQ(attention_mask.dim(), 2) << "attention_mask must be [B, L]";
  UnpadInfo info;
  info.batch = attention_mask.size(0);
  info.seqlen = attention_mask.size(1);
  at::Tensor mask = attention_mask.ne(0);
  info.indices = mask.reshape({-1}).nonzero().reshape({-1});
  at::Tensor counts = mask.sum(1).to(at::kCPU, at::kLong).contiguous();
  const int64_t* c = counts.data_ptr<int64_t>();
  info.cu_seqlens.assign(1, 0);
  for (int64_t b = 0; b < info.batch; ++b) {
    info.cu_seqlens.push_back(info.cu_seqlens.back() + c[b]);
  }
  return info;
}

at::Tensor UnpadTensor(const at::Tensor& x, const UnpadInfo& info) {
  std::vector<int64_t> shape = {info.batch * info.seqlen};
  for (int64_t d = 2; d < x.dim(); ++d) shape.push_back(x.size(d));
  return x.reshape(shape).index_select(0, info.indices);
}

at::Tensor PadTensor(const at::Tensor& x, const UnpadInfo& info) {
  std::vector<int64_t> flat = {info.batch * info.seqlen};
  std::vector<int64_t> shape = {info.batch, info.seqlen};
  for (int64_t d = 1; d < x.dim(); ++d) {
    flat.push_back(x.size(d));
    shape.push_back(x.size(d));
  }
  return at::zeros(flat, x.options())
      .index_copy(0, info.indices, x)
      .reshape(shape);
}

}  // namespace verl::models
