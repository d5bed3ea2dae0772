// File: verl/core/parallel_for.h
//
// at::parallel_for that really runs on LibTorch's intra-op threads.
//
// ATen's parallel_for is a header template whose parallel branch is
// compiled only where _OPENMP is defined (ATen/ParallelOpenMP.h, for
// LibTorch builds with AT_PARALLEL_OPENMP such as Debian's): in a
// translation unit compiled without -fopenmp, as Bazel compiles by default,
// it silently calls f(begin, end) on the calling thread. ParallelFor is
// compiled with -fopenmp once, here, so every caller gets the parallel
// version without compiling itself (or a consumer's workspace) with OpenMP.
// Same contract as at::parallel_for: [begin, end) is split into at most
// at::get_num_threads() contiguous chunks of at least `grain` iterations
// (one chunk, on the caller, when the range is small or already inside a
// parallel region); f(chunk_begin, chunk_end) runs once per chunk.
#ifndef VERL_CORE_PARALLEL_FOR_H_
#define VERL_CORE_PARALLEL_FOR_H_

#include <cstdint>

#include "absl/functional/function_ref.h"

namespace verl::core {

void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 absl::FunctionRef<void(int64_t, int64_t)> f);

}  // namespace verl::core

#endif  // VERL_CORE_PARALLEL_FOR_H_
