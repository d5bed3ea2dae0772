// File: verl/models/fused_kernels_baseline.cc
//
// fused_kernels_impl.inc compiled for the baseline ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS fused_kernels_baseline
#include "verl/models/fused_kernels_impl.inc"
