#include "verl/ckpt/safetensors.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/randint.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/ckpt/safetensors_test_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Bitwise equality (NaN-safe, works for every dtype).
bool SameBytes(const at::Tensor& a, const at::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) {
    return false;
  }
  at::Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(),
                     ca.numel() * ca.element_size()) == 0;
}

bool IsViewOf(const at::Tensor& t, absl::string_view bytes) {
  const char* p = static_cast<const char*>(t.data_ptr());
  return p >= bytes.data() && p < bytes.data() + bytes.size();
}

TensorMap AllDtypes() {
  at::manual_seed(0);
  TensorMap m;
  m["f32"] = at::randn({3, 5});
  m["f16"] = at::randn({7}).to(at::kHalf);
  m["bf16"] = at::randn({2, 3, 2}).to(at::kBFloat16);
  m["f64"] = at::randn({3}, at::kDouble);
  m["i64"] = at::randint(-1000, 1000, {4}, at::kLong);
  m["i32"] = at::randint(-1000, 1000, {5}, at::kInt);
  m["i16"] = at::randint(-1000, 1000, {3}, at::kShort);
  m["i8"] = at::randint(-100, 100, {9}, at::kChar);
  m["u8"] = at::randint(0, 255, {11}, at::kByte);
  m["bool"] = at::randint(0, 2, {6}, at::kLong).to(at::kBool);
  m["scalar"] = at::scalar_tensor(3.5);
  m["empty"] = at::empty({0, 4});
  return m;
}

TEST(SafetensorsTest, ScalarTypeMapping) {
  EXPECT_EQ(*ToScalarType(StDtype::kBF16), at::kBFloat16);
  EXPECT_EQ(*ToScalarType(StDtype::kBool), at::kBool);
  EXPECT_EQ(*FromScalarType(at::kChar), StDtype::kI8);
  EXPECT_EQ(ToScalarType(StDtype::kU16).status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_THAT(FromScalarType(at::kComplexFloat).status().message(),
              HasSubstr("cannot be stored in safetensors"));
}

TEST(SafetensorsTest, RoundTripsEveryDtypeWithMetadataAsViews) {
  const std::string path = TempDir("rt") + "/m.safetensors";
  TensorMap in = AllDtypes();
  ASSERT_TRUE(SaveSafetensors(path, in, {{"format", "pt"}}).ok());
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->metadata().at("format"), "pt");
  EXPECT_EQ(reader->names().size(), in.size());
  for (const auto& [name, t] : in) {
    auto view = reader->Get(name);
    ASSERT_TRUE(view.ok()) << view.status();
    EXPECT_TRUE(SameBytes(*view, t)) << name;
    // The writer aligns every tensor, so all non-empty ones are views.
    if (t.numel() > 0) {
      EXPECT_TRUE(IsViewOf(*view, reader->file_bytes())) << name;
    }
    auto copy = reader->Get(name, /*copy=*/true);
    ASSERT_TRUE(copy.ok());
    EXPECT_TRUE(SameBytes(*copy, t)) << name;
    EXPECT_FALSE(IsViewOf(*copy, reader->file_bytes())) << name;
  }
  StMetadata md;
  auto all = LoadSafetensors(path, &md);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(md.at("format"), "pt");
  EXPECT_TRUE(SameBytes(all->at("bf16"), in.at("bf16")));
  EXPECT_EQ(reader->Get("nope").status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsTest, FileBytesMatchHandBuiltLayout) {
  // Independent of the writer: the expected file assembled by hand from the
  // format description (F32 before U8, header padded with spaces to 8).
  TensorMap m;
  m["b"] = at::tensor({1, 2, 3}, at::kByte);
  m["a"] = at::tensor({1.0f, -2.0f});
  auto bytes = SerializeSafetensors(m);
  ASSERT_TRUE(bytes.ok());
  std::string json = R"({"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
                     R"("b":{"data_offsets":[8,11],"dtype":"U8","shape":[3]}})";
  json.append((8 - json.size() % 8) % 8, ' ');
  const float floats[2] = {1.0f, -2.0f};
  std::string data(reinterpret_cast<const char*>(floats), 8);
  data += std::string("\1\2\3", 3);
  EXPECT_EQ(*bytes, StFile(json, data));
}

TEST(SafetensorsTest, MisalignedDataIsCopiedNotViewed) {
  // Header of odd length puts the F32 data at an odd file offset.
  std::string json =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_NE((8 + json.size()) % 4, 0u);
  const float floats[2] = {0.5f, 7.0f};
  std::string file =
      StFile(json, std::string(reinterpret_cast<const char*>(floats), 8));
  auto reader = SafetensorsReader::FromBytes(file);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto x = reader->Get("x");
  ASSERT_TRUE(x.ok());
  EXPECT_FALSE(IsViewOf(*x, reader->file_bytes()));
  EXPECT_FLOAT_EQ(x->data_ptr<float>()[0], 0.5f);
  EXPECT_FLOAT_EQ(x->data_ptr<float>()[1], 7.0f);
}

TEST(SafetensorsTest, ViewsOutliveReaderAndWritesNeverReachTheFile) {
  const std::string path = TempDir("cow") + "/m.safetensors";
  TensorMap in;
  in["w"] = at::arange(16, at::kFloat).reshape({4, 4});
  ASSERT_TRUE(SaveSafetensors(path, in).ok());
  const std::string before = ReadAll(path);
  at::Tensor w;
  {
    auto reader = SafetensorsReader::Open(path);
    ASSERT_TRUE(reader.ok());
    w = *reader->Get("w");
  }  // reader gone; the mapping stays alive through the view
  EXPECT_TRUE(at::equal(w, in["w"]));
  w.mul_(2);  // copy-on-write page; the file is untouched
  EXPECT_TRUE(at::equal(w, in["w"] * 2));
  EXPECT_EQ(ReadAll(path), before);
}

TEST(SafetensorsTest, NonContiguousAndNonCpuLayoutsAreSavedByValue) {
  TensorMap in;
  in["t"] = at::arange(12, at::kFloat).reshape({3, 4}).t();
  auto bytes = SerializeSafetensors(in);
  ASSERT_TRUE(bytes.ok());
  auto reader = SafetensorsReader::FromBytes(*bytes);
  ASSERT_TRUE(reader.ok());
  EXPECT_TRUE(at::equal(*reader->Get("t"), in["t"]));
}

TEST(SafetensorsTest, ErrorsNameTheFileAndTensor) {
  const std::string dir = TempDir("err");
  auto missing = SafetensorsReader::Open(dir + "/missing.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("missing.safetensors"));

  const std::string bad = dir + "/bad.safetensors";
  for (const MalformedStCase& c : MalformedStCases()) {
    WriteRaw(bad, c.bytes);
    auto r = SafetensorsReader::Open(bad);
    ASSERT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument)) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(bad + ": ")) << c.name;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.name;
  }

  WriteRaw(bad,
           StFile(R"({"u":{"dtype":"U16","shape":[1],"data_offsets":[0,2]}})",
                  "ab"));
  auto r = SafetensorsReader::Open(bad);
  ASSERT_TRUE(r.ok()) << r.status();  // valid file, dtype LibTorch lacks
  EXPECT_EQ(r->Get("u").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(r->Get("u").status().message(),
              HasSubstr("tensor 'u': dtype U16"));

  EXPECT_THAT(SafetensorsReader::Open(dir),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "not a regular file"));  // a directory
}

TEST(SafetensorsTest, SaveRejectsBadInputAndLeavesNothingBehind) {
  const std::string dir = TempDir("save_err");
  TensorMap complex;
  complex["c"] = at::zeros({2}, at::kComplexFloat);
  auto s = SaveSafetensors(dir + "/c.safetensors", complex);
  EXPECT_THAT(s.message(), HasSubstr("tensor 'c'"));
  TensorMap undefined;
  undefined["u"] = at::Tensor();
  EXPECT_THAT(SaveSafetensors(dir + "/u.safetensors", undefined).message(),
              HasSubstr("'u' is undefined"));
  TensorMap ok;
  ok["x"] = at::ones({2});
  EXPECT_THAT(SaveSafetensors(dir + "/no/such/dir/x.safetensors", ok),
              StatusIs(absl::StatusCode::kInternal,
                       "cannot create: No such file or directory"));
  EXPECT_TRUE(fs::is_empty(dir));
}

TEST(SafetensorsTest, SaveReplacesAtomicallyWithoutTempLeftovers) {
  const std::string dir = TempDir("replace");
  const std::string path = dir + "/m.safetensors";
  TensorMap a, b;
  a["x"] = at::ones({8});
  b["y"] = at::zeros({3}, at::kLong);
  ASSERT_TRUE(SaveSafetensors(path, a).ok());
  ASSERT_TRUE(SaveSafetensors(path, b).ok());
  auto loaded = LoadSafetensors(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->size(), 1u);
  EXPECT_TRUE(loaded->count("y"));
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace verl::ckpt
