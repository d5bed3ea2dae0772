// File: verl/parallel/megatron/context_parallel.cc
#include "verl/parallel/megatron/context_parallel.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "verl/parallel/comm_autograd.h"

namespace verl::parallel::megatron {

absl::StatusOr<CpLayout> CpLayout::Create(const std::vector<int64_t>& cu,
                                          int cp, int rank, int64_t multiple) {
  if (cp < 1 || rank < 0 || rank >= cp || multiple < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("context parallel layout: cp=", cp, " rank=", rank,
                     " multiple=", multiple,
                     " (need cp >= 1, 0 <= rank < cp,"
                     " multiple >= 1)"));
  }
  if (cu.empty() || cu.front() != 0) {
    return absl::InvalidArgumentError(
        "context parallel layout: cu_seqlens must start at 0");
  }
  for (size_t s = 1; s < cu.size(); ++s) {
    if (cu[s] < cu[s - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "context parallel layout: cu_seqlens decreases at index ", s));
    }
  }
  CpLayout l;
  l.cp_ = cp;
  l.rank_ = rank;
  l.num_tokens_ = cu.back();
  const int64_t unit = 2 * cp * multiple, chunks = 2 * cp;
  l.padded_cu_ = {0};
  for (size_t s = 0; s + 1 < cu.size(); ++s) {
    const int64_t len = cu[s + 1] - cu[s];
    l.padded_cu_.push_back(l.padded_cu_.back() +
                           (len + unit - 1) / unit * unit);
  }
  l.padded_tokens_ = l.padded_cu_.back();
  const int64_t local = l.padded_tokens_ / cp;
  std::vector<int64_t> unshard(l.num_tokens_, 0);
  for (int r = 0; r < cp; ++r) {
    std::vector<int64_t> seq, off, source, shift;
    seq.reserve(local);
    for (size_t s = 0; s + 1 < cu.size(); ++s) {
      const int64_t len = cu[s + 1] - cu[s];
      const int64_t chunk = (l.padded_cu_[s + 1] - l.padded_cu_[s]) / chunks;
      for (const int64_t c : {int64_t{r}, chunks - 1 - r}) {
        for (int64_t o = c * chunk; o < (c + 1) * chunk; ++o) {
          if (o < len) unshard[cu[s] + o] = r * local + int64_t(seq.size());
          seq.push_back(static_cast<int64_t>(s));
          off.push_back(o);
          source.push_back(cu[s] + std::min(o, len - 1));
          shift.push_back(std::max<int64_t>(0, o - (len - 1)));
        }
      }
    }
    l.seq_ids_.push_back(at::tensor(seq, at::kLong));
    l.offsets_.push_back(at::tensor(off, at::kLong));
    if (r == rank) {
      l.source_ = at::tensor(source, at::kLong);
      l.pad_shift_ = at::tensor(shift, at::kLong);
    }
  }
  l.unshard_ = at::tensor(unshard, at::kLong);
  return l;
}

at::Tensor CpLayout::Shard(const at::Tensor& x) const {
  CHECK_EQ(x.size(0), num_tokens_) << "CpLayout::Shard: token count";
  return x.index_select(0, source_.to(x.device()));
}

at::Tensor CpLayout::ShardPositions(const at::Tensor& position_ids) const {
  const at::Tensor pos = position_ids.reshape({-1});
  return Shard(pos) + pad_shift_.to(pos.device());
}

at::Tensor CpLayout::Gather(const at::Tensor& local, const CommPtr& cp) const {
  CHECK_EQ(local.size(0), local_tokens()) << "CpLayout::Gather: token count";
  CHECK_EQ(cp->size(), cp_) << "CpLayout::Gather: group size";
  at::Tensor all = cp_ == 1 ? local
                            : GatherFromSequenceParallelRegion(
                                  local, cp,
                                  /*tensor_parallel_output_grad=*/false);
  return all.index_select(0, unshard_.to(local.device()));
}

at::Tensor RingShift(const at::Tensor& x, Communicator& cp) {
  const int n = cp.size();
  if (n == 1) return x;
  const int r = cp.rank();
  at::Tensor send = x.contiguous();
  at::Tensor recv = at::empty_like(send);
  auto do_send = [&] {
    DieOnCommError(cp.Send(send, (r + 1) % n), cp, "ring attention send");
  };
  auto do_recv = [&] {
    DieOnCommError(cp.Recv(recv, (r + n - 1) % n), cp, "ring attention recv");
  };
  if (r % 2 == 0) {
    do_send();
    do_recv();
  } else {
    do_recv();
    do_send();
  }
  return recv;
}

namespace {

// [T, H, d] -> [G, H/G, T, d] (G = kv groups): query heads grouped by their
// KV head, so K/V [G, 1, T, d] broadcast over the group.
at::Tensor QHeads(const at::Tensor& x, int64_t groups) {
  const int64_t t = x.size(0), h = x.size(1), d = x.size(2);
  return x.reshape({t, groups, h / groups, d}).permute({1, 2, 0, 3});
}
at::Tensor FromQHeads(const at::Tensor& x) {  // inverse of QHeads
  return x.permute({2, 0, 1, 3})
      .reshape({x.size(2), x.size(0) * x.size(1), x.size(3)});
}
at::Tensor KvHeads(const at::Tensor& x) {  // [T, G, d] -> [G, 1, T, d]
  return x.permute({1, 0, 2}).unsqueeze(1);
}

// Queries are taken in row tiles of at most `max_cells` score cells (heads x
// rows x keys) so a step's transient scores stay bounded while the saved
// state is O(T/cp) — flash attention's tiling, on the CPU.
struct Tile {
  int64_t begin, rows;
};
std::vector<Tile> RowTiles(int64_t rows, int64_t cells_per_row,
                           int64_t max_cells) {
  const int64_t step =
      std::max<int64_t>(1, max_cells / std::max<int64_t>(cells_per_row, 1));
  std::vector<Tile> tiles;
  for (int64_t b = 0; b < rows; b += step) {
    tiles.push_back({b, std::min(step, rows - b)});
  }
  return tiles;
}

// Masked scaled scores of this rank's query rows `tile` against rank `src`'s
// keys: [G, g, tile.rows, Tk].
at::Tensor Scores(const at::Tensor& qh, const at::Tensor& kh,
                  const CpLayout& layout, int src, const Tile& tile,
                  double scale) {
  const int r = layout.rank();
  const at::Tensor q_seq = layout.seq_ids(r).narrow(0, tile.begin, tile.rows);
  const at::Tensor q_off = layout.offsets(r).narrow(0, tile.begin, tile.rows);
  at::Tensor hidden = q_seq.unsqueeze(1).ne(layout.seq_ids(src).unsqueeze(0)) |
                      layout.offsets(src).unsqueeze(0).gt(q_off.unsqueeze(1));
  return at::matmul(qh.narrow(2, tile.begin, tile.rows), kh.transpose(-1, -2))
      .mul_(scale)
      .masked_fill_(hidden.to(qh.device()),
                    -std::numeric_limits<double>::infinity());
}

struct RingState {
  at::Tensor q, k, v;  // compute dtype, detached
  at::Tensor out;      // [T, H, d] compute dtype
  at::Tensor lse;      // [G, g, T, 1]
  int64_t max_tile_cells = 0;
};

// Online-softmax forward over the ring. Every query sees at least itself
// (the diagonal), so the final running sum is positive.
void RingForward(RingState& st, const CpLayout& layout, Communicator& cp) {
  const int n = cp.size(), r = cp.rank();
  const int64_t groups = st.k.size(1), d = st.q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor qh = QHeads(st.q, groups);
  const std::vector<Tile> tiles = RowTiles(
      qh.size(2), qh.size(0) * qh.size(1) * st.k.size(0), st.max_tile_cells);
  at::Tensor kv = at::stack({st.k, st.v});  // [2, T, G, d]
  at::Tensor m =
      at::full({qh.size(0), qh.size(1), qh.size(2), 1},
               -std::numeric_limits<double>::infinity(), qh.options());
  at::Tensor l = at::zeros_like(m);
  at::Tensor acc = at::zeros_like(qh);
  for (int i = 0; i < n; ++i) {
    const int src = (r - i + n) % n;
    const at::Tensor kh = KvHeads(kv[0]), vh = KvHeads(kv[1]);
    for (const Tile& tile : tiles) {
      at::Tensor mt = m.narrow(2, tile.begin, tile.rows);
      at::Tensor lt = l.narrow(2, tile.begin, tile.rows);
      at::Tensor acc_t = acc.narrow(2, tile.begin, tile.rows);
      at::Tensor s = Scores(qh, kh, layout, src, tile, scale);
      at::Tensor new_m = at::maximum(mt, s.amax(-1, /*keepdim=*/true));
      at::Tensor safe_m = new_m.masked_fill(at::isneginf(new_m), 0.0);
      at::Tensor alpha = (mt - safe_m).exp_();
      at::Tensor p = (s - safe_m).exp_();
      lt.mul_(alpha).add_(p.sum(-1, /*keepdim=*/true));
      acc_t.mul_(alpha).add_(at::matmul(p, vh));
      mt.copy_(new_m);
    }
    if (i + 1 < n) kv = RingShift(kv, cp);
  }
  st.out = FromQHeads(acc / l);
  st.lse = m + l.log();
}

// dQ locally; dK/dV accumulators travel with their K/V block and reach the
// block's owner after the last shift.
std::vector<at::Tensor> RingBackward(const RingState& st, const at::Tensor& g,
                                     const CpLayout& layout, Communicator& cp) {
  const int n = cp.size(), r = cp.rank();
  const int64_t groups = st.k.size(1), d = st.q.size(2);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor qh = QHeads(st.q, groups);
  const at::Tensor dout = QHeads(g, groups).contiguous();
  const at::Tensor delta =
      (dout * QHeads(st.out, groups)).sum(-1, /*keepdim=*/true);
  const std::vector<Tile> tiles = RowTiles(
      qh.size(2), qh.size(0) * qh.size(1) * st.k.size(0), st.max_tile_cells);
  at::Tensor dq = at::zeros_like(qh);
  at::Tensor kv = at::stack({st.k, st.v});
  at::Tensor dkv = at::zeros_like(kv);
  for (int i = 0; i < n; ++i) {
    const int src = (r - i + n) % n;
    const at::Tensor kh = KvHeads(kv[0]), vh = KvHeads(kv[1]);
    for (const Tile& tile : tiles) {
      auto rows = [&](const at::Tensor& x) {
        return x.narrow(2, tile.begin, tile.rows);
      };
      const at::Tensor dout_t = rows(dout);
      at::Tensor p =
          (Scores(qh, kh, layout, src, tile, scale) - rows(st.lse)).exp_();
      at::Tensor dv = at::matmul(p.transpose(-1, -2), dout_t).sum(1);
      at::Tensor ds =
          p * (at::matmul(dout_t, vh.transpose(-1, -2)) - rows(delta));
      rows(dq).add_(at::matmul(ds, kh), scale);
      at::Tensor dk = at::matmul(ds.transpose(-1, -2), rows(qh)).sum(1);
      dkv[0].add_(dk.permute({1, 0, 2}), scale);  // dk, dv: [G, Tk, d]
      dkv[1].add_(dv.permute({1, 0, 2}));
    }
    if (i + 1 < n) {
      kv = RingShift(kv, cp);
      dkv = RingShift(dkv, cp);
    }
  }
  if (n > 1) dkv = RingShift(dkv, cp);
  return {FromQHeads(dq), dkv[0], dkv[1]};
}

class RingAttentionBackward : public torch::autograd::Node {
 public:
  RingAttentionBackward(RingState st, std::shared_ptr<const CpLayout> layout,
                        CommPtr cp, at::ScalarType q_type,
                        at::ScalarType k_type, at::ScalarType v_type)
      : st_(std::move(st)),
        layout_(std::move(layout)),
        cp_(std::move(cp)),
        types_{q_type, k_type, v_type} {}
  std::string name() const override { return "RingAttentionBackward"; }
  torch::autograd::variable_list apply(
      torch::autograd::variable_list&& grads) override {
    at::Tensor g = grads[0].defined() ? grads[0].to(st_.out.scalar_type())
                                      : at::zeros_like(st_.out);
    std::vector<at::Tensor> d = RingBackward(st_, g, *layout_, *cp_);
    for (int i = 0; i < 3; ++i) d[i] = d[i].to(types_[i]);
    return d;
  }

 private:
  RingState st_;
  std::shared_ptr<const CpLayout> layout_;
  CommPtr cp_;
  at::ScalarType types_[3];
};

}  // namespace

at::Tensor RingAttention(const at::Tensor& q, const at::Tensor& k,
                         const at::Tensor& v,
                         std::shared_ptr<const CpLayout> layout,
                         const CommPtr& cp, int64_t max_tile_cells) {
  CHECK_EQ(cp->size(), layout->cp()) << "RingAttention: cp group size";
  CHECK_EQ(cp->rank(), layout->rank()) << "RingAttention: cp rank";
  CHECK_EQ(q.size(0), layout->local_tokens()) << "RingAttention: tokens";
  CHECK_EQ(q.size(1) % k.size(1), 0) << "heads must be a multiple of kv heads";
  CHECK(k.sizes() == v.sizes()) << "RingAttention: k and v shapes differ";
  CHECK_EQ(q.size(2), k.size(2)) << "RingAttention: head dims differ";
  const at::ScalarType compute =
      q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  CHECK_GT(max_tile_cells, 0) << "RingAttention: max_tile_cells";
  RingState st;
  st.max_tile_cells = max_tile_cells;
  {
    at::NoGradGuard no_grad;
    st.q = q.detach().to(compute);
    st.k = k.detach().to(compute);
    st.v = v.detach().to(compute);
    RingForward(st, *layout, *cp);
  }
  at::Tensor out = st.out.to(q.scalar_type(), /*non_blocking=*/false,
                             /*copy=*/true);
  const bool grad = q.requires_grad() || k.requires_grad() || v.requires_grad();
  if (!at::GradMode::is_enabled() || !grad) return out;
  const at::ScalarType qt = q.scalar_type(), kt = k.scalar_type(),
                       vt = v.scalar_type();
  auto node = std::shared_ptr<RingAttentionBackward>(
      new RingAttentionBackward(std::move(st), std::move(layout), cp, qt, kt,
                                vt),
      torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(q, k, v));
  torch::autograd::set_history(out, node);
  return out;
}

}  // namespace verl::parallel::megatron
