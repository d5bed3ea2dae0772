// File: verl/core/cpu_isa.h
//
// Which x86 vector extension the project's own kernels (the rollout
// engine's, verl/infer/kernels.h; the training ops', verl/models/fused_ops.h)
// use, chosen once at start-up: the widest the CPU supports (AVX-512, AVX2+FMA,
// else the x86-64 baseline SSE2). The environment variable VERL_CPU_ISA
// (`baseline`, `avx2`, `avx512`) can lower the choice (never raise it past
// what the CPU has), e.g. to compare variants in a benchmark.
#ifndef VERL_CORE_CPU_ISA_H_
#define VERL_CORE_CPU_ISA_H_

namespace verl::core {

enum class CpuIsa { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// The widest ISA this CPU (and OS) supports.
CpuIsa DetectCpuIsa();
// Whether kernels compiled for `isa` can run here.
bool CpuSupports(CpuIsa isa);
// The ISA the kernels use: DetectCpuIsa(), lowered by VERL_CPU_ISA if set
// (an unknown value is ignored with a warning). Computed once.
CpuIsa ActiveCpuIsa();
const char* CpuIsaName(CpuIsa isa);

}  // namespace verl::core

#endif  // VERL_CORE_CPU_ISA_H_
