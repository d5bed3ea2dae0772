// Decoding against PIL's convert("RGB") of the same files (testdata/decode,
// written by testing/gen_image_golden.py), and the malformed-input table:
// every bad, truncated or oversized input is a Status with a clear message.
#include "verl/models/vlm/image.h"

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "verl/core/file_util.h"
#include "verl/core/test_util.h"

namespace verl::models::vlm {
namespace {

using ::verl::core::testing::StatusIs;

constexpr char kDir[] = "verl/models/vlm/testdata/";

std::string Read(const std::string& rel) {
  auto bytes = core::ReadFile(kDir + rel);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : "";
}

std::vector<std::string> DecodeCases() {
  auto golden = nlohmann::json::parse(Read("image_golden.json"));
  return golden["decode"].get<std::vector<std::string>>();
}

TEST(ImageTest, DecodesAsPil) {
  const std::vector<std::string> cases = DecodeCases();
  ASSERT_EQ(cases.size(), 12u);
  for (const std::string& name : cases) {
    auto image = ReadImageFile(std::string(kDir) + "decode/" + name);
    ASSERT_TRUE(image.ok()) << image.status();
    const std::string want = Read("decode/" + name + ".rgb");
    ASSERT_EQ(image->rgb.size(), want.size()) << name;
    EXPECT_EQ(std::string(image->rgb.begin(), image->rgb.end()), want) << name;
    EXPECT_EQ(image->width * image->height * 3,
              static_cast<int64_t>(want.size()));
  }
}

TEST(ImageTest, PngRoundTrip) {
  Image image;
  image.width = 5;
  image.height = 3;
  for (int i = 0; i < 45; ++i) image.rgb.push_back(static_cast<uint8_t>(i * 7));
  auto png = EncodePng(image);
  ASSERT_TRUE(png.ok()) << png.status();
  EXPECT_EQ(SniffImageFormat(*png), "png");
  auto back = DecodeImage(*png, "roundtrip");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 5);
  EXPECT_EQ(back->height, 3);
  EXPECT_EQ(back->rgb, image.rgb);
  image.rgb.pop_back();
  EXPECT_THAT(EncodePng(image),
              StatusIs(absl::StatusCode::kInvalidArgument, "44 bytes"));
}

// A PNG whose IHDR claims width x height (valid CRC), followed by the start
// of an IDAT chunk (where png_read_info stops).
std::string PngHeader(uint32_t width, uint32_t height) {
  std::string ihdr = "IHDR";
  for (uint32_t v : {width, height}) {
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<char>(v >> s));
  }
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  const uint32_t crc =
      crc32(0, reinterpret_cast<const Bytef*>(ihdr.data()), ihdr.size());
  std::string out = "\x89PNG\r\n\x1a\n";
  out += std::string("\x00\x00\x00\x0d", 4) + ihdr;
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<char>(crc >> s));
  return out + std::string("\x00\x00\x00\x10IDAT", 8);
}

// A baseline JPEG whose SOF0 claims width x height.
std::string JpegWithSize(const std::string& jpeg, uint16_t width,
                         uint16_t height) {
  std::string out = jpeg;
  const size_t sof = out.find("\xff\xc0");
  EXPECT_NE(sof, std::string::npos);
  out[sof + 5] = static_cast<char>(height >> 8);
  out[sof + 6] = static_cast<char>(height);
  out[sof + 7] = static_cast<char>(width >> 8);
  out[sof + 8] = static_cast<char>(width);
  return out;
}

TEST(ImageTest, MalformedInputs) {
  const std::string png = Read("decode/rgb.png");
  const std::string jpg = Read("decode/baseline.jpg");
  std::string bad_crc = png;
  bad_crc[29] ^= 0x01;  // last byte of the IHDR CRC
  std::string bad_idat = png;
  bad_idat[bad_idat.size() - 20] ^= 0x5a;  // inside the IDAT stream / CRC
  struct Case {
    const char* name;
    std::string bytes;
    absl::StatusCode code;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"empty", "", absl::StatusCode::kInvalidArgument, "not a PNG or JPEG"},
      {"text", "hello world", absl::StatusCode::kInvalidArgument,
       "starting with \"hello wo\""},
      {"png signature only", png.substr(0, 8),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated PNG"},
      {"png cut in IHDR", png.substr(0, 20), absl::StatusCode::kInvalidArgument,
       "unexpected end of file"},
      {"png cut in IDAT", png.substr(0, png.size() / 2),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated PNG"},
      {"png without IEND", png.substr(0, png.size() - 12),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated PNG"},
      {"png IHDR CRC", bad_crc, absl::StatusCode::kInvalidArgument, "CRC"},
      {"png IDAT damaged", bad_idat, absl::StatusCode::kInvalidArgument,
       "corrupt or truncated PNG"},
      {"png zero width", PngHeader(0, 5), absl::StatusCode::kInvalidArgument,
       "corrupt or truncated PNG"},
      {"png huge", PngHeader(60000, 60000),
       absl::StatusCode::kResourceExhausted, "60000x60000 pixels exceeds"},
      {"png too wide", PngHeader(1 << 20, 1),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated PNG"},
      {"jpeg SOI only", jpg.substr(0, 3), absl::StatusCode::kInvalidArgument,
       "corrupt or truncated JPEG"},
      {"jpeg cut in header", jpg.substr(0, 100),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated JPEG"},
      {"jpeg cut in scan", jpg.substr(0, jpg.size() - 40),
       absl::StatusCode::kInvalidArgument, "Premature end"},
      {"jpeg huge", JpegWithSize(jpg, 65000, 65000),
       absl::StatusCode::kResourceExhausted, "65000x65000 pixels exceeds"},
      {"jpeg zero height", JpegWithSize(jpg, 37, 0),
       absl::StatusCode::kInvalidArgument, "corrupt or truncated JPEG"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(DecodeImage(c.bytes, "row 7"), StatusIs(c.code, c.message))
        << c.name;
    EXPECT_THAT(DecodeImage(c.bytes, "row 7"), StatusIs(c.code, "row 7: "))
        << c.name;
  }
  DecodeLimits small;
  small.max_pixels = 100;
  EXPECT_THAT(DecodeImage(png, "x", small),
              StatusIs(absl::StatusCode::kResourceExhausted, "13x9"));
  EXPECT_THAT(DecodePng(jpg, "x"),
              StatusIs(absl::StatusCode::kInvalidArgument, "no PNG signature"));
  EXPECT_THAT(ReadImageFile("/nonexistent/a.png"),
              StatusIs(absl::StatusCode::kNotFound, "/nonexistent/a.png"));
}

}  // namespace
}  // namespace verl::models::vlm
