// File: verl/core/cpu_isa.cc
#include "verl/core/cpu_isa.h"

#include <glog/logging.h>

#include <algorithm>
#include <cstdlib>
#include <string>

namespace verl::core {

CpuIsa DetectCpuIsa() {
  __builtin_cpu_init();
  // The AVX-512 kernels use F, VL, BW and DQ (Skylake-SP and later, Zen 4).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq")) {
    return CpuIsa::kAvx512;
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return CpuIsa::kAvx2;
  }
  return CpuIsa::kBaseline;
}

bool CpuSupports(CpuIsa isa) {
  return static_cast<int>(isa) <= static_cast<int>(DetectCpuIsa());
}

const char* CpuIsaName(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kBaseline:
      return "baseline";
  }
  return "?";
}

CpuIsa ActiveCpuIsa() {
  static const CpuIsa isa = [] {
    CpuIsa best = DetectCpuIsa();
    const char* env = std::getenv("VERL_CPU_ISA");
    if (env == nullptr || *env == '\0') return best;
    for (CpuIsa want : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
      if (std::string(env) == CpuIsaName(want)) {
        return static_cast<CpuIsa>(
            std::min(static_cast<int>(want), static_cast<int>(best)));
      }
    }
    LOG(WARNING) << "VERL_CPU_ISA=" << env
                 << " is not one of baseline, avx2, avx512; using "
                 << CpuIsaName(best);
    return best;
  }();
  return isa;
}

}  // namespace verl::core
