// File: verl/parallel/threads.h
//
// LibTorch's intra-op thread count. Debian's LibTorch starts with 1 thread
// even on multi-core machines, so every process sets it explicitly at init:
// the configured value if > 0, else OMP_NUM_THREADS, else the hardware
// threads divided among the local workers (at least 1).
#ifndef VERL_PARALLEL_THREADS_H_
#define VERL_PARALLEL_THREADS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace verl::parallel {

// Pure resolution rule (see file comment). `omp_num_threads` is the raw
// variable; a malformed or non-positive value is InvalidArgument.
absl::StatusOr<int> ResolveIntraOpThreads(
    int configured, const std::optional<std::string>& omp_num_threads,
    int hardware_threads, int local_world_size);

// Resolves against this process (OMP_NUM_THREADS, hardware concurrency),
// applies it with at::set_num_threads and returns the count now in effect.
absl::StatusOr<int> SetIntraOpThreads(int configured, int local_world_size);

}  // namespace verl::parallel

#endif  // VERL_PARALLEL_THREADS_H_
