// File: verl/infer/kernels_avx512.cc
//
// kernels_impl.inc compiled for the avx512 ISA (flags in BUILD.bazel).
#define VERL_KERNEL_NS kernels_avx512
#include "verl/infer/kernels_impl.inc"
