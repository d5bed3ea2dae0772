// File: verl/models/fused_kernels_avx2.cc
//
// fused_kernels_impl.inc compiled for the avx2 ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS fused_kernels_avx2
#include "verl/models/fused_kernels_impl.inc"
