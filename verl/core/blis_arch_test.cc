// File: verl/core/blis_arch_test.cc
#include "verl/core/blis_arch.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace verl::core {
namespace {

TEST(BlisArchTest, OnlyAmdFamiliesBlis09DoesNotKnowWithAvx512GetSkx) {
  struct Row {
    CpuIdentity cpu;
    const char* want;
  };
  const Row rows[] = {
      {{"AuthenticAMD", 0x1A, true}, "skx"},  // Zen 5: BLIS 0.9 says generic
      {{"AuthenticAMD", 0x1B, true}, "skx"},  // a later family
      {{"AuthenticAMD", 0x1A, false}, ""},    // no AVX-512: skx would fault
      {{"AuthenticAMD", 0x19, true}, ""},     // Zen 3/4: BLIS picks zen3
      {{"AuthenticAMD", 0x17, false}, ""},    // Zen 2: zen2
      {{"GenuineIntel", 0x6, true}, ""},      // Intel: chosen by features
      {{"HygonGenuine", 0x18, false}, ""},   {{"", 0, false}, ""},
  };
  for (const Row& row : rows) {
    EXPECT_EQ(BlisArchOverrideFor(row.cpu), row.want)
        << row.cpu.vendor << " family " << row.cpu.family;
  }
}

TEST(BlisArchTest, LoadTimeHookSetTheVariableForThisCpu) {
  const std::string& set = BlisArchSetAtLoad();
  const char* env = std::getenv("BLIS_ARCH_TYPE");
  if (!set.empty()) {
    ASSERT_NE(env, nullptr);
    EXPECT_EQ(set, env);
    EXPECT_EQ(set, BlisArchOverrideFor(ThisCpu()));
  } else if (env == nullptr) {
    EXPECT_EQ(BlisArchOverrideFor(ThisCpu()), "");
  }
}

TEST(BlisArchTest, ThisCpuHasAVendorAndFamily) {
  const CpuIdentity cpu = ThisCpu();
  EXPECT_FALSE(cpu.vendor.empty());
  EXPECT_GT(cpu.family, 0);
}

}  // namespace
}  // namespace verl::core
