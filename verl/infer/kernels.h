// File: verl/infer/kernels.h
//
// Run-time dispatch of the engine's fp32 kernels: one binary carries the
// kernels compiled for baseline x86-64, AVX2+FMA and AVX-512, and Kernels()
// returns the widest table the CPU supports (ActiveCpuIsa()).
#ifndef VERL_INFER_KERNELS_H_
#define VERL_INFER_KERNELS_H_

#include <cstdint>

#include "verl/infer/cpu_isa.h"
#include "verl/infer/kernel_table.h"

namespace verl::infer {

// The kernels for ActiveCpuIsa().
const KernelTable& Kernels();
// The kernels compiled for `isa`, or null when this CPU cannot run them.
const KernelTable* KernelsFor(CpuIsa isa);

// Floats of a [k, n] weight packed for the panel GEMM (n rounded up to
// whole panels).
int64_t PanelGemmFloats(int64_t k, int64_t n);

// Packs rows [i0, i1) of `src` ([rows, k] row-major, the nn.Linear [out,
// in] layout) as columns col0 + i of the panel-packed [k, n] matrix at
// `panels` (kernel_table.h). Callers zero the padding columns past n and
// may split the rows across threads.
void PackRowsIntoPanels(const float* src, int64_t k, int64_t col0, int64_t i0,
                        int64_t i1, float* panels);

}  // namespace verl::infer

#endif  // VERL_INFER_KERNELS_H_
