// File: verl/infer/kernels_baseline.cc
//
// kernels_impl.inc compiled for the baseline ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS kernels_baseline
#include "verl/infer/kernels_impl.inc"
