// Runs the fuzz entry (image_fuzz.cc) over every truncation and byte flips of
// small valid PNG and JPEG files, so CI exercises it without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/models/vlm/image.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace verl::models::vlm {
namespace {

int RunEntry(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                bytes.size());
}

class ImageFuzzTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ImageFuzzTest, TruncationsAndFlips) {
  auto file = core::ReadFile(std::string("verl/models/vlm/testdata/decode/") +
                             GetParam());
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_TRUE(DecodeImage(*file, "valid").ok());
  int rejected = 0;
  for (size_t n = 0; n < file->size(); ++n) {
    const std::string cut = file->substr(0, n);
    EXPECT_EQ(RunEntry(cut), 0);
    rejected += !DecodeImage(cut, "cut").ok();
  }
  // Every proper prefix lacks the end marker (PNG IEND / JPEG EOI).
  EXPECT_EQ(rejected, static_cast<int>(file->size()));
  for (size_t i = 0; i < file->size(); ++i) {
    for (int mask : {0xff, 0x01, 0x10, 0x80}) {
      std::string flipped = *file;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      EXPECT_EQ(RunEntry(flipped), 0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Files, ImageFuzzTest,
                         ::testing::Values("rgb.png", "interlaced.png",
                                           "palette.png", "baseline.jpg",
                                           "progressive.jpg", "gray.jpg"));

}  // namespace
}  // namespace verl::models::vlm
