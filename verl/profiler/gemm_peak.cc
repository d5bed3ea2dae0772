// File: verl/profiler/gemm_peak.cc
#include "verl/profiler/gemm_peak.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>

namespace verl::profiler {

double MeasureGemmFlops(int64_t m, int64_t k, int64_t n, int repeats) {
  at::NoGradGuard no_grad;
  const at::Tensor a = at::randn({m, k}), b = at::randn({k, n});
  at::Tensor c = at::matmul(a, b);  // warm-up
  double best = 1e30;
  for (int i = 0; i < std::max(repeats, 1); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    at::matmul_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  return 2.0 * m * k * n / best;
}

std::string BlasLibrary() {
  char buf[4096];
  const ssize_t n = readlink("/etc/alternatives/libblas.so.3-x86_64-linux-gnu",
                             buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : std::string("unknown");
}

std::string LoadedBlasLibrary() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("libblas") != std::string::npos ||
        line.find("libblis") != std::string::npos ||
        line.find("libopenblas") != std::string::npos ||
        line.find("libmkl") != std::string::npos) {
      return line.substr(line.find('/'));
    }
  }
  return "unknown";
}

}  // namespace verl::profiler
