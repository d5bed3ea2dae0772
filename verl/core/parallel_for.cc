// File: verl/core/parallel_for.cc
//
// Compiled with -fopenmp (BUILD.bazel): ATen's parallel_for below takes its
// OpenMP branch here.
#include "verl/core/parallel_for.h"

#include <ATen/Parallel.h>

#ifndef _OPENMP
#error "parallel_for.cc must be compiled with -fopenmp"
#endif

namespace verl::core {

void ParallelFor(int64_t begin, int64_t end, int64_t grain,
                 absl::FunctionRef<void(int64_t, int64_t)> f) {
  at::parallel_for(begin, end, grain, [&](int64_t b, int64_t e) { f(b, e); });
}

}  // namespace verl::core
