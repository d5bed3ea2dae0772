// File: verl/parallel/megatron/pipeline_schedule.h
//
// Megatron's pipeline schedules (megatron.core.pipeline_parallel.schedules)
// over the pp group's c10d point-to-point send/recv, model-agnostic: the
// caller gives one stage's forward of a micro-batch and, on the last stage,
// its loss.
//
//   PipelineStageFns fns;
//   fns.input_shape = [&](int64_t m) { return model.StageHiddenShape(cu[m]); };
//   fns.forward = [&](int64_t m, const at::Tensor& in) {
//     return model.StageForward(ids[m], pos[m], cu[m], in);
//   };
//   fns.loss = [&](int64_t m, const at::Tensor& out) { return Loss(m, out); };
//   PipelineForwardBackward(fns, num_microbatches, *mpu->group(kPp));
//
// 1F1B (forward_backward_pipelining_without_interleaving): stage s runs
// min(p-1-s, m) warm-up forwards, then alternates one forward and one
// backward, then the remaining backwards; activations go to s+1 and their
// gradients come back, so at most p-s micro-batches' activations are alive
// on stage s. Gloo's send/recv block until matched, so in an exchange with
// one neighbour (send forward + receive backward, or the reverse) the even
// stage sends first and the odd stage receives first; with that order the
// schedule completes for every p and m (checked for p <= 6, m <= 11 by
// simulating rendezvous semantics). With pp = 1 both schedules are a plain
// loop over the micro-batches.
#ifndef VERL_PARALLEL_MEGATRON_PIPELINE_SCHEDULE_H_
#define VERL_PARALLEL_MEGATRON_PIPELINE_SCHEDULE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "verl/parallel/process_group.h"

namespace verl::parallel::megatron {

struct PipelineStageFns {
  // The shape of the activations stage s > 0 receives for micro-batch m
  // (the same shape its gradient goes back in).
  std::function<std::vector<int64_t>(int64_t mb)> input_shape;
  // Micro-batch m on this stage. `input`: the previous stage's activations
  // (a leaf that requires grad, except forward-only; undefined on the first
  // stage). Returns the activations for the next stage, or on the last
  // stage what `loss` (or the forward-only caller) takes.
  std::function<at::Tensor(int64_t mb, const at::Tensor& input)> forward;
  // Last stage, forward-backward only: micro-batch m's loss (a scalar that
  // backward starts from; scale it as the caller's normalisation needs).
  std::function<at::Tensor(int64_t mb, const at::Tensor& output)> loss;
};

// One timed operation of a schedule on this rank, for timelines and the
// bubble benchmark: kind 'F' (forward), 'B' (backward), 'S' / 'R' (send /
// receive, including the wait for the peer); seconds since the schedule
// started.
struct PipelineEvent {
  char kind;
  int64_t mb;
  double start, end;
};

struct PipelineOptions {
  at::ScalarType dtype = at::kFloat;  // of the activations on the wire
  std::vector<PipelineEvent>* events = nullptr;
};

// Forward and backward of `num_microbatches` micro-batches, 1F1B.
// Collective over `pp` (every stage calls it with the same count).
// Gradients accumulate in the parameters; returns the last stage's losses
// (detached, one per micro-batch; empty elsewhere).
std::vector<at::Tensor> PipelineForwardBackward(
    const PipelineStageFns& fns, int64_t num_microbatches, Communicator& pp,
    const PipelineOptions& options = {});

// Forward only (log-probs, values): micro-batches flow through the stages
// without autograd state kept for backward (call under NoGradGuard).
// Returns the last stage's outputs (one per micro-batch; empty elsewhere).
std::vector<at::Tensor> PipelineForwardOnly(
    const PipelineStageFns& fns, int64_t num_microbatches, Communicator& pp,
    const PipelineOptions& options = {});

// Copies the last stage's `tensor` (shape and dtype known everywhere) to
// every stage of `pp` (broadcast from the last stage).
void BroadcastFromLastStage(at::Tensor& tensor, Communicator& pp);

}  // namespace verl::parallel::megatron

#endif  // VERL_PARALLEL_MEGATRON_PIPELINE_SCHEDULE_H_
