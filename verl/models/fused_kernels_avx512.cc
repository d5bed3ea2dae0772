// File: verl/models/fused_kernels_avx512.cc
//
// fused_kernels_impl.inc compiled for the avx512 ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS fused_kernels_avx512
#include "verl/models/fused_kernels_impl.inc"
