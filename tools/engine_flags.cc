// File: tools/engine_flags.cc
#include "tools/engine_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"

ABSL_FLAG(int64_t, block_size, 16, "KV block size (tokens)");
ABSL_FLAG(double, gpu_memory_utilization, 0.5,
          "fraction of free memory for the KV cache when --kv_cache_mb is 0");
ABSL_FLAG(int64_t, kv_cache_mb, 0, "KV cache budget (MiB; 0: by utilization)");
ABSL_FLAG(int64_t, max_num_seqs, 256, "max running sequences");
ABSL_FLAG(int64_t, max_num_batched_tokens, 8192, "tokens per step");
ABSL_FLAG(bool, enable_chunked_prefill, true, "chunked prefill");
ABSL_FLAG(bool, enable_prefix_caching, true, "automatic prefix caching");
ABSL_FLAG(int64_t, max_model_len, 0, "0: the model's context length");
ABSL_FLAG(std::string, dtype, "", "engine weight dtype (float32 | bfloat16)");
ABSL_FLAG(int, threads, 0,
          "LibTorch and BLIS threads (0: OMP_NUM_THREADS/default)");

namespace verl::tools {

infer::EngineOptions EngineOptionsFromFlags() {
  infer::EngineOptions opt;
  opt.block_size = absl::GetFlag(FLAGS_block_size);
  opt.gpu_memory_utilization = absl::GetFlag(FLAGS_gpu_memory_utilization);
  opt.kv_cache_bytes = absl::GetFlag(FLAGS_kv_cache_mb) << 20;
  opt.max_num_seqs = absl::GetFlag(FLAGS_max_num_seqs);
  opt.max_num_batched_tokens = absl::GetFlag(FLAGS_max_num_batched_tokens);
  opt.enable_chunked_prefill = absl::GetFlag(FLAGS_enable_chunked_prefill);
  opt.enable_prefix_caching = absl::GetFlag(FLAGS_enable_prefix_caching);
  opt.max_model_len = absl::GetFlag(FLAGS_max_model_len);
  opt.dtype = absl::GetFlag(FLAGS_dtype);
  opt.num_threads = absl::GetFlag(FLAGS_threads);
  return opt;
}

}  // namespace verl::tools
