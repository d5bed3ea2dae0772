// File: verl/infer/kernels.cc
#include "verl/infer/kernels.h"

namespace verl::infer {
const KernelTable* KernelsFor(CpuIsa isa) {
  if (!CpuSupports(isa)) return nullptr;
  switch (isa) {
    case CpuIsa::kAvx512:
      return &kernels_avx512::Table();
    case CpuIsa::kAvx2:
      return &kernels_avx2::Table();
    case CpuIsa::kBaseline:
      return &kernels_baseline::Table();
  }
  return nullptr;
}

const KernelTable& Kernels() {
  static const KernelTable* table = KernelsFor(ActiveCpuIsa());
  return *table;
}

}  // namespace verl::infer
