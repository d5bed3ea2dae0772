// File: verl/profiler/gemm_peak.h
//
// What a benchmark prints beside its figures so they can be compared across
// machines and loads: the fp32 GEMM rate measured in this process (the
// machine's practical peak, the denominator of MFU) and the BLAS library
// LibTorch's fp32 matmuls go through (docs: TOOLCHAIN.md's "BLAS trap").
#ifndef VERL_PROFILER_GEMM_PEAK_H_
#define VERL_PROFILER_GEMM_PEAK_H_

#include <cstdint>
#include <string>

namespace verl::profiler {

// FLOP/s (2·m·k·n per product) of an fp32 [m, k] x [k, n] matmul on this
// process's intra-op threads: one warm-up, then the best of `repeats` timed
// products into a preallocated output.
double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, int repeats = 3);

// The same for a square n x n x n product.
inline double MeasureGemmFlops(int64_t n = 1024) {
  return MeasureGemmFlops(n, n, n);
}

// The file the system's libblas.so.3 alternative points to (Debian's
// update-alternatives), or "unknown".
std::string BlasLibrary();

// The BLAS this process has mapped (libblas, libblis, libopenblas or libmkl
// in /proc/self/maps): its path, or "unknown" before LibTorch loads one.
std::string LoadedBlasLibrary();

}  // namespace verl::profiler

#endif  // VERL_PROFILER_GEMM_PEAK_H_
