// File: tools/engine_flags.h
//
// The rollout engine's command-line flags, shared by //tools:generate and
// //tools:serve so both binaries take the same names, defaults and help
// (vLLM's engine arguments: --block_size, --gpu_memory_utilization,
// --kv_cache_mb, --max_num_seqs, --max_num_batched_tokens,
// --enable_chunked_prefill, --enable_prefix_caching, --max_model_len,
// --dtype, --threads). Sampling and model-selection flags stay with each
// binary: their meanings differ (a request seed vs the server's default).
#ifndef VERL_TOOLS_ENGINE_FLAGS_H_
#define VERL_TOOLS_ENGINE_FLAGS_H_

#include "verl/infer/engine.h"

namespace verl::tools {

// EngineOptions from the flags above (the others keep their defaults).
infer::EngineOptions EngineOptionsFromFlags();

}  // namespace verl::tools

#endif  // VERL_TOOLS_ENGINE_FLAGS_H_
