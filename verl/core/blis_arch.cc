// File: verl/core/blis_arch.cc
#include "verl/core/blis_arch.h"

#include <cpuid.h>

#include <cstdlib>
#include <cstring>

#include "verl/core/cpu_isa.h"

namespace verl::core {

CpuIdentity ThisCpu() {
  CpuIdentity cpu;
  unsigned int eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return cpu;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  cpu.vendor = vendor;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
    const int base = (eax >> 8) & 0xF;
    cpu.family = base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
  }
  // The subsets BLIS's skx kernels use are those of our AVX-512 kernels.
  cpu.avx512 = DetectCpuIsa() == CpuIsa::kAvx512;
  return cpu;
}

std::string BlisArchOverrideFor(const CpuIdentity& cpu) {
  // BLIS 0.9 maps AMD families 0x15 (bulldozer..excavator), 0x17 (zen,
  // zen2) and 0x19 (zen3) to kernels; a later family gets 'generic'.
  constexpr int kFirstFamilyBlis09DoesNotKnow = 0x1A;
  if (cpu.vendor == "AuthenticAMD" &&
      cpu.family >= kFirstFamilyBlis09DoesNotKnow && cpu.avx512) {
    return "skx";
  }
  return "";
}

namespace {

std::string SetBlisArchOnce() {
  if (std::getenv("BLIS_ARCH_TYPE") != nullptr) return "";
  std::string arch = BlisArchOverrideFor(ThisCpu());
  if (!arch.empty()) setenv("BLIS_ARCH_TYPE", arch.c_str(), /*overwrite=*/0);
  return arch;
}

// Runs when the library loads: before main, so before LibTorch's first GEMM.
[[maybe_unused]] const std::string& set_at_load = BlisArchSetAtLoad();

}  // namespace

const std::string& BlisArchSetAtLoad() {
  static const std::string* const arch = new std::string(SetBlisArchOnce());
  return *arch;
}

}  // namespace verl::core
