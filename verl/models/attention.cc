// File: verl/models/attention.cc
#include "verl/models/attention.h"

#include <ATen/ATen.h>
#include <glog/logging.h>

#include <cmath>
#include <limits>
#include <utility>

namespace verl::models {

VarlenCausalAttention::VarlenCausalAttention(std::vector<int64_t> cu_seqlens,
                                             std::vector<int64_t> layer_windows)
    : cu_seqlens_(std::move(cu_seqlens)),
      layer_windows_(std::move(layer_windows)) {
  CHECK(!cu_seqlens_.empty() && cu_seqlens_.front() == 0)
      << "cu_seqlens must start at 0";
  for (size_t i = 1; i < cu_seqlens_.size(); ++i) {
    CHECK_GE(cu_seqlens_[i], cu_seqlens_[i - 1]) << "cu_seqlens not sorted";
  }
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k,
                           const at::Tensor& v, int64_t window) {
  // CPU bf16/fp16 batched GEMMs are far slower than fp32 ones; compute in
  // fp32 and round the output (see layers.h UpcastGemm).
  if (q.device().is_cpu() &&
      (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf)) {
    return CausalAttention(q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat),
                           window)
        .to(q.scalar_type());
  }
  const int64_t lq = q.size(0), lk = k.size(0);
  const int64_t n_heads = q.size(1), n_kv = k.size(1), d = q.size(2);
  CHECK_EQ(n_heads % n_kv, 0) << "n_heads must be a multiple of n_kv_heads";
  CHECK_LE(lq, lk);
  const int64_t group = n_heads / n_kv;
  // [n_kv, group, Lq, d] x [n_kv, 1, d, Lk]: GQA by broadcasting, no copies
  // of k/v per query head.
  at::Tensor qh = q.reshape({lq, n_kv, group, d}).permute({1, 2, 0, 3});
  at::Tensor kh = k.permute({1, 2, 0}).unsqueeze(1);
  at::Tensor vh = v.permute({1, 0, 2}).unsqueeze(1);
  at::Tensor scores = at::matmul(qh, kh) * (1.0 / std::sqrt(double(d)));
  if (lq > 1 || window > 0) {
    at::TensorOptions opts = at::TensorOptions().device(q.device());
    at::Tensor qi = at::arange(lk - lq, lk, opts.dtype(at::kLong)).unsqueeze(1);
    at::Tensor kj = at::arange(0, lk, opts.dtype(at::kLong)).unsqueeze(0);
    at::Tensor masked = kj > qi;
    if (window > 0) masked = masked | (kj <= qi - window);
    scores =
        scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
  }
  at::Tensor probs =
      at::softmax(scores, -1,
                  q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat)
          .to(q.scalar_type());
  at::Tensor out = at::matmul(probs, vh);  // [n_kv, group, Lq, d]
  return out.permute({2, 0, 1, 3}).reshape({lq, n_heads, d});
}

at::Tensor VarlenCausalAttention::Attend(int64_t layer, const at::Tensor& q,
                                         const at::Tensor& k,
                                         const at::Tensor& v) {
  CHECK_EQ(q.size(0), cu_seqlens_.back())
      << "token count does not match cu_seqlens";
  const int64_t window = layer < static_cast<int64_t>(layer_windows_.size())
                             ? layer_windows_[layer]
                             : 0;
  const size_t num_seqs = cu_seqlens_.size() - 1;
  if (num_seqs == 1) return CausalAttention(q, k, v, window);
  std::vector<at::Tensor> outs;
  outs.reserve(num_seqs);
  for (size_t s = 0; s < num_seqs; ++s) {
    const int64_t start = cu_seqlens_[s];
    const int64_t len = cu_seqlens_[s + 1] - start;
    if (len == 0) continue;
    outs.push_back(CausalAttention(q.narrow(0, start, len),
                                   k.narrow(0, start, len),
                                   v.narrow(0, start, len), window));
  }
  if (outs.empty()) return at::empty_like(q);
  return at::cat(outs, 0);
}

}  // namespace verl::models
