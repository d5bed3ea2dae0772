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
//
// Interleaved 1F1B (forward_backward_pipelining_with_interleaving, set
// fns.num_chunks = virtual_pipeline_model_parallel_size v > 1 and
// fns.chunk_forward): stage s holds v model chunks, chunk c running virtual
// stage c*p + s, so a micro-batch goes round the ring of stages v times
// (the last stage's chunk c sends to the first stage's chunk c+1). The
// order is Megatron's: forwards and backwards walk the chunks in groups of
// p micro-batches (forward k runs chunk (k mod pv) / p, backwards the
// reverse), stage s warms up with 2(p-1-s) + (v-1)p forwards (all of them
// when m == p), then alternates; m must be a multiple of p. Each step's
// p2p (send/receive forward, send/receive backward) is posted at once, the
// sends and receives on their own threads, and joined before the next
// step: batch_isend_irecv, so a ring of blocking Gloo send/recv cannot
// deadlock. Megatron's bubble shrinks from (p-1)/m of the ideal time to
// (p-1)/(vm), at v times the p2p messages.
#ifndef VERL_PARALLEL_MEGATRON_PIPELINE_SCHEDULE_H_
#define VERL_PARALLEL_MEGATRON_PIPELINE_SCHEDULE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
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
  // Interleaved schedule: this stage's model chunks (v) and chunk c's
  // forward of micro-batch m (used instead of `forward` when v > 1; the
  // model's first stage is chunk 0 of stage 0, its last chunk v-1 of the
  // last stage, where `loss` applies).
  int64_t num_chunks = 1;
  std::function<at::Tensor(int64_t mb, int64_t chunk, const at::Tensor& input)>
      chunk_forward;
};

// One timed operation of a schedule on this rank, for timelines and the
// bubble benchmark: kind 'F' (forward), 'B' (backward), 'S' / 'R' (send /
// receive, including the wait for the peer); seconds since the schedule
// started.
struct PipelineEvent {
  char kind;
  int64_t mb;
  double start, end;
  int64_t chunk = 0;  // model chunk (interleaved schedule)
};

struct PipelineOptions {
  at::ScalarType dtype = at::kFloat;  // of the activations on the wire
  std::vector<PipelineEvent>* events = nullptr;
};

// OK unless the interleaved schedule (num_chunks > 1 over pp > 1 stages)
// cannot run `num_microbatches`: Megatron's requirement that they be a
// multiple of pipeline_model_parallel_size. One line naming both.
absl::Status CheckPipelineMicrobatches(int64_t num_microbatches, int pp,
                                       int64_t num_chunks);

// Forward and backward of `num_microbatches` micro-batches, 1F1B
// (interleaved when fns.num_chunks > 1; CHECKs CheckPipelineMicrobatches).
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
