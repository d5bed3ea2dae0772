// File: verl/infer/kernels_avx2.cc
//
// kernels_impl.inc compiled for the avx2 ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS kernels_avx2
#include "verl/infer/kernels_impl.inc"
