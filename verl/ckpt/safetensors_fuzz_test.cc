// Runs the fuzz entry (safetensors_fuzz.cc) over malformed inputs, every
// truncation and every byte and bit flip of a small valid file, so CI
// exercises it without clang/libFuzzer.
#include <ATen/TensorOperators.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/tensor.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "verl/ckpt/safetensors.h"
#include "verl/ckpt/safetensors_test_util.h"
#include "verl/core/test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace verl::ckpt {
namespace {

using ::verl::core::testing::StatusIs;

int RunEntry(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                bytes.size());
}

std::string SmallValidFile() {
  TensorMap m;
  m["w"] = at::arange(6, at::kFloat).reshape({2, 3});
  m["h"] = at::arange(3, at::kFloat).to(at::kBFloat16);
  m["i"] = at::tensor({-1, 2}, at::kLong);
  m["m"] = at::tensor({1, 0, 1}, at::kByte).to(at::kBool);
  m["s"] = at::scalar_tensor(1.5, at::kDouble);
  m["z"] = at::empty({0}, at::kChar);
  auto bytes = SerializeSafetensors(m, {{"format", "pt"}});
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

TEST(SafetensorsFuzzTest, MalformedTable) {
  for (const MalformedStCase& c : MalformedStCases()) {
    EXPECT_EQ(RunEntry(c.bytes), 0) << c.name;
  }
}

TEST(SafetensorsFuzzTest, ValidFileAndEveryTruncationFails) {
  const std::string file = SmallValidFile();
  ASSERT_TRUE(SafetensorsReader::FromBytes(file).ok());
  EXPECT_EQ(RunEntry(file), 0);
  for (size_t n = 0; n < file.size(); ++n) {
    const std::string cut = file.substr(0, n);
    EXPECT_EQ(RunEntry(cut), 0);
    // The data buffer must be covered exactly, so no prefix is valid.
    EXPECT_THAT(SafetensorsReader::FromBytes(cut),
                StatusIs(absl::StatusCode::kInvalidArgument, "<memory>"))
        << n;
  }
}

TEST(SafetensorsFuzzTest, EveryByteAndBitFlip) {
  const std::string file = SmallValidFile();
  int rejected = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (int mask : {0xff, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80}) {
      std::string flipped = file;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      EXPECT_EQ(RunEntry(flipped), 0);
      rejected += !SafetensorsReader::FromBytes(flipped).ok();
    }
  }
  // Flips in the header are mostly rejected; flips in data are not checked.
  EXPECT_GT(rejected, 0);
}

TEST(SafetensorsFuzzTest, AppendedAndDuplicatedBytes) {
  const std::string file = SmallValidFile();
  EXPECT_EQ(RunEntry(file + "x"), 0);
  EXPECT_EQ(RunEntry(file + file), 0);
  EXPECT_THAT(
      SafetensorsReader::FromBytes(file + "x"),
      StatusIs(absl::StatusCode::kInvalidArgument,
               "<memory>: data buffer has 1 trailing bytes not covered by"));
}

}  // namespace
}  // namespace verl::ckpt
