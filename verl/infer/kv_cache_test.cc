// File: verl/infer/kv_cache_test.cc
#include "verl/infer/kv_cache.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "verl/core/test_util.h"

namespace verl::infer {
namespace {

using ::verl::core::testing::StatusIs;

KvCacheSpec Spec() {
  KvCacheSpec s;
  s.num_layers = 2;
  s.num_kv_heads = 3;
  s.head_dim = 4;
  s.block_size = 5;
  return s;
}

TEST(KvCacheTest, BudgetSizing) {
  KvCacheSpec s = Spec();
  EXPECT_EQ(s.BytesPerBlock(), 2 * 2 * 5 * 3 * 4 * 4);
  EXPECT_EQ(NumBlocksForBudget(s, 10 * s.BytesPerBlock() + 7), 10);
  s.dtype = at::kBFloat16;
  EXPECT_EQ(s.BytesPerBlock(), 2 * 2 * 5 * 3 * 4 * 2);
}

TEST(KvCacheTest, AllocateReleaseAndShapes) {
  KvCache c(Spec(), 6);
  EXPECT_FALSE(c.allocated());
  c.Allocate();
  ASSERT_TRUE(c.allocated());
  EXPECT_EQ(c.key(1).sizes(), at::IntArrayRef({6, 5, 3, 4}));
  EXPECT_EQ(c.AllocatedBytes(), 6 * Spec().BytesPerBlock());
  c.Release();
  EXPECT_FALSE(c.allocated());
  EXPECT_EQ(c.AllocatedBytes(), 0);
}

TEST(KvCacheTest, CopyBlocksCopiesEveryLayer) {
  KvCache c(Spec(), 4);
  c.Allocate();
  for (int l = 0; l < 2; ++l) {
    c.key(l).copy_(at::randn(c.key(l).sizes()));
    c.value(l).copy_(at::randn(c.value(l).sizes()));
  }
  at::Tensor k0 = c.key(1)[0].clone(), v2 = c.value(0)[2].clone();
  c.CopyBlocks({{0, 3}, {2, 1}});
  EXPECT_TRUE(at::equal(c.key(1)[3], k0));
  EXPECT_TRUE(at::equal(c.value(0)[1], v2));
}

TEST(KvCacheTest, MemAvailableParsesMeminfo) {
  const std::string path = ::testing::TempDir() + "/meminfo";
  {
    std::ofstream f(path);
    f << "MemTotal:       24000000 kB\nMemFree:  1 kB\n"
      << "MemAvailable:   2000 kB\n";
  }
  auto bytes = MemAvailableBytes(path);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(*bytes, 2000 * 1024);
  {
    std::ofstream f(path);
    f << "MemTotal: 5 kB\n";
  }
  EXPECT_THAT(MemAvailableBytes(path),
              StatusIs(absl::StatusCode::kNotFound, "no MemAvailable line"));
  EXPECT_THAT(MemAvailableBytes(path + ".missing"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(MemAvailableBytes().ok());  // the real /proc/meminfo
}

}  // namespace
}  // namespace verl::infer
