// File: verl/models/attention.cc
#include "verl/models/attention.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <utility>

#include "verl/models/fused_ops.h"

namespace verl::models {

VarlenCausalAttention::VarlenCausalAttention(std::vector<int64_t> cu_seqlens,
                                             std::vector<int64_t> layer_windows,
                                             bool fused)
    : cu_seqlens_(std::move(cu_seqlens)),
      layer_windows_(std::move(layer_windows)),
      fused_(fused) {
  CHECK(!cu_seqlens_.empty() && cu_seqlens_.front() == 0)
      << "cu_seqlens must start at 0";
  for (size_t i = 1; i < cu_seqlens_.size(); ++i) {
    CHECK_GE(cu_seqlens_[i], cu_seqlens_[i - 1]) << "cu_seqlens not sorted";
  }
  // Group non-empty sequences by length (longest first) so that a group's
  // padded score tensor stays bounded: n * Lmax^2 <= kMaxGroupCells.
  constexpr int64_t kMaxGroupCells = int64_t{1} << 22;
  std::vector<std::pair<int64_t, int64_t>> by_len;  // (len, seq)
  for (size_t s = 0; s + 1 < cu_seqlens_.size(); ++s) {
    const int64_t len = cu_seqlens_[s + 1] - cu_seqlens_[s];
    if (len > 0) by_len.push_back({len, static_cast<int64_t>(s)});
  }
  std::sort(by_len.begin(), by_len.end(), std::greater<>());
  size_t i = 0;
  while (i < by_len.size()) {
    const int64_t max_len = by_len[i].first;
    size_t j = i + 1;
    while (j < by_len.size() &&
           static_cast<int64_t>(j - i + 1) * max_len * max_len <=
               kMaxGroupCells)
      ++j;
    Group g;
    g.n = static_cast<int64_t>(j - i);
    g.max_len = max_len;
    std::vector<int64_t> gather(g.n * max_len, 0), scatter, tokens;
    at::Tensor key_pad = at::ones({g.n, 1, 1, 1, max_len}, at::kBool);
    for (int64_t r = 0; r < g.n; ++r) {
      const int64_t seq = by_len[i + r].second, len = by_len[i + r].first;
      const int64_t start = cu_seqlens_[seq];
      for (int64_t t = 0; t < max_len; ++t)
        gather[r * max_len + t] = start + std::min(t, len - 1);
      for (int64_t t = 0; t < len; ++t) {
        scatter.push_back(r * max_len + t);
        tokens.push_back(start + t);
      }
      key_pad[r].narrow(-1, 0, len).fill_(false);
    }
    g.gather = at::tensor(gather, at::kLong);
    g.scatter = at::tensor(scatter, at::kLong);
    g.tokens = at::tensor(tokens, at::kLong);
    g.key_pad = key_pad;
    groups_.push_back(std::move(g));
    i = j;
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
  at::Tensor out = at::matmul(probs, vh);  // [n_kv, group, Lq, dv]
  return out.permute({2, 0, 1, 3}).reshape({lq, n_heads, v.size(2)});
}

at::Tensor VarlenCausalAttention::Attend(int64_t layer, const at::Tensor& q,
                                         const at::Tensor& k,
                                         const at::Tensor& v) {
  CHECK_EQ(q.size(0), cu_seqlens_.back())
      << "token count does not match cu_seqlens";
  const int64_t window = layer < static_cast<int64_t>(layer_windows_.size())
                             ? layer_windows_[layer]
                             : 0;
  if (fused_ && q.dim() == 3 && v.dim() == 3 && v.size(2) == q.size(2) &&
      FusedOpsApply({q, k, v})) {
    return FusedVarlenAttention(q, k, v, cu_seqlens_, window);
  }
  if (cu_seqlens_.size() == 2) return CausalAttention(q, k, v, window);
  if (q.device().is_cpu() &&
      (q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf)) {
    return Attend(layer, q.to(at::kFloat), k.to(at::kFloat), v.to(at::kFloat))
        .to(q.scalar_type());
  }
  const int64_t n_heads = q.size(1), n_kv = k.size(1), d = q.size(2);
  CHECK_EQ(n_heads % n_kv, 0) << "n_heads must be a multiple of n_kv_heads";
  const int64_t group = n_heads / n_kv;
  const int64_t dv = v.size(2);
  at::Tensor out = q.new_zeros({q.size(0), n_heads, dv});
  for (const Group& g : groups_) {
    const at::Device dev = q.device();
    auto pad = [&](const at::Tensor& x) {
      return x.index_select(0, g.gather.to(dev))
          .view({g.n, g.max_len, x.size(1), x.size(2)});
    };
    // [n, n_kv, group, L, d] x [n, n_kv, 1, d, L]
    at::Tensor qh =
        pad(q).view({g.n, g.max_len, n_kv, group, d}).permute({0, 2, 3, 1, 4});
    at::Tensor kh = pad(k).permute({0, 2, 3, 1}).unsqueeze(2);
    at::Tensor vh = pad(v).permute({0, 2, 1, 3}).unsqueeze(2);
    at::Tensor scores = at::matmul(qh, kh) * (1.0 / std::sqrt(double(d)));
    at::TensorOptions opts = at::TensorOptions().device(dev).dtype(at::kLong);
    at::Tensor qi = at::arange(g.max_len, opts).unsqueeze(1);
    at::Tensor kj = at::arange(g.max_len, opts).unsqueeze(0);
    at::Tensor masked = kj > qi;
    if (window > 0) masked = masked | (kj <= qi - window);
    at::Tensor key_pad = g.key_pad.to(dev);
    masked = masked.view({1, 1, 1, g.max_len, g.max_len}) | key_pad;
    if (window > 0 && g.n > 1) {
      // A padding query row past its sequence's end by >= window sees no
      // key: give it its own (padding) key so that its softmax, and the
      // gradients through it, stay finite (the row itself is discarded).
      masked = masked & ~((qi == kj).view({1, 1, 1, g.max_len, g.max_len}) &
                          key_pad.transpose(-1, -2));
    }
    scores =
        scores.masked_fill(masked, -std::numeric_limits<double>::infinity());
    at::Tensor probs =
        at::softmax(scores, -1,
                    q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat)
            .to(q.scalar_type());
    at::Tensor o = at::matmul(probs, vh)  // [n, n_kv, group, L, d]
                       .permute({0, 3, 1, 2, 4})
                       .reshape({g.n * g.max_len, n_heads, dv});
    out = out.index_copy(0, g.tokens.to(dev),
                         o.index_select(0, g.scatter.to(dev)));
  }
  return out;
}

}  // namespace verl::models
