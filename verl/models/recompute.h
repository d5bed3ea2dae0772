// File: verl/models/recompute.h
//
// Activation recomputation (gradient checkpointing) as an autograd node:
// Checkpoint(fn, inputs, params) runs `fn` without keeping its activations;
// in backward it re-runs `fn` with grad enabled from the saved inputs and
// differentiates it w.r.t. the inputs and `params`. Used per decoder layer
// (HF gradient checkpointing, Megatron's full recompute) and around single
// modules (Megatron's selective recompute of core attention / MLP).
//
// `fn` must be deterministic and must issue the same collectives when
// recomputed (every tp rank recomputes in the same backward order). It must
// own what it needs (capture by value), since backward runs after the
// caller's frame has returned.
#ifndef VERL_MODELS_RECOMPUTE_H_
#define VERL_MODELS_RECOMPUTE_H_

#include <ATen/core/Tensor.h>

#include <functional>
#include <vector>

namespace verl::models {

using TensorList = std::vector<at::Tensor>;
using RecomputeFn = std::function<TensorList(const TensorList& inputs)>;

// Outputs of fn(inputs); when some input or param requires grad (and grad
// mode is on) they share one backward node whose next edges are the inputs
// and the params that require grad. Undefined outputs stay undefined.
TensorList Checkpoint(const RecomputeFn& fn, const TensorList& inputs,
                      const TensorList& params);

}  // namespace verl::models

#endif  // VERL_MODELS_RECOMPUTE_H_
