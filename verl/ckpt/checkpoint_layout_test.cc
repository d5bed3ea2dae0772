// File: verl/ckpt/checkpoint_layout_test.cc
#include "verl/ckpt/checkpoint_layout.h"

#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;

TEST(CheckpointLayoutTest, Fsdp2ChunksAndPadding) {
  // 10 rows over 4 ranks: ceil = 3 -> 3,3,3,1 rows, padding 2.
  ParamLayout p = MakeParamLayout({10, 3}, at::kFloat, 4);
  EXPECT_EQ(p.padding, 2);
  EXPECT_EQ(p.RowRange(0, 4), std::make_pair(int64_t{0}, int64_t{3}));
  EXPECT_EQ(p.RowRange(3, 4), std::make_pair(int64_t{9}, int64_t{10}));
  EXPECT_EQ(p.ChunkShape(3, 4), (std::vector<int64_t>{1, 3}));
  // 2 rows over 4 ranks: ranks 2 and 3 own nothing.
  ParamLayout small = MakeParamLayout({2}, at::kFloat, 4);
  EXPECT_EQ(small.ChunkShape(1, 4), (std::vector<int64_t>{1}));
  EXPECT_EQ(small.ChunkShape(3, 4), (std::vector<int64_t>{0}));
  EXPECT_EQ(small.padding, 2);
  ParamLayout scalar = MakeParamLayout({}, at::kFloat, 4);
  EXPECT_EQ(scalar.shard_dim, -1);
}

TEST(CheckpointLayoutTest, ShardUnshardIsIdentity) {
  const at::Tensor full = at::randn({7, 5});
  for (int w : {1, 2, 3, 4, 8}) {
    ParamLayout p = MakeParamLayout({7, 5}, at::kFloat, w);
    std::vector<at::Tensor> chunks;
    int64_t rows = 0;
    for (int r = 0; r < w; ++r) {
      chunks.push_back(ShardForRank(full, p, r, w));
      // Naive reference: row i belongs to rank i / ceil(7/w).
      const int64_t per = (7 + w - 1) / w;
      for (int64_t i = 0; i < chunks.back().size(0); ++i) {
        EXPECT_TRUE(at::equal(chunks.back()[i], full[r * per + i]));
      }
      rows += chunks.back().size(0);
    }
    EXPECT_EQ(rows, 7);
    auto back = UnshardTensor("w", p, chunks);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(at::equal(*back, full)) << "world " << w;
  }
}

TEST(CheckpointLayoutTest, UnshardRejectsWrongChunk) {
  ParamLayout p = MakeParamLayout({4, 2}, at::kFloat, 2);
  auto st = UnshardTensor("x", p, {at::zeros({2, 2}), at::zeros({3, 2})});
  ASSERT_THAT(
      st, StatusIs(absl::StatusCode::kInvalidArgument,
                   "tensor 'x' rank 1: chunk shape [3, 2], expected [2, 2]"));
  EXPECT_NE(st.status().message().find("'x' rank 1"), std::string::npos)
      << st.status();
}

TEST(CheckpointLayoutTest, JsonRoundTrip) {
  std::map<std::string, at::Tensor> full = {
      {"a.weight", at::zeros({6, 2}, at::kBFloat16)}, {"s", at::zeros({})}};
  FsdpLayout layout = MakeFsdpLayout(full, 4);
  nlohmann::json json = FsdpLayoutToJson(layout);
  EXPECT_EQ(json["world_size"], 4);
  EXPECT_EQ(json["FSDP_version"], 2);
  EXPECT_EQ(json["mesh_dim_names"], nlohmann::json({"fsdp"}));
  EXPECT_EQ(json["shard_layout"]["a.weight"]["padding"], 2);
  EXPECT_EQ(json["shard_layout"]["a.weight"]["dtype"], "bfloat16");
  EXPECT_TRUE(json["shard_layout"]["s"]["shard_dim"].is_null());
  auto back = FsdpLayoutFromJson(json, "f.json");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->world_size, 4);
  EXPECT_EQ(back->params.at("a.weight").shape, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(back->params.at("s").shard_dim, -1);
  // verl's own file: no layout, still valid.
  auto verl = FsdpLayoutFromJson({{"FSDP_version", 1}, {"world_size", 8}}, "f");
  ASSERT_TRUE(verl.ok());
  EXPECT_EQ(verl->world_size, 8);
  EXPECT_TRUE(verl->params.empty());
  auto bad = FsdpLayoutFromJson({{"FSDP_version", 1}}, "my/fsdp_config.json");
  ASSERT_THAT(
      bad, StatusIs(absl::StatusCode::kInvalidArgument,
                    "my/fsdp_config.json: missing or invalid \"world_size\""));
  EXPECT_NE(bad.status().message().find("my/fsdp_config.json"),
            std::string::npos);
  EXPECT_NE(bad.status().message().find("world_size"), std::string::npos);
}

}  // namespace
}  // namespace verl::ckpt
