// File: verl/infer/paged_attention.cc
#include "verl/infer/paged_attention.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/tensor.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "verl/core/parallel_for.h"
#include "verl/infer/kernels.h"

namespace verl::infer {
namespace {}  // namespace

PagedAttention::PagedAttention(KvCache* cache,
                               std::vector<int64_t> layer_windows)
    : cache_(cache), layer_windows_(std::move(layer_windows)) {
  CHECK(cache_ != nullptr);
}

int64_t PagedAttention::Window(int64_t layer) const {
  return layer < static_cast<int64_t>(layer_windows_.size())
             ? layer_windows_[layer]
             : 0;
}

void PagedAttention::Reserve(int64_t max_seqs, int64_t max_blocks_per_seq) {
  tables_.reserve(max_seqs * max_blocks_per_seq);
  for (auto* v : {&slots_, &decode_, &query_rows_, &query_lens_, &query_tables_,
                  &with_queries_}) {
    v->reserve(max_seqs);
  }
  seqs_.reserve(max_seqs);
}

// Every container here keeps its capacity from step to step: a decode
// step whose batch is no larger than an earlier one's allocates nothing.
void PagedAttention::Prepare(const std::vector<AttentionSequence>& seqs,
                             int64_t num_tokens) {
  const int64_t bs = cache_->spec().block_size;
  seqs_ = seqs;
  num_tokens_ = num_tokens;
  prefill_.clear();
  decode_.clear();
  query_rows_.clear();
  query_lens_.clear();
  query_tables_.clear();
  with_queries_.clear();
  table_width_ = 0;
  slot_mapping_ = at::Tensor();

  slots_.assign(num_tokens, -1);
  auto slot_of = [bs](const AttentionSequence& s, int64_t pos) -> int64_t {
    return static_cast<int64_t>((*s.block_table)[pos / bs]) * bs + pos % bs;
  };
  for (size_t i = 0; i < seqs_.size(); ++i) {
    const AttentionSequence& s = seqs_[i];
    CHECK(s.block_table != nullptr);
    CHECK_GE(s.context_len, s.query_len);
    CHECK_LE(s.query_start + s.query_len, num_tokens);
    CHECK_LE((s.context_len + bs - 1) / bs,
             static_cast<int64_t>(s.block_table->size()))
        << "block table too short";
    const int64_t first = s.context_len - s.query_len;
    for (int64_t t = 0; t < s.query_len; ++t) {
      slots_[s.query_start + t] = slot_of(s, first + t);
    }
    if (s.query_len < 1) continue;
    (s.query_len == 1 ? decode_ : prefill_).push_back(i);
    const int64_t table = static_cast<int64_t>(with_queries_.size());
    with_queries_.push_back(i);
    table_width_ = std::max(table_width_, (s.context_len + bs - 1) / bs);
    // Token t of the chunk sees positions [0, first + t].
    auto add = [&](int64_t t) {
      query_rows_.push_back(s.query_start + t);
      query_lens_.push_back(first + t + 1);
      query_tables_.push_back(table);
    };
    for (int64_t lo = 0, hi = s.query_len - 1; lo <= hi; ++lo, --hi) {
      add(lo);
      if (hi != lo) add(hi);
    }
  }
  for (int64_t x : slots_) CHECK_GE(x, 0) << "packed row not covered";
  tables_.assign(with_queries_.size() * table_width_, 0);
  for (size_t j = 0; j < with_queries_.size(); ++j) {
    const AttentionSequence& s = seqs_[with_queries_[j]];
    const int64_t n = (s.context_len + bs - 1) / bs;
    std::copy(s.block_table->begin(), s.block_table->begin() + n,
              tables_.begin() + j * table_width_);
  }
}

const at::Tensor& PagedAttention::slot_mapping() const {
  if (!slot_mapping_.defined()) slot_mapping_ = at::tensor(slots_, at::kLong);
  return slot_mapping_;
}

bool PagedAttention::Fp32Cache() const {
  return !cache_->spec().latent && cache_->spec().dtype == at::kFloat;
}

at::Tensor PagedAttention::ContextSlots(const AttentionSequence& s) const {
  const int64_t bs = cache_->spec().block_size;
  std::vector<int64_t> ctx(s.context_len);
  for (int64_t p = 0; p < s.context_len; ++p) {
    ctx[p] = static_cast<int64_t>((*s.block_table)[p / bs]) * bs + p % bs;
  }
  return at::tensor(ctx, at::kLong);
}

void PagedAttention::WriteSlots(const float* x, int64_t ld,
                                float* cache) const {
  const KvCacheSpec& spec = cache_->spec();
  const int64_t row = spec.num_kv_heads * spec.head_dim;
  for (size_t t = 0; t < slots_.size(); ++t) {
    std::memcpy(cache + slots_[t] * row, x + t * ld, row * sizeof(float));
  }
}

void PagedAttention::BlockedAttention(int64_t layer, const float* q,
                                      int64_t q_stride, int64_t num_heads,
                                      float* out) const {
  const KvCacheSpec& spec = cache_->spec();
  DecodeAttentionArgs a;
  a.block_size = spec.block_size;
  a.num_kv_heads = spec.num_kv_heads;
  a.head_dim = spec.head_dim;
  a.num_heads = num_heads;
  a.window = Window(layer);
  a.scale = 1.0f / std::sqrt(static_cast<float>(a.head_dim));
  a.q = q;
  a.q_stride = q_stride;
  a.out = out;
  a.k = cache_->key(layer).data_ptr<float>();
  a.v = cache_->value(layer).data_ptr<float>();
  a.rows = query_rows_.data();
  a.lens = query_lens_.data();
  a.tables = tables_.data();
  a.table_width = table_width_;
  a.table_of = query_tables_.data();
  const KernelTable& kernels = Kernels();
  const int64_t jobs =
      static_cast<int64_t>(query_rows_.size()) * a.num_kv_heads;
  core::ParallelFor(0, jobs, 1, [&](int64_t begin, int64_t end) {
    kernels.decode_attention(a, begin, end);
  });
}

bool PagedAttention::AttendRows(int64_t layer, const float* q, const float* k,
                                const float* v, int64_t ld, int64_t num_heads,
                                float* out) {
  if (!Fp32Cache()) return false;
  CHECK(cache_->allocated()) << "attention on a released KV cache";
  const auto t0 = std::chrono::steady_clock::now();
  WriteSlots(k, ld, cache_->key(layer).data_ptr<float>());
  WriteSlots(v, ld, cache_->value(layer).data_ptr<float>());
  // Every packed row belongs to a decode or a prefill sequence (Prepare).
  if (num_tokens_ > 0) BlockedAttention(layer, q, ld, num_heads, out);
  attend_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return true;
}

at::Tensor PagedAttention::Attend(int64_t layer, const at::Tensor& q,
                                  const at::Tensor& k, const at::Tensor& v) {
  CHECK(cache_->allocated()) << "attention on a released KV cache";
  const auto t0 = std::chrono::steady_clock::now();
  CHECK_EQ(q.size(0), num_tokens_) << "Prepare() was given another batch";
  const KvCacheSpec& spec = cache_->spec();
  const at::Tensor kc =
      cache_->key(layer).view({-1, spec.num_kv_heads, spec.head_dim});
  const at::Tensor vc =
      cache_->value(layer).view({-1, spec.num_kv_heads, spec.head_dim});
  // Rows [heads, head_dim] contiguous, any row stride (views into a fused
  // qkv buffer qualify).
  auto rows_dense = [](const at::Tensor& x) {
    return x.dim() == 3 && x.stride(2) == 1 && x.stride(1) == x.size(2);
  };
  const bool fp32 =
      q.scalar_type() == at::kFloat && kc.scalar_type() == at::kFloat &&
      k.scalar_type() == at::kFloat && v.scalar_type() == at::kFloat;
  if (fp32 && rows_dense(k) && rows_dense(v)) {
    WriteSlots(k.data_ptr<float>(), k.stride(0), kc.data_ptr<float>());
    WriteSlots(v.data_ptr<float>(), v.stride(0), vc.data_ptr<float>());
  } else {
    kc.index_copy_(0, slot_mapping(), k.to(kc.scalar_type()).contiguous());
    vc.index_copy_(0, slot_mapping(), v.to(vc.scalar_type()).contiguous());
  }

  const bool blocked = fp32 && !query_rows_.empty();
  const at::Tensor qc = blocked && rows_dense(q) ? q : q.contiguous();
  // Every packed row belongs to a decode or a prefill sequence (Prepare).
  at::Tensor out = at::empty(qc.sizes(), qc.options());
  if (blocked) {
    BlockedAttention(layer, qc.data_ptr<float>(), qc.stride(0), qc.size(1),
                     out.data_ptr<float>());
  } else {
    const int64_t window = Window(layer);
    auto attend_one = [&](const AttentionSequence& s) {
      at::Tensor qs = qc.narrow(0, s.query_start, s.query_len);
      at::Tensor ks, vs;
      if (s.context_len > s.query_len) {
        const at::Tensor slots = ContextSlots(s);
        ks = kc.index_select(0, slots).to(q.scalar_type());
        vs = vc.index_select(0, slots).to(q.scalar_type());
      } else {  // no cached context: the chunk's own k/v
        ks = k.narrow(0, s.query_start, s.query_len);
        vs = v.narrow(0, s.query_start, s.query_len);
      }
      out.narrow(0, s.query_start, s.query_len)
          .copy_(models::CausalAttention(qs, ks, vs, window));
    };
    for (int64_t i : prefill_) attend_one(seqs_[i]);
    for (int64_t i : decode_) attend_one(seqs_[i]);
  }
  attend_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

}  // namespace verl::infer
