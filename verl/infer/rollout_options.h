// File: verl/infer/rollout_options.h
//
// Maps verl's `actor_rollout_ref.rollout` config (RolloutConfig proto) onto
// the engine's EngineOptions and the per-request SamplingParams used for
// training rollouts and for validation (`val_kwargs`).
#ifndef VERL_INFER_ROLLOUT_OPTIONS_H_
#define VERL_INFER_ROLLOUT_OPTIONS_H_

#include "absl/status/statusor.h"
#include "verl/infer/engine.h"
#include "verl/infer/rollout_config.pb.h"
#include "verl/infer/sampling_params.h"

namespace verl::infer {

// Engine keys: dtype (float32 | bfloat16), gpu_memory_utilization,
// max_num_seqs, max_num_batched_tokens, enable_chunked_prefill,
// enable_prefix_caching, max_model_len and engine_kwargs.vllm.{block_size,
// seed}. Errors name the key (unknown engine name, scheduling_policy other than
// fcfs, bad numbers). Parallelism keys (tensor_model_parallel_size, ...) do not
// apply to this single-process engine and are ignored.
absl::StatusOr<EngineOptions> EngineOptionsFromRolloutConfig(
    const RolloutConfig& config);

// Training sampling (`validation` false): n, temperature, top_k, top_p,
// do_sample, ignore_eos, repetition_penalty; validation: the same from
// `val_kwargs`. max_tokens is response_length when set. The result is
// validated.
absl::StatusOr<SamplingParams> SamplingParamsFromRolloutConfig(
    const RolloutConfig& config, bool validation);

}  // namespace verl::infer

#endif  // VERL_INFER_ROLLOUT_OPTIONS_H_
