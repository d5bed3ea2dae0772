#include "verl/profiler/gemm_peak.h"

#include <cmath>
#include <filesystem>
#include <string>
#include <system_error>

#include "gtest/gtest.h"

namespace verl::profiler {
namespace {

namespace fs = std::filesystem;

// A measured rate: positive, finite and below any CPU's (100 TFLOP/s); a
// rectangular product and a square one both.
TEST(GemmPeakTest, MeasuresAPlausibleRate) {
  for (double rate : {MeasureGemmFlops(256), MeasureGemmFlops(64, 96, 32, 2)}) {
    EXPECT_TRUE(std::isfinite(rate));
    EXPECT_GT(rate, 1e6);
    EXPECT_LT(rate, 1e14);
  }
}

// The alternative's target as std::filesystem reads the link.
TEST(GemmPeakTest, BlasLibraryIsTheAlternativesTarget) {
  std::error_code ec;
  const fs::path target =
      fs::read_symlink("/etc/alternatives/libblas.so.3-x86_64-linux-gnu", ec);
  EXPECT_EQ(BlasLibrary(), ec ? std::string("unknown") : target.string());
}

// After a matmul LibTorch has a BLAS mapped (or none is found): a file that
// exists, named like a BLAS.
TEST(GemmPeakTest, LoadedBlasLibraryIsAMappedBlasFile) {
  MeasureGemmFlops(32);
  const std::string loaded = LoadedBlasLibrary();
  if (loaded == "unknown") GTEST_SKIP() << "no BLAS mapped";
  EXPECT_TRUE(fs::exists(loaded)) << loaded;
  const std::string name = fs::path(loaded).filename().string();
  EXPECT_TRUE(name.find("blas") != std::string::npos ||
              name.find("blis") != std::string::npos ||
              name.find("mkl") != std::string::npos)
      << loaded;
}

}  // namespace
}  // namespace verl::profiler
