// File: verl/core/blis_arch.h
//
// Debian's BLIS (0.9, the BLAS LibTorch's fp32 matmuls go through: see
// TOOLCHAIN.md's "BLAS trap") picks its GEMM kernels from the CPU's vendor
// and family at its first call. It does not know AMD families after Zen 3/4
// (0x19): on Zen 5 (0x1A) it falls back to its 'generic' reference kernels,
// ~4x slower than the AVX-512 'skx' kernels the CPU runs (fp32 2048^3 matmul,
// 2 Zen 5 cores: generic 33 GFLOP/s, zen3 85, skx 127-134).
//
// Linking this library sets BLIS_ARCH_TYPE=skx at load time, before any BLAS
// call, when BLIS_ARCH_TYPE is unset (the user's value always wins), the CPU
// is an AMD family BLIS 0.9 does not know (>= 0x1A) and it has the AVX-512
// subsets the skx kernels use (F, DQ, BW, VL). BLIS 0.9 reads the variable
// with atoi ("skx" -> 0, its skx id); later releases read the name. Another
// BLAS ignores the variable.
#ifndef VERL_CORE_BLIS_ARCH_H_
#define VERL_CORE_BLIS_ARCH_H_

#include <string>

namespace verl::core {

struct CpuIdentity {
  std::string vendor;   // cpuid leaf 0: "AuthenticAMD", "GenuineIntel", ...
  int family = 0;       // base family + extended family (cpuid leaf 1)
  bool avx512 = false;  // AVX-512 F, DQ, BW and VL
};

// This CPU's identity.
CpuIdentity ThisCpu();

// The BLIS_ARCH_TYPE value to set on `cpu`, or "" to leave BLIS's own choice.
std::string BlisArchOverrideFor(const CpuIdentity& cpu);

// What the load-time hook set BLIS_ARCH_TYPE to, or "" if it left it alone.
const std::string& BlisArchSetAtLoad();

}  // namespace verl::core

#endif  // VERL_CORE_BLIS_ARCH_H_
