#include "verl/ckpt/safetensors_header.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "verl/ckpt/safetensors_test_util.h"
#include "verl/core/test_util.h"

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;

using ::testing::HasSubstr;

TEST(SafetensorsHeaderTest, DtypeNamesRoundTripAndSizes) {
  for (const char* name :
       {"BOOL", "U8", "I8", "F8_E4M3", "F8_E5M2", "I16", "U16", "F16", "BF16",
        "I32", "U32", "F32", "I64", "U64", "F64"}) {
    auto d = ParseStDtype(name);
    ASSERT_TRUE(d.ok()) << name;
    EXPECT_STREQ(StDtypeName(*d), name);
  }
  EXPECT_EQ(StDtypeSize(StDtype::kBool), 1u);
  EXPECT_EQ(StDtypeSize(StDtype::kBF16), 2u);
  EXPECT_EQ(StDtypeSize(StDtype::kI32), 4u);
  EXPECT_EQ(StDtypeSize(StDtype::kF64), 8u);
  EXPECT_THAT(ParseStDtype("F4").status().message(),
              HasSubstr("unknown dtype"));
}

TEST(SafetensorsHeaderTest, ParsesValidFileWithMetadataAndPadding) {
  // Header right-padded with spaces; tensors listed out of offset order.
  std::string json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("w":{"dtype":"BF16","shape":[2,1],"data_offsets":[8,12]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[0,8]},)"
      R"("s":{"dtype":"F32","shape":[],"data_offsets":[12,16]},)"
      R"("e":{"dtype":"F16","shape":[0,3],"data_offsets":[16,16]}}   )";
  std::string file = StFile(json, std::string(16, '\1'));
  auto h = ParseStHeader(file, "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->metadata.at("format"), "pt");
  EXPECT_EQ(h->data_start, 8 + json.size());
  EXPECT_EQ(h->data_size, 16u);
  ASSERT_EQ(h->tensors.size(), 4u);
  EXPECT_EQ(h->tensors[0].name, "b");  // sorted by offset
  EXPECT_EQ(h->tensors[1].name, "w");
  EXPECT_EQ(h->tensors[1].dtype, StDtype::kBF16);
  EXPECT_EQ(h->tensors[1].shape, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(h->tensors[2].name, "s");
  EXPECT_TRUE(h->tensors[2].shape.empty());
  EXPECT_EQ(h->tensors[3].name, "e");
  EXPECT_EQ(h->tensors[3].num_bytes(), 0u);
}

TEST(SafetensorsHeaderTest, EmptyHeaderIsValid) {
  auto h = ParseStHeader(StFile("{}", ""), "mem");
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->tensors.empty());
}

TEST(SafetensorsHeaderTest, MalformedTableGivesExpectedErrors) {
  std::vector<MalformedStCase> cases = MalformedStCases();
  ASSERT_GE(cases.size(), 15u);
  for (const MalformedStCase& c : cases) {
    auto h = ParseStHeader(c.bytes, "bad.safetensors");
    ASSERT_THAT(h,
                StatusIs(absl::StatusCode::kInvalidArgument, "bad.safetensors"))
        << c.name;
    EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(h.status().message(), HasSubstr("bad.safetensors: ")) << c.name;
    EXPECT_THAT(h.status().message(), HasSubstr(c.error)) << c.name;
  }
}

TEST(SafetensorsHeaderTest, LayoutOrdersBySizeThenNameAndAligns) {
  std::vector<StTensorInfo> t = {
      {"z", StDtype::kU8, {3}},  {"a", StDtype::kF16, {3}},
      {"m", StDtype::kF64, {1}}, {"b", StDtype::kF32, {2, 2}},
      {"c", StDtype::kF32, {1}},
  };
  auto size = LayoutStTensors(&t);
  ASSERT_TRUE(size.ok()) << size.status();
  // Expected by hand: F64 m [0,8), F32 b [8,24), F32 c [24,28),
  // F16 a [28,34), U8 z [34,37).
  std::vector<std::string> names;
  for (const auto& x : t) names.push_back(x.name);
  EXPECT_EQ(names, (std::vector<std::string>{"m", "b", "c", "a", "z"}));
  EXPECT_EQ(*size, 37u);
  EXPECT_EQ(t[1].begin, 8u);
  EXPECT_EQ(t[1].end, 24u);
  EXPECT_EQ(t[3].begin, 28u);
  EXPECT_EQ(t[4].end, 37u);
  for (const auto& x : t) EXPECT_EQ(x.begin % StDtypeSize(x.dtype), 0u);
}

TEST(SafetensorsHeaderTest, LayoutRejectsDuplicatesReservedAndOverflow) {
  std::vector<StTensorInfo> dup = {{"a", StDtype::kF32, {1}},
                                   {"a", StDtype::kF16, {1}}};
  EXPECT_THAT(LayoutStTensors(&dup).status().message(),
              HasSubstr("duplicate tensor name 'a'"));
  std::vector<StTensorInfo> reserved = {{"__metadata__", StDtype::kF32, {1}}};
  EXPECT_THAT(LayoutStTensors(&reserved).status().message(),
              HasSubstr("reserved"));
  std::vector<StTensorInfo> neg = {{"n", StDtype::kF32, {-2}}};
  EXPECT_THAT(LayoutStTensors(&neg).status().message(),
              HasSubstr("negative dimension"));
  std::vector<StTensorInfo> big = {
      {"o", StDtype::kF32, {int64_t{1} << 62, int64_t{1} << 62}}};
  EXPECT_THAT(LayoutStTensors(&big).status().message(), HasSubstr("overflows"));
}

TEST(SafetensorsHeaderTest, SerializeMatchesReferenceFormatAndReparses) {
  std::vector<StTensorInfo> t = {{"w", StDtype::kF32, {2}},
                                 {"b", StDtype::kU8, {3}}};
  auto size = LayoutStTensors(&t);
  ASSERT_TRUE(size.ok());
  auto header = SerializeStHeader(t, {{"format", "pt"}});
  ASSERT_TRUE(header.ok()) << header.status();
  // Length prefix and space padding to a multiple of 8.
  ASSERT_EQ((header->size() - 8) % 8, 0u);
  std::string expected_json =
      R"({"__metadata__":{"format":"pt"},)"
      R"("b":{"data_offsets":[8,11],"dtype":"U8","shape":[3]},)"
      R"("w":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})";
  std::string json = header->substr(8);
  EXPECT_EQ(json.substr(0, expected_json.size()), expected_json);
  EXPECT_EQ(json.find_first_not_of(' ', expected_json.size()),
            std::string::npos);
  EXPECT_EQ(static_cast<uint8_t>((*header)[0]), json.size());
  auto parsed = ParseStHeader(*header + std::string(*size, '\0'), "mem");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->tensors.size(), 2u);
  EXPECT_EQ(parsed->data_start % 8, 0u);
}

TEST(SafetensorsHeaderTest, SerializeRejectsInvalidUtf8Names) {
  std::vector<StTensorInfo> t = {{"bad\xff", StDtype::kF32, {}}};
  ASSERT_TRUE(LayoutStTensors(&t).ok());
  EXPECT_THAT(SerializeStHeader(t, {}).status().message(),
              HasSubstr("not valid UTF-8"));
}

}  // namespace
}  // namespace verl::ckpt
