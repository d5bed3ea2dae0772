// File: verl/infer/rollout_options.cc
#include "verl/infer/rollout_options.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "verl/core/status.h"

namespace verl::infer {
namespace {

absl::Status Bad(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("actor_rollout_ref.rollout.", key, ": ", why));
}

}  // namespace

absl::StatusOr<EngineOptions> EngineOptionsFromRolloutConfig(
    const RolloutConfig& c) {
  if (c.name() != "native" && c.name() != "vllm" && c.name() != "sglang") {
    return Bad("name", absl::StrCat("unknown engine '", c.name(),
                                    "' (native, vllm or sglang all run the "
                                    "built-in engine)"));
  }
  if (c.scheduling_policy() != "fcfs") {
    return Bad("scheduling_policy",
               absl::StrCat("'", c.scheduling_policy(),
                            "' is not supported (only fcfs)"));
  }
  EngineOptions o;
  o.gpu_memory_utilization = c.gpu_memory_utilization();
  if (!(o.gpu_memory_utilization > 0 && o.gpu_memory_utilization <= 1)) {
    return Bad(
        "gpu_memory_utilization",
        absl::StrCat("must be in (0, 1], got ", o.gpu_memory_utilization));
  }
  o.max_num_seqs = c.max_num_seqs();
  if (o.max_num_seqs <= 0) return Bad("max_num_seqs", "must be > 0");
  o.max_num_batched_tokens = c.max_num_batched_tokens();
  if (o.max_num_batched_tokens <= 0) {
    return Bad("max_num_batched_tokens", "must be > 0");
  }
  o.enable_chunked_prefill = c.enable_chunked_prefill();
  o.enable_prefix_caching = c.enable_prefix_caching();
  if (c.has_max_model_len()) {
    if (c.max_model_len() <= 0) return Bad("max_model_len", "must be > 0");
    o.max_model_len = c.max_model_len();
  }
  if (!ParseEngineDtype(c.dtype()).ok()) {
    return Bad("dtype",
               absl::StrCat("'", c.dtype(),
                            "' is not supported (float32 or "
                            "bfloat16; float32 is the fast CPU path)"));
  }
  o.dtype = c.dtype();
  const auto& vllm = c.engine_kwargs().vllm();
  if (auto it = vllm.find("block_size"); it != vllm.end()) {
    if (!absl::SimpleAtoi(it->second, &o.block_size) || o.block_size <= 0) {
      return Bad("engine_kwargs.vllm.block_size",
                 absl::StrCat("'", it->second, "' is not a positive integer"));
    }
  }
  if (auto it = vllm.find("seed"); it != vllm.end()) {
    if (!absl::SimpleAtoi(it->second, &o.seed)) {
      return Bad("engine_kwargs.vllm.seed",
                 absl::StrCat("'", it->second, "' is not an integer"));
    }
  }
  return o;
}

absl::StatusOr<SamplingParams> SamplingParamsFromRolloutConfig(
    const RolloutConfig& c, bool validation) {
  SamplingParams p;
  if (validation) {
    const SamplingConfig& v = c.val_kwargs();
    p.n = v.n();
    p.temperature = v.temperature();
    p.top_k = v.top_k();
    p.top_p = v.top_p();
    p.do_sample = v.do_sample();
  } else {
    p.n = c.n();
    p.temperature = c.temperature();
    p.top_k = c.top_k();
    p.top_p = c.top_p();
    p.do_sample = c.do_sample();
  }
  p.ignore_eos = c.ignore_eos();
  p.repetition_penalty = c.repetition_penalty();
  if (c.has_response_length()) p.max_tokens = c.response_length();
  absl::Status st = ValidateSamplingParams(p);
  if (!st.ok()) {
    return Annotate(st, validation ? "actor_rollout_ref.rollout.val_kwargs"
                                   : "actor_rollout_ref.rollout");
  }
  return p;
}

}  // namespace verl::infer
