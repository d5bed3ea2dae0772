// File: verl/infer/kernels.cc
#include "verl/infer/kernels.h"

#include <algorithm>

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

int64_t PanelGemmFloats(int64_t k, int64_t n) {
  return (n + kGemmPanel - 1) / kGemmPanel * kGemmPanel * k;
}

void PackRowsIntoPanels(const float* src, int64_t k, int64_t col0, int64_t i0,
                        int64_t i1, float* panels) {
  // 32 x 32 tiles: each source row is read as a stream, the writes of a
  // tile stay within 32 panel rows.
  constexpr int64_t kTile = 32;
  for (int64_t a0 = i0; a0 < i1; a0 += kTile) {
    const int64_t a1 = std::min(i1, a0 + kTile);
    for (int64_t k0 = 0; k0 < k; k0 += kTile) {
      const int64_t k1 = std::min(k, k0 + kTile);
      for (int64_t i = a0; i < a1; ++i) {
        const int64_t col = col0 + i;
        float* dst =
            panels + (col / kGemmPanel) * k * kGemmPanel + col % kGemmPanel;
        const float* row = src + i * k;
        for (int64_t kk = k0; kk < k1; ++kk) dst[kk * kGemmPanel] = row[kk];
      }
    }
  }
}

const KernelTable& Kernels() {
  static const KernelTable* table = KernelsFor(ActiveCpuIsa());
  return *table;
}

}  // namespace verl::infer
