#include "verl/ckpt/safetensors_sharded.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/core/ScalarType.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace verl::ckpt {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::set<std::string> Listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out.insert(e.path().filename().string());
  }
  return out;
}

std::string Msg(const absl::Status& s) { return std::string(s.message()); }

bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(),
                     a.nbytes()) == 0;
}

void ExpectSameMaps(const TensorMap& a, const TensorMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_TRUE(SameBytes(t, b.at(name))) << name;
  }
}

TEST(SafetensorsShardedTest, FileNamesAndIndexJsonMatchHf) {
  EXPECT_EQ(ShardFileName(0, 4), "model-00001-of-00004.safetensors");
  EXPECT_EQ(ShardFileName(11, 12), "model-00012-of-00012.safetensors");
  ShardIndex index;
  index.total_size = 10;
  index.weight_map = {{"b", "f2"}, {"a", "f1"}};
  // Python: json.dumps(index, indent=2, sort_keys=True) + "\n".
  EXPECT_EQ(ShardIndexToJson(index),
            "{\n  \"metadata\": {\n    \"total_size\": 10\n  },\n"
            "  \"weight_map\": {\n    \"a\": \"f1\",\n    \"b\": \"f2\"\n"
            "  }\n}\n");
  EXPECT_EQ(index.Files(), (std::vector<std::string>{"f1", "f2"}));
}

TEST(SafetensorsShardedTest, PlanFollowsHfGreedySplit) {
  TensorMap m;
  m["a"] = at::zeros({10});             // 40 bytes
  m["b"] = at::zeros({10});             // 40
  m["c"] = at::zeros({15}, at::kHalf);  // 30
  m["d"] = at::zeros({25});             // 100 > limit: a shard of its own
  m["e"] = at::zeros({10}, at::kByte);  // 10
  // Worked by hand from huggingface_hub's loop with max 64.
  EXPECT_EQ(PlanShards(m, 64), (std::vector<std::vector<std::string>>{
                                   {"a"}, {"b"}, {"d"}, {"c", "e"}}));
  EXPECT_EQ(PlanShards(m, 1000).size(), 1u);
  EXPECT_EQ(PlanShards(TensorMap{}, 64).size(), 1u);
}

class FolderRoundTrip : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(FolderRoundTrip, ShardedAndSingleAreBitIdentical) {
  at::manual_seed(1);
  TensorMap m;
  for (int i = 0; i < 6; ++i) {
    m["layers." + std::to_string(i) + ".w"] = at::randn({8, 16}).to(GetParam());
  }
  m["embed"] = at::randn({32, 16}).to(GetParam());
  const uint64_t elem = at::elementSize(GetParam());

  const std::string sharded = TempDir("sharded");
  ASSERT_TRUE(SaveSafetensorsFolder(sharded, m, 300 * elem).ok());
  auto plan = PlanShards(m, 300 * elem);
  ASSERT_GT(plan.size(), 2u);
  std::set<std::string> expected = {kSafetensorsIndexFile};
  for (size_t i = 0; i < plan.size(); ++i) {
    expected.insert(ShardFileName(i, plan.size()));
  }
  EXPECT_EQ(Listing(sharded), expected);
  auto index = ReadShardIndex(sharded + "/" + kSafetensorsIndexFile);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->total_size, (6 * 8 * 16 + 32 * 16) * elem);
  EXPECT_EQ(index->weight_map.size(), m.size());
  auto loaded = LoadSafetensorsFolder(sharded);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSameMaps(m, *loaded);
  // Each shard file carries HF's metadata.
  auto reader =
      SafetensorsReader::Open(sharded + "/" + ShardFileName(0, plan.size()));
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(reader->metadata().at("format"), "pt");

  const std::string single = TempDir("single");
  ASSERT_TRUE(SaveSafetensorsFolder(single, m).ok());
  EXPECT_EQ(Listing(single), std::set<std::string>{kSafetensorsSingleFile});
  auto loaded_single = LoadSafetensorsFolder(single);
  ASSERT_TRUE(loaded_single.ok());
  ExpectSameMaps(m, *loaded_single);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FolderRoundTrip,
                         ::testing::Values(at::kFloat, at::kBFloat16));

TEST(SafetensorsShardedTest, ResavingRemovesStaleShards) {
  const std::string dir = TempDir("stale");
  TensorMap m;
  for (int i = 0; i < 4; ++i) m["t" + std::to_string(i)] = at::ones({16});
  ASSERT_TRUE(SaveSafetensorsFolder(dir, m, 64).ok());
  EXPECT_EQ(Listing(dir).size(), 5u);
  std::ofstream(dir + "/tokenizer.json") << "{}";
  ASSERT_TRUE(SaveSafetensorsFolder(dir, m).ok());
  EXPECT_EQ(Listing(dir),
            (std::set<std::string>{kSafetensorsSingleFile, "tokenizer.json"}));
  ASSERT_TRUE(SaveSafetensorsFolder(dir, m, 128).ok());
  EXPECT_EQ(Listing(dir).size(), 4u);  // 2 shards, index, tokenizer.json
}

TEST(SafetensorsShardedTest, InconsistentFoldersAreClearErrors) {
  TensorMap m;
  for (int i = 0; i < 3; ++i) m["t" + std::to_string(i)] = at::ones({16});
  const std::string empty = TempDir("empty");
  EXPECT_EQ(LoadSafetensorsFolder(empty).status().code(),
            absl::StatusCode::kNotFound);

  const std::string dir = TempDir("bad_index");
  ASSERT_TRUE(SaveSafetensorsFolder(dir, m, 64).ok());
  const std::string index_path = dir + "/" + kSafetensorsIndexFile;
  auto write_index = [&](const std::string& text) {
    std::ofstream(index_path, std::ios::trunc) << text;
  };
  write_index(R"({"weight_map": {"t0": "model-00009-of-00009.safetensors"}})");
  auto s = LoadSafetensorsFolder(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("model-00009-of-00009.safetensors"));

  write_index(R"({"weight_map": {"t0": "model-00001-of-00003.safetensors",
                                 "t1": "model-00001-of-00003.safetensors"}})");
  EXPECT_THAT(Msg(LoadSafetensorsFolder(dir).status()),
              HasSubstr("missing tensor 't1'"));

  write_index(R"({"weight_map": {"t0": "model-00002-of-00003.safetensors"}})");
  EXPECT_THAT(Msg(LoadSafetensorsFolder(dir).status()),
              HasSubstr("holds tensor 't1' that"));

  write_index(R"({"weight_map": {"t0": "../evil.safetensors"}})");
  EXPECT_THAT(Msg(LoadSafetensorsFolder(dir).status()),
              HasSubstr("not a plain file name"));
  write_index(R"({"metadata": {}})");
  EXPECT_THAT(Msg(LoadSafetensorsFolder(dir).status()),
              HasSubstr("missing 'weight_map'"));
  write_index("{oops");
  EXPECT_THAT(Msg(LoadSafetensorsFolder(dir).status()),
              HasSubstr(kSafetensorsIndexFile));
}

}  // namespace
}  // namespace verl::ckpt
