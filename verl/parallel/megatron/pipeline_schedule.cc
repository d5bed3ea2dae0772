// File: verl/parallel/megatron/pipeline_schedule.cc
#include "verl/parallel/megatron/pipeline_schedule.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/core/status.h"
#include "verl/parallel/comm_autograd.h"
#include "verl/profiler/timeline.h"

namespace verl::parallel::megatron {
namespace {

// A micro-batch's forward / backward on the process timeline (the
// trainer's Perfetto trace): "pipeline_forward" / "pipeline_backward" with
// the micro-batch, model chunk and stage.
nlohmann::json SpanArgs(int64_t mb, int64_t chunk, int stage) {
  if (!profiler::Timeline::Global().enabled()) return nullptr;
  return {{"mb", mb}, {"chunk", chunk}, {"stage", stage}};
}

// This stage's view of the pipeline: p2p with its neighbours, timed.
class Stage {
 public:
  Stage(const PipelineStageFns& fns, Communicator& pp,
        const PipelineOptions& options)
      : fns_(fns),
        pp_(pp),
        options_(options),
        start_(std::chrono::steady_clock::now()) {}

  bool first() const { return pp_.rank() == 0; }
  bool last() const { return pp_.rank() == pp_.size() - 1; }

  // The previous stage's activations of micro-batch m (undefined on the
  // first stage), a leaf that requires grad when `grad`.
  at::Tensor RecvForward(int64_t mb, bool grad) {
    if (first()) return {};
    at::Tensor t = Recv(mb, pp_.rank() - 1);
    return grad ? t.requires_grad_(true) : t;
  }
  void SendForward(int64_t mb, const at::Tensor& out) {
    if (!last()) Send(mb, out, pp_.rank() + 1);
  }
  at::Tensor RecvBackward(int64_t mb) {
    return last() ? at::Tensor() : Recv(mb, pp_.rank() + 1);
  }
  void SendBackward(int64_t mb, const at::Tensor& grad) {
    if (!first()) Send(mb, grad, pp_.rank() - 1);
  }
  // One exchange with a neighbour: the even stage sends first (blocking
  // Gloo send/recv cannot deadlock; see the header).
  at::Tensor SendRecv(int64_t send_mb, const at::Tensor& send, int64_t recv_mb,
                      int peer) {
    if (pp_.rank() % 2 == 0) {
      Send(send_mb, send, peer);
      return Recv(recv_mb, peer);
    }
    at::Tensor got = Recv(recv_mb, peer);
    Send(send_mb, send, peer);
    return got;
  }
  // send_forward_recv_backward: the output of `mb` to s+1, the output
  // gradient of micro-batch `bwd` back.
  at::Tensor SendForwardRecvBackward(int64_t mb, const at::Tensor& out,
                                     int64_t bwd) {
    if (last()) return {};
    return SendRecv(mb, out, bwd, pp_.rank() + 1);
  }
  // send_backward_recv_forward: the input gradient of `mb` to s-1, the
  // activations of `next` from it.
  at::Tensor SendBackwardRecvForward(int64_t mb, const at::Tensor& grad,
                                     int64_t next) {
    if (first()) return {};
    return SendRecv(mb, grad, next, pp_.rank() - 1).requires_grad_(true);
  }

  at::Tensor Forward(int64_t mb, const at::Tensor& input, bool loss) {
    profiler::TraceScope span("pipeline_forward", "pipeline",
                              SpanArgs(mb, 0, pp_.rank()));
    const double t0 = Now();
    at::Tensor out = fns_.forward(mb, input);
    if (loss && last()) out = fns_.loss(mb, out);
    Record('F', mb, t0);
    return out;
  }
  // Backward of micro-batch m from its output (the loss on the last stage,
  // else with the next stage's gradient); returns the input's gradient.
  at::Tensor Backward(int64_t mb, const at::Tensor& input,
                      const at::Tensor& output, const at::Tensor& grad) {
    profiler::TraceScope span("pipeline_backward", "pipeline",
                              SpanArgs(mb, 0, pp_.rank()));
    const double t0 = Now();
    if (last()) {
      torch::autograd::backward({output});
    } else {
      CHECK(grad.defined());
      torch::autograd::backward({output}, {grad});
    }
    Record('B', mb, t0);
    if (!input.defined()) return {};
    at::Tensor g = input.grad();
    return g.defined() ? g : at::zeros_like(input);
  }

 private:
  double Now() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                         start_)
        .count();
  }
  // Thread-safe (the interleaved schedule's p2p threads record too).
  void Record(char kind, int64_t mb, double t0, int64_t chunk = 0) {
    if (!options_.events) return;
    const double t1 = Now();
    std::lock_guard<std::mutex> lock(events_mu_);
    options_.events->push_back({kind, mb, t0, t1, chunk});
  }
  void Send(int64_t mb, const at::Tensor& t, int peer, int tag = 0) {
    const double t0 = Now();
    DieOnCommError(
        pp_.Send(t.detach().contiguous(), peer, tag), pp_,
        absl::StrCat("pipeline send of micro-batch ", mb, " to stage ", peer));
    Record('S', mb, t0);
  }
  at::Tensor Recv(int64_t mb, int peer, int tag = 0) {
    const double t0 = Now();
    at::Tensor t = at::empty(fns_.input_shape(mb),
                             at::TensorOptions().dtype(options_.dtype));
    DieOnCommError(pp_.Recv(t, peer, tag), pp_,
                   absl::StrCat("pipeline recv of micro-batch ", mb,
                                " from stage ", peer));
    Record('R', mb, t0);
    return t;
  }

  const PipelineStageFns& fns_;
  Communicator& pp_;
  const PipelineOptions& options_;
  std::chrono::steady_clock::time_point start_;
  std::mutex events_mu_;

  friend class InterleavedStage;
};

// Megatron's get_model_chunk_id: forward k runs chunk (k mod pv) / p, in
// Python's modulo (k may be negative); backwards walk the chunks in reverse.
int64_t ChunkOf(int64_t k, int64_t p, int64_t v, bool forward) {
  const int64_t group = p * v;
  const int64_t c = ((k % group) + group) % group / p;
  return forward ? c : v - 1 - c;
}

// The interleaved schedule's state on one stage: per model chunk, the
// inputs received (the last one possibly not yet run), the (input, output)
// pairs alive for backward and the output gradients received, with
// Megatron's bookkeeping (undefined tensors stand for its None).
class InterleavedStage {
 public:
  InterleavedStage(Stage& stage, int64_t v, bool forward_only)
      : stage_(stage),
        p_(stage.pp_.size()),
        r_(stage.pp_.rank()),
        v_(v),
        forward_only_(forward_only),
        chunks_(v) {}

  bool VirtualFirst(int64_t c) const { return r_ == 0 && c == 0; }
  bool VirtualLast(int64_t c) const { return r_ == p_ - 1 && c == v_ - 1; }
  int64_t Chunk(int64_t k, bool forward) const {
    return ChunkOf(k, p_, v_, forward);
  }

  // forward_step_helper: forward k (of every chunk, in schedule order).
  at::Tensor ForwardStep(int64_t k) {
    const int64_t c = Chunk(k, true);
    Chunk_& ch = chunks_[c];
    if (VirtualFirst(c) && ch.inputs.size() == ch.outputs.size()) {
      AddInput(c, at::Tensor());
    }
    at::Tensor in = ch.inputs.back();
    const int64_t mb = ch.forwards++;
    profiler::TraceScope span("pipeline_forward", "pipeline",
                              SpanArgs(mb, c, static_cast<int>(r_)));
    const double t0 = stage_.Now();
    at::Tensor out = stage_.fns_.chunk_forward(mb, c, in);
    if (VirtualLast(c)) {
      if (forward_only_) {
        results.push_back(out);
      } else {
        out = stage_.fns_.loss(mb, out);
        results.push_back(out.detach());
      }
    }
    stage_.Record('F', mb, t0, c);
    ch.outputs.push_back(out);
    if (forward_only_) {
      ch.inputs.pop_back();
      ch.outputs.pop_back();
    }
    return out;
  }

  // backward_step_helper: backward k; returns the input's gradient
  // (undefined on the model's first stage).
  at::Tensor BackwardStep(int64_t k) {
    const int64_t c = Chunk(k, false);
    Chunk_& ch = chunks_[c];
    if (VirtualLast(c) && ch.grads.empty()) AddGrad(c, at::Tensor());
    at::Tensor in = ch.inputs.front(), out = ch.outputs.front(),
               grad = ch.grads.front();
    ch.inputs.pop_front();
    ch.outputs.pop_front();
    ch.grads.pop_front();
    const int64_t mb = ch.backwards++;
    profiler::TraceScope span("pipeline_backward", "pipeline",
                              SpanArgs(mb, c, static_cast<int>(r_)));
    const double t0 = stage_.Now();
    if (VirtualLast(c)) {
      torch::autograd::backward({out});
    } else {
      CHECK(grad.defined()) << "interleaved schedule: no output gradient "
                               "for chunk "
                            << c << " micro-batch " << mb;
      torch::autograd::backward({out}, {grad});
    }
    stage_.Record('B', mb, t0, c);
    if (!in.defined()) return {};
    at::Tensor g = in.grad();
    return g.defined() ? g : at::zeros_like(in);
  }

  // One step's p2p, posted at once (Megatron's batch_isend_irecv): `fwd`
  // (if defined) to the next stage of the ring, `bwd` (if defined) to the
  // previous one; receives the input of chunk `in_chunk` from the previous
  // stage when `recv_prev` and the output gradient of `grad_chunk` from the
  // next one when `recv_next`, appending them to those chunks (undefined
  // when not received, as Megatron appends None).
  struct Received {
    at::Tensor input, grad;
  };
  Received Exchange(const at::Tensor& fwd, int64_t fwd_mb,
                    const at::Tensor& bwd, int64_t bwd_mb, bool recv_prev,
                    int64_t in_chunk, bool recv_next, int64_t grad_chunk) {
    const int next = static_cast<int>((r_ + 1) % p_);
    const int prev = static_cast<int>((r_ + p_ - 1) % p_);
    Received got;
    std::vector<std::function<void()>> ops;
    if (fwd.defined()) {
      ops.push_back([&] { stage_.Send(fwd_mb, fwd, next, kForwardTag); });
    }
    if (bwd.defined()) {
      ops.push_back([&] { stage_.Send(bwd_mb, bwd, prev, kBackwardTag); });
    }
    if (recv_prev) {
      const int64_t mb = chunks_[in_chunk].inputs_seen;
      ops.push_back(
          [&, mb] { got.input = stage_.Recv(mb, prev, kForwardTag); });
    }
    if (recv_next) {
      const int64_t mb = chunks_[grad_chunk].grads_seen;
      ops.push_back(
          [&, mb] { got.grad = stage_.Recv(mb, next, kBackwardTag); });
    }
    const double t0 = stage_.Now();
    std::vector<std::thread> threads;
    for (size_t i = 1; i < ops.size(); ++i) threads.emplace_back(ops[i]);
    if (!ops.empty()) ops[0]();
    for (std::thread& t : threads) t.join();
    if (!ops.empty()) stage_.Record('X', -1, t0);
    if (got.input.defined() && !forward_only_) {
      got.input.requires_grad_(true);
    }
    return got;
  }
  void AddInput(int64_t c, const at::Tensor& t) {
    chunks_[c].inputs.push_back(t);
    ++chunks_[c].inputs_seen;
  }
  void AddGrad(int64_t c, const at::Tensor& t) {
    chunks_[c].grads.push_back(t);
    ++chunks_[c].grads_seen;
  }
  bool Drained() const {
    for (const Chunk_& ch : chunks_) {
      if (!ch.outputs.empty()) return false;
    }
    return true;
  }
  int64_t forwards(int64_t c) const { return chunks_[c].forwards; }
  int64_t backwards(int64_t c) const { return chunks_[c].backwards; }

  // The last stage's losses (forward-backward) or outputs (forward only),
  // in micro-batch order.
  std::vector<at::Tensor> results;

 private:
  static constexpr int kForwardTag = 1, kBackwardTag = 2;
  struct Chunk_ {
    std::deque<at::Tensor> inputs, outputs, grads;
    int64_t inputs_seen = 0, grads_seen = 0, forwards = 0, backwards = 0;
  };
  Stage& stage_;
  const int64_t p_, r_, v_;
  const bool forward_only_;
  std::vector<Chunk_> chunks_;
};

// Megatron's forward_backward_pipelining_with_interleaving (forward_only:
// every forward as warm-up, no backward).
std::vector<at::Tensor> RunInterleaved(const PipelineStageFns& fns, int64_t m,
                                       Communicator& pp,
                                       const PipelineOptions& options,
                                       bool forward_only) {
  const int64_t p = pp.size(), r = pp.rank(), v = fns.num_chunks;
  VERL_CHECK_OK(CheckPipelineMicrobatches(m, static_cast<int>(p), v));
  CHECK(fns.chunk_forward) << "interleaved schedule without chunk_forward";
  Stage base(fns, pp, options);
  InterleavedStage st(base, v, forward_only);
  const int64_t total = m * v;
  bool all_warmup = false;
  int64_t warmup = total;
  if (!forward_only) {
    if (m == p) {
      all_warmup = true;
    } else {
      warmup = std::min(total, (p - r - 1) * 2 + (v - 1) * p);
    }
  }
  const int64_t remaining = total - warmup;
  // The first input (none on the model's first stage).
  st.AddInput(0, st.Exchange({}, 0, {}, 0, r != 0, 0, false, 0).input);
  // Warm-up forwards.
  for (int64_t k = 0; k < warmup; ++k) {
    at::Tensor out = st.ForwardStep(k);
    const int64_t c = st.Chunk(k, true);
    const int64_t next_c = st.Chunk(k + 1, true);
    bool recv_prev = !(r == 0 && next_c == 0) && k != total - 1;
    if (st.VirtualLast(c)) out = at::Tensor();
    const int64_t fwd_mb = st.forwards(c) - 1;
    if (k == warmup - 1 && !forward_only && !all_warmup) {
      const bool recv_next = r != p - 1;
      InterleavedStage::Received got =
          st.Exchange(out, fwd_mb, {}, 0, recv_prev, next_c, recv_next, v - 1);
      st.AddGrad(v - 1, got.grad);
      st.AddInput(next_c, got.input);
    } else {
      InterleavedStage::Received got =
          st.Exchange(out, fwd_mb, {}, 0, recv_prev, next_c, false, 0);
      st.AddInput(next_c, got.input);
    }
  }
  // Steady state: one forward, one backward, one exchange.
  for (int64_t k = 0; k < remaining; ++k) {
    const int64_t fk = k + warmup, bk = k;
    at::Tensor out = st.ForwardStep(fk);
    at::Tensor in_grad = st.BackwardStep(bk);
    const int64_t fc = st.Chunk(fk, true), bc = st.Chunk(bk, false);
    if (st.VirtualLast(fc)) out = at::Tensor();
    if (st.VirtualFirst(bc)) in_grad = at::Tensor();
    bool recv_prev = true, recv_next = true;
    int64_t next_fc, next_bc;
    if (r == 0) {  // the first stage runs p-1 forwards ahead of the last
      next_fc = st.Chunk(fk - (p - 1), true);
      if (next_fc == v - 1) recv_prev = false;
      ++next_fc;
    } else {
      next_fc = st.Chunk(fk + 1, true);
    }
    if (r == p - 1) {  // and the last stage p-1 backwards ahead
      next_bc = st.Chunk(bk - (p - 1), false);
      if (next_bc == 0) recv_next = false;
      --next_bc;
    } else {
      next_bc = st.Chunk(bk + 1, false);
    }
    if (k == remaining - 1) recv_prev = false;
    InterleavedStage::Received got =
        st.Exchange(out, st.forwards(fc) - 1, in_grad, st.backwards(bc) - 1,
                    recv_prev, next_fc, recv_next, next_bc);
    if (recv_prev) st.AddInput(next_fc, got.input);
    if (recv_next) st.AddGrad(next_bc, got.grad);
  }
  if (forward_only) return std::move(st.results);
  // Cool-down backwards.
  if (all_warmup) {
    st.AddGrad(v - 1,
               st.Exchange({}, 0, {}, 0, false, 0, r != p - 1, v - 1).grad);
  }
  for (int64_t k = remaining; k < total; ++k) {
    at::Tensor in_grad = st.BackwardStep(k);
    const int64_t bc = st.Chunk(k, false);
    const int64_t next_bc = st.Chunk(k + 1, false);
    const bool recv_next = !(r == p - 1 && next_bc == v - 1) && k != total - 1;
    if (st.VirtualFirst(bc)) in_grad = at::Tensor();
    InterleavedStage::Received got = st.Exchange(
        {}, 0, in_grad, st.backwards(bc) - 1, false, 0, recv_next, next_bc);
    st.AddGrad(next_bc, got.grad);
  }
  CHECK(st.Drained()) << "interleaved schedule left activations alive";
  return std::move(st.results);
}

// Every chunk of the one stage in turn (pp = 1 with chunks).
at::Tensor ChainChunks(const PipelineStageFns& fns, int64_t mb) {
  at::Tensor h;
  for (int64_t c = 0; c < fns.num_chunks; ++c) h = fns.chunk_forward(mb, c, h);
  return h;
}

}  // namespace

absl::Status CheckPipelineMicrobatches(int64_t num_microbatches, int pp,
                                       int64_t num_chunks) {
  if (num_chunks <= 1 || pp <= 1 || num_microbatches % pp == 0) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "the interleaved pipeline schedule (virtual_pipeline_model_parallel_"
      "size=",
      num_chunks,
      ") needs the number of micro-batches to be a multiple of "
      "pipeline_model_parallel_size=",
      pp, ", got ", num_microbatches,
      " (set the mini-batch and micro-batch sizes accordingly)"));
}

std::vector<at::Tensor> PipelineForwardBackward(
    const PipelineStageFns& fns, int64_t num_microbatches, Communicator& pp,
    const PipelineOptions& options) {
  if (fns.num_chunks > 1 && pp.size() > 1) {
    return RunInterleaved(fns, num_microbatches, pp, options, false);
  }
  if (fns.num_chunks > 1) {  // one stage: the chunks in a row
    PipelineStageFns chained = fns;
    chained.forward = [&fns](int64_t mb, const at::Tensor&) {
      return ChainChunks(fns, mb);
    };
    chained.num_chunks = 1;
    return PipelineForwardBackward(chained, num_microbatches, pp, options);
  }
  Stage stage(fns, pp, options);
  const int64_t m = num_microbatches;
  const int64_t warmup =
      std::min<int64_t>(pp.size() - pp.rank() - 1, num_microbatches);
  std::deque<std::pair<at::Tensor, at::Tensor>> alive;  // (input, output)
  std::vector<at::Tensor> losses;
  auto keep = [&](const at::Tensor& in, const at::Tensor& out) {
    alive.emplace_back(in, out);
    if (stage.last()) losses.push_back(out.detach());
  };
  int64_t next_fwd = 0, next_bwd = 0;
  for (int64_t i = 0; i < warmup; ++i, ++next_fwd) {
    at::Tensor in = stage.RecvForward(next_fwd, true);
    at::Tensor out = stage.Forward(next_fwd, in, true);
    stage.SendForward(next_fwd, out);
    keep(in, out);
  }
  const int64_t steady = m - warmup;
  at::Tensor in;
  if (steady > 0) in = stage.RecvForward(next_fwd, true);
  for (int64_t i = 0; i < steady; ++i, ++next_fwd, ++next_bwd) {
    at::Tensor out = stage.Forward(next_fwd, in, true);
    at::Tensor out_grad =
        stage.SendForwardRecvBackward(next_fwd, out, next_bwd);
    keep(in, out);
    auto [in0, out0] = std::move(alive.front());
    alive.pop_front();
    at::Tensor in_grad = stage.Backward(next_bwd, in0, out0, out_grad);
    if (i == steady - 1) {
      stage.SendBackward(next_bwd, in_grad);
      in = at::Tensor();
    } else {
      in = stage.SendBackwardRecvForward(next_bwd, in_grad, next_fwd + 1);
    }
  }
  for (int64_t i = 0; i < warmup; ++i, ++next_bwd) {
    auto [in0, out0] = std::move(alive.front());
    alive.pop_front();
    at::Tensor out_grad = stage.RecvBackward(next_bwd);
    stage.SendBackward(next_bwd, stage.Backward(next_bwd, in0, out0, out_grad));
  }
  CHECK(alive.empty());
  return losses;
}

std::vector<at::Tensor> PipelineForwardOnly(const PipelineStageFns& fns,
                                            int64_t num_microbatches,
                                            Communicator& pp,
                                            const PipelineOptions& options) {
  if (fns.num_chunks > 1 && pp.size() > 1) {
    return RunInterleaved(fns, num_microbatches, pp, options, true);
  }
  if (fns.num_chunks > 1) {
    PipelineStageFns chained = fns;
    chained.forward = [&fns](int64_t mb, const at::Tensor&) {
      return ChainChunks(fns, mb);
    };
    chained.num_chunks = 1;
    return PipelineForwardOnly(chained, num_microbatches, pp, options);
  }
  Stage stage(fns, pp, options);
  std::vector<at::Tensor> outputs;
  for (int64_t mb = 0; mb < num_microbatches; ++mb) {
    at::Tensor in = stage.RecvForward(mb, false);
    at::Tensor out = stage.Forward(mb, in, false);
    stage.SendForward(mb, out);
    if (stage.last()) outputs.push_back(out);
  }
  return outputs;
}

void BroadcastFromLastStage(at::Tensor& tensor, Communicator& pp) {
  if (pp.size() == 1) return;
  DieOnCommError(pp.Broadcast(tensor, pp.size() - 1), pp,
                 "pipeline broadcast from the last stage");
}

}  // namespace verl::parallel::megatron
