// File: verl/infer/kernels.h
//
// Run-time dispatch of the engine's fp32 kernels: one binary carries the
// kernels compiled for baseline x86-64, AVX2+FMA and AVX-512, and Kernels()
// returns the widest table the CPU supports (ActiveCpuIsa()).
#ifndef VERL_INFER_KERNELS_H_
#define VERL_INFER_KERNELS_H_

#include "verl/infer/cpu_isa.h"
#include "verl/infer/kernel_table.h"

namespace verl::infer {

// The kernels for ActiveCpuIsa().
const KernelTable& Kernels();
// The kernels compiled for `isa`, or null when this CPU cannot run them.
const KernelTable* KernelsFor(CpuIsa isa);

}  // namespace verl::infer

#endif  // VERL_INFER_KERNELS_H_
