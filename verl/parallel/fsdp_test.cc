#include "verl/parallel/fsdp.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>

#include "gtest/gtest.h"
#include "verl/core/test_util.h"

namespace verl::parallel {
namespace {

using ::verl::core::testing::StatusIs;

TEST(ShardLayoutTest, PadsDimZeroToAMultipleOfTheWorld) {
  ShardLayout l = MakeShardLayout({5, 3}, 4);
  EXPECT_EQ(l.shard_rows, 2);
  EXPECT_EQ(l.padded_rows(), 8);
  EXPECT_EQ(l.shard_numel(), 6);
  EXPECT_EQ(l.ValidRows(0), 2);
  EXPECT_EQ(l.ValidRows(2), 1);
  EXPECT_EQ(l.ValidRows(3), 0);
  ShardLayout scalar = MakeShardLayout({}, 2);
  EXPECT_EQ(scalar.dim0, 1);
  EXPECT_EQ(scalar.shard_numel(), 1);
}

TEST(ShardLayoutTest, ShardsRoundTripAndPaddingIsZero) {
  for (int world : {1, 2, 3, 4}) {
    at::Tensor full = at::arange(15, at::kFloat).view({5, 3}) + 1;
    ShardLayout l = MakeShardLayout(full.sizes(), world);
    std::vector<at::Tensor> shards;
    for (int r = 0; r < world; ++r) {
      shards.push_back(ShardOf(full, l, r));
      EXPECT_EQ(shards.back().sizes().vec(), l.ShardShape());
      // Rows past ValidRows are padding: all zero; rows before are the
      // full tensor's rows r*shard_rows + i.
      for (int64_t i = 0; i < l.shard_rows; ++i) {
        const int64_t row = r * l.shard_rows + i;
        at::Tensor expect = i < l.ValidRows(r) ? full[row] : at::zeros({3});
        EXPECT_TRUE(at::equal(shards.back()[i], expect)) << world << " " << r;
      }
    }
    EXPECT_TRUE(at::equal(Unshard(shards, l), full)) << world;
  }
}

TEST(UnitsByLayerTest, EmbedLayersHead) {
  NamedTensors params;
  for (const char* n :
       {"model.embed_tokens.weight", "model.layers.0.a", "model.layers.0.b",
        "model.layers.1.a", "model.layers.10.a", "model.norm.weight",
        "lm_head.weight"}) {
    params.emplace_back(n, at::zeros({1}));
  }
  std::vector<FsdpUnitSpec> units = UnitsByLayer(params);
  ASSERT_EQ(units.size(), 5u);
  EXPECT_EQ(units[0].name, "embed");
  EXPECT_EQ(units[1].name, "model.layers.0");
  EXPECT_EQ(units[1].params.size(), 2u);
  EXPECT_EQ(units[2].name, "model.layers.1");
  EXPECT_EQ(units[3].name, "model.layers.10");
  EXPECT_EQ(units[4].name, "head");
  EXPECT_EQ(units[4].params.size(), 2u);
}

TEST(FsdpModuleTest, SingleRankGatherReduceAndAccounting) {
  at::Tensor w = at::randn({4, 3}).set_requires_grad(true);
  at::Tensor b = at::randn({3}).set_requires_grad(true);
  const at::Tensor w0 = w.detach().clone(), b0 = b.detach().clone();
  FsdpOptions options;
  options.param_offload = true;
  FsdpModule fsdp({{"u0", {{"w", w}}}, {"u1", {{"b", b}}}},
                  {SingleProcessCommunicator(), nullptr}, options);
  EXPECT_EQ(w.numel(), 0);  // resharded at construction
  FsdpMemory m = fsdp.Memory();
  EXPECT_EQ(m.param_shard_bytes, (12 + 3) * 4);
  EXPECT_EQ(m.host_bytes, m.param_shard_bytes);
  EXPECT_EQ(m.gathered_bytes, 0);
  EXPECT_EQ(fsdp.shard_location(), MemoryLocation::kHost);
  // Offload round trip: same values in new buffers, accounted by location.
  {
    const at::Tensor before = fsdp.shard_params()[0].detach().clone();
    ASSERT_TRUE(fsdp.MoveShards(MemoryLocation::kDevice).ok());
    EXPECT_EQ(fsdp.Memory().host_bytes, 0);
    EXPECT_EQ(fsdp.Memory().device_bytes, (12 + 3) * 4);
    ASSERT_TRUE(fsdp.MoveShards(MemoryLocation::kHost).ok());
    EXPECT_EQ(fsdp.offload_bytes_moved(), 2 * (12 + 3) * 4);
    EXPECT_TRUE(at::equal(fsdp.shard_params()[0], before));
    EXPECT_TRUE(fsdp.shard_params()[0].requires_grad());
    EXPECT_EQ(fsdp.Memory().host_bytes, (12 + 3) * 4);
  }

  ASSERT_TRUE(fsdp.GatherAll().ok());
  EXPECT_EQ(fsdp.bytes_communicated(), (12 + 3) * 4);
  EXPECT_TRUE(at::equal(w, w0));
  EXPECT_TRUE(at::equal(b, b0));
  EXPECT_EQ(fsdp.Memory().gathered_bytes, (12 + 3) * 4);

  at::Tensor loss = (w.sum(0) * b).sum();
  loss.backward();
  const at::Tensor gw = w.grad().clone(), gb = b.grad().clone();
  ASSERT_TRUE(fsdp.ReduceAllGradients().ok());
  EXPECT_EQ(fsdp.bytes_communicated(), 2 * (12 + 3) * 4);
  EXPECT_FALSE(w.grad().defined());  // full grads freed
  std::vector<at::Tensor> shards = fsdp.shard_params();
  EXPECT_TRUE(at::allclose(shards[0].grad(), gw));
  EXPECT_TRUE(at::allclose(shards[1].grad(), gb));
  auto norm = fsdp.GradNorm();
  ASSERT_TRUE(norm.ok());
  const double expect = std::sqrt(gw.pow(2).sum().item<double>() +
                                  gb.pow(2).sum().item<double>());
  EXPECT_NEAR(*norm, expect, 1e-5 * expect);

  auto full = fsdp.FullStateDict();
  ASSERT_TRUE(full.ok());
  ASSERT_EQ(full->size(), 2u);
  EXPECT_EQ((*full)[0].first, "w");
  EXPECT_TRUE(at::equal((*full)[0].second, w0));

  // Sharded state dict round trip, and a layout mismatch is rejected.
  std::vector<ShardedTensor> sd = fsdp.ShardedStateDict();
  {
    at::NoGradGuard g;
    shards[0].fill_(7);
  }
  ASSERT_TRUE(fsdp.LoadShardedStateDict(sd).ok());
  EXPECT_TRUE(at::equal(shards[0], w0));
  sd[0].layout.full_shape = {2, 6};
  absl::Status bad = fsdp.LoadShardedStateDict(sd);
  EXPECT_THAT(
      bad, StatusIs(absl::StatusCode::kInvalidArgument,
                    "sharded state dict: parameter w has a different shard"));
  EXPECT_NE(bad.message().find("parameter w"), std::string::npos);

  fsdp.ReshardAll();
  EXPECT_EQ(w.numel(), 0);
  EXPECT_EQ(fsdp.Memory().gathered_bytes, 0);
}

TEST(FsdpModuleTest, FrozenParamsAreGatheredButNotReducedOrOptimized) {
  at::Tensor frozen = at::randn({2, 2});  // requires_grad false
  at::Tensor w = at::randn({2}).set_requires_grad(true);
  const at::Tensor f0 = frozen.clone();
  FsdpModule fsdp({{"u", {{"frozen", frozen}, {"w", w}}}},
                  {SingleProcessCommunicator(), nullptr}, {});
  ASSERT_EQ(fsdp.shard_params().size(), 1u);
  ASSERT_TRUE(fsdp.Gather(0).ok());
  EXPECT_TRUE(at::equal(frozen, f0));
  (frozen.matmul(w)).sum().backward();
  const int64_t before = fsdp.bytes_communicated();
  ASSERT_TRUE(fsdp.ReduceGradients(0).ok());
  EXPECT_EQ(fsdp.bytes_communicated() - before, 2 * 4);  // w's grad only
  EXPECT_TRUE(at::allclose(fsdp.shard_params()[0].grad(), f0.sum(0)));
}

TEST(FsdpModuleTest, ForEachGatheredUnitStreamsOneUnitAtATime) {
  at::Tensor a = at::randn({3}).set_requires_grad(true);
  at::Tensor b = at::randn({2, 2}).set_requires_grad(true);
  const at::Tensor a0 = a.detach().clone(), b0 = b.detach().clone();
  FsdpModule fsdp({{"ua", {{"a", a}}}, {"ub", {{"b", b}}}},
                  {SingleProcessCommunicator(), nullptr}, {});
  ASSERT_TRUE(fsdp.Gather(1).ok());  // stays gathered afterwards
  std::vector<std::string> seen;
  absl::Status s = fsdp.ForEachGatheredUnit([&](const std::string& unit,
                                                const NamedTensors& params) {
    seen.push_back(unit);
    // Only the streamed unit (plus the pre-gathered ub) is full.
    EXPECT_EQ(fsdp.Memory().gathered_bytes, unit == "ua" ? (3 + 4) * 4 : 4 * 4);
    EXPECT_TRUE(at::equal(params[0].second, unit == "ua" ? a0 : b0));
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(seen, (std::vector<std::string>{"ua", "ub"}));
  EXPECT_FALSE(fsdp.gathered(0));
  EXPECT_TRUE(fsdp.gathered(1));
  s = fsdp.ForEachGatheredUnit([](const std::string&, const NamedTensors&) {
    return absl::InternalError("engine full");
  });
  EXPECT_EQ(s.message(), "engine full");
  EXPECT_FALSE(fsdp.gathered(0));
}

TEST(FsdpModuleTest, ComputeDtypeGathersInBf16) {
  at::Tensor w = at::randn({3, 2}).set_requires_grad(true);
  const at::Tensor w0 = w.detach().clone();
  FsdpOptions options;
  options.compute_dtype = at::kBFloat16;
  FsdpModule fsdp({{"u", {{"w", w}}}}, {SingleProcessCommunicator(), nullptr},
                  options);
  ASSERT_TRUE(fsdp.Gather(0).ok());
  EXPECT_EQ(w.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(w, w0.to(at::kBFloat16)));
  EXPECT_EQ(fsdp.shard_params()[0].scalar_type(), at::kFloat);  // master
}

}  // namespace
}  // namespace verl::parallel
