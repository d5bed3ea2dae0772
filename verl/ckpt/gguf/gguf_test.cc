// File: verl/ckpt/gguf/gguf_test.cc
//
// GGUF round trip for every type, q8_0 against a reference written from
// ggml's definition, writer refusals, and a table of malformed files.
#include "verl/ckpt/gguf/gguf.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using core::testing::StatusIs;

std::string Dir(const std::string& name) {
  std::string d = core::testing::FreshTestDir(name);
  EXPECT_TRUE(core::MakeDirs(d).ok());
  return d;
}

// q8_0 by the ggml reference, in double where it does not matter.
at::Tensor ReferenceQ8RoundTrip(const at::Tensor& x) {
  at::Tensor blocks = x.reshape({-1, 32});
  at::Tensor amax = blocks.abs().amax(1, true);
  at::Tensor d = amax / 127.0f;
  at::Tensor d16 = d.to(at::kHalf).to(at::kFloat);
  at::Tensor id = at::where(d == 0, at::zeros_like(d), 1.0f / d);
  at::Tensor q = at::round(blocks * id);
  return (q * d16).reshape(x.sizes());
}

TEST(GgufTest, RoundTripsEveryTypeAndMetadata) {
  const std::string path = Dir("gguf_rt") + "/m.gguf";
  at::manual_seed(0);
  at::Tensor a = at::randn({3, 64});
  at::Tensor b = at::randn({5});
  at::Tensor q = at::randn({2, 64}) * 3.0;
  q.index_put_({1}, at::zeros({64}));  // an all-zero block: d = 0
  GgufMetadata meta = {
      {"general.architecture", GgufValue::String("qwen2")},
      {"qwen2.block_count", GgufValue::Uint32(2)},
      {"qwen2.rope.freq_base", GgufValue::Float32(10000.0f)},
      {"tokenizer.ggml.add_bos_token", GgufValue::Bool(false)},
      {"tokenizer.ggml.tokens", GgufValue::StringArray({"a", "b", "<s>"})},
      {"tokenizer.ggml.token_type", GgufValue::Int32Array({1, 1, 3})},
      {"x.scores", GgufValue::Float32Array({0.5f, -1.0f})},
      {"x.u64", GgufValue::Uint64(uint64_t{1} << 40)},
      {"x.i32", GgufValue::Int32(-7)},
  };
  std::vector<GgufTensorSpec> specs = {{"a.f32", {3, 64}, GgmlType::kF32},
                                       {"a.f16", {3, 64}, GgmlType::kF16},
                                       {"a.bf16", {3, 64}, GgmlType::kBF16},
                                       {"b", {5}, GgmlType::kF32},
                                       {"q", {2, 64}, GgmlType::kQ8_0}};
  auto w = GgufWriter::Create(path, meta, specs);
  ASSERT_TRUE(w.ok()) << w.status();
  // Any order.
  ASSERT_TRUE((*w)->Write("q", q).ok());
  for (const char* n : {"a.f32", "a.f16", "a.bf16"}) {
    ASSERT_TRUE((*w)->Write(n, a).ok());
  }
  EXPECT_THAT((*w)->Finish(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "'b' was never"));
  EXPECT_NE(::access(path.c_str(), F_OK), 0);
  ASSERT_TRUE((*w)->Write("b", b).ok());
  EXPECT_THAT((*w)->Write("b", b),
              StatusIs(absl::StatusCode::kInvalidArgument, "or twice"));
  ASSERT_TRUE((*w)->Finish().ok());

  auto file = ReadGguf(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->version, 3u);
  EXPECT_EQ(file->metadata["general.architecture"], "qwen2");
  EXPECT_EQ(file->metadata["qwen2.block_count"], 2);
  EXPECT_EQ(file->metadata["tokenizer.ggml.add_bos_token"], false);
  EXPECT_EQ(file->metadata["tokenizer.ggml.tokens"],
            nlohmann::json({"a", "b", "<s>"}));
  EXPECT_EQ(file->metadata["tokenizer.ggml.token_type"],
            nlohmann::json({1, 1, 3}));
  EXPECT_EQ(file->metadata["x.u64"], uint64_t{1} << 40);
  EXPECT_EQ(file->metadata["x.i32"], -7);
  EXPECT_FLOAT_EQ(file->metadata["x.scores"][1].get<float>(), -1.0f);
  ASSERT_EQ(file->tensors.size(), 5u);
  for (const GgufTensorInfo& t : file->tensors) {
    EXPECT_EQ((t.offset) % 32, 0u) << t.name;
  }
  EXPECT_EQ(file->tensors[0].shape, (std::vector<int64_t>{3, 64}));
  auto get = [&](const std::string& n) {
    auto t = ReadGgufTensor(path, *file, n);
    EXPECT_TRUE(t.ok()) << t.status();
    return *t;
  };
  EXPECT_TRUE(at::equal(get("a.f32"), a));
  EXPECT_TRUE(at::equal(get("a.f16"), a.to(at::kHalf).to(at::kFloat)));
  EXPECT_TRUE(at::equal(get("a.bf16"), a.to(at::kBFloat16).to(at::kFloat)));
  EXPECT_TRUE(at::equal(get("b"), b));
  at::Tensor q_back = get("q");
  EXPECT_TRUE(at::allclose(q_back, ReferenceQ8RoundTrip(q), 0, 1e-6));
  EXPECT_TRUE(at::equal(q_back.select(0, 1), at::zeros({64})));
  // 8-bit: error ≤ half a quantization step (max|x|/254) plus fp16 scale.
  EXPECT_LT((q_back - q).abs().max().item<float>(),
            q.abs().max().item<float>() / 254 * 1.01);
  EXPECT_THAT(ReadGgufTensor(path, *file, "nope"),
              StatusIs(absl::StatusCode::kNotFound, "no tensor 'nope'"));
}

TEST(GgufTest, WriterRefusesWhatLlamaCppCannotLoad) {
  const std::string dir = Dir("gguf_refuse");
  auto refuse = [&](GgufTensorSpec spec, const std::string& why) {
    EXPECT_THAT(GgufWriter::Create(dir + "/x.gguf", {}, {spec}),
                StatusIs(absl::StatusCode::kInvalidArgument, why))
        << spec.name;
  };
  refuse({"q", {4, 48}, GgmlType::kQ8_0}, "multiple of 32");
  refuse({std::string(64, 'n'), {4}, GgmlType::kF32}, "1..63 bytes");
  refuse({"z", {1, 2, 3, 4, 5}, GgmlType::kF32}, "1..4 dimensions");
  refuse({"z", {0}, GgmlType::kF32}, "positive");
  EXPECT_THAT(ParseGgmlType("q4_k"),
              StatusIs(absl::StatusCode::kInvalidArgument, "'q4_k'"));
  auto w =
      GgufWriter::Create(dir + "/y.gguf", {}, {{"t", {2, 2}, GgmlType::kF32}});
  ASSERT_TRUE(w.ok());
  EXPECT_THAT((*w)->Write("t", at::zeros({4})),
              StatusIs(absl::StatusCode::kInvalidArgument, "declared shape"));
}

// Bytes of a small valid file, then one mutation per row.
TEST(GgufTest, MalformedFilesGiveOneClearError) {
  const std::string dir = Dir("gguf_bad");
  const std::string good = dir + "/good.gguf";
  {
    auto w = GgufWriter::Create(
        good,
        {{"general.architecture", GgufValue::String("llama")},
         {"k.b", GgufValue::Bool(true)}},
        {{"t", {2, 32}, GgmlType::kF32}});
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write("t", at::ones({2, 32})).ok());
    ASSERT_TRUE((*w)->Finish().ok());
  }
  const std::string bytes = *core::ReadFile(good);
  ASSERT_TRUE(ReadGguf(good).ok());
  // Offsets into the header: magic 0, version 4, n_tensors 8, n_kv 16, then
  // key "general.architecture" (8 + 20 bytes) at 24, its type at 52, string
  // length at 56, "llama" at 64, key "k.b" at 69, type at 80, bool at 84,
  // tensor name at 85 (8 + 1), n_dims at 94, ne at 98/106, type 114,
  // offset 118.
  auto put32 = [](std::string& s, size_t at, uint32_t v) {
    std::memcpy(&s[at], &v, 4);
  };
  auto put64 = [](std::string& s, size_t at, uint64_t v) {
    std::memcpy(&s[at], &v, 8);
  };
  struct Case {
    const char* what;
    std::function<void(std::string&)> mutate;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"truncated header", [](std::string& s) { s.resize(40); }, "truncated"},
      {"bad magic", [](std::string& s) { s[0] = 'X'; }, "bad magic"},
      {"version 9", [&](std::string& s) { put32(s, 4, 9); },
       "unsupported version 9"},
      {"huge tensor count", [&](std::string& s) { put64(s, 8, 1ull << 60); },
       "counts larger than the file"},
      {"string past the end", [&](std::string& s) { put64(s, 24, 1ull << 40); },
       "truncated metadata key"},
      {"unknown value type", [&](std::string& s) { put32(s, 52, 77); },
       "unknown metadata value type 77"},
      {"bool not 0/1", [](std::string& s) { s[84] = 5; }, "bool value"},
      {"five dimensions", [&](std::string& s) { put32(s, 94, 5); },
       "5 dimensions"},
      {"zero dimension", [&](std::string& s) { put64(s, 98, 0); },
       "invalid dimension 0"},
      {"unaligned offset", [&](std::string& s) { put64(s, 118, 3); },
       "not aligned"},
      {"data past the end", [](std::string& s) { s.resize(s.size() - 8); },
       "past the end of the file"},
      {"q8_0 with odd rows",
       [&](std::string& s) {
         put32(s, 114, 8);
         put64(s, 98, 33);
       },
       "not divisible by 32"},
  };
  for (const Case& c : cases) {
    std::string mutated = bytes;
    c.mutate(mutated);
    const std::string path = dir + "/bad.gguf";
    ASSERT_TRUE(core::WriteFileAtomic(path, mutated).ok());
    EXPECT_THAT(ReadGguf(path),
                StatusIs(absl::StatusCode::kInvalidArgument, c.message))
        << c.what;
  }
  EXPECT_THAT(ReadGguf(dir + "/missing.gguf"),
              StatusIs(absl::StatusCode::kNotFound, "cannot open"));
}

}  // namespace
}  // namespace verl::ckpt
