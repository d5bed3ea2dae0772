// File: verl/parallel/megatron/pipeline_schedule.cc
#include "verl/parallel/megatron/pipeline_schedule.h"

#include <ATen/ATen.h>
#include <glog/logging.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "verl/parallel/comm_autograd.h"

namespace verl::parallel::megatron {
namespace {

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
  void Record(char kind, int64_t mb, double t0) {
    if (options_.events) options_.events->push_back({kind, mb, t0, Now()});
  }
  void Send(int64_t mb, const at::Tensor& t, int peer) {
    const double t0 = Now();
    DieOnCommError(
        pp_.Send(t.detach().contiguous(), peer), pp_,
        absl::StrCat("pipeline send of micro-batch ", mb, " to stage ", peer));
    Record('S', mb, t0);
  }
  at::Tensor Recv(int64_t mb, int peer) {
    const double t0 = Now();
    at::Tensor t = at::empty(fns_.input_shape(mb),
                             at::TensorOptions().dtype(options_.dtype));
    DieOnCommError(pp_.Recv(t, peer), pp_,
                   absl::StrCat("pipeline recv of micro-batch ", mb,
                                " from stage ", peer));
    Record('R', mb, t0);
    return t;
  }

  const PipelineStageFns& fns_;
  Communicator& pp_;
  const PipelineOptions& options_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

std::vector<at::Tensor> PipelineForwardBackward(
    const PipelineStageFns& fns, int64_t num_microbatches, Communicator& pp,
    const PipelineOptions& options) {
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
