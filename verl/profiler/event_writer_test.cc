#include "verl/profiler/event_writer.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>

#include "gtest/gtest.h"
#include "verl/profiler/crc32c.h"
#include "verl/profiler/tensorboard.pb.h"

namespace verl::profiler {
namespace {

// Bit-at-a-time CRC-32C: an independent check of the table implementation.
uint32_t SlowCrc32c(const std::string& s) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);  // the standard check value
  EXPECT_EQ(Crc32c("", 0), 0u);
  std::string big(1000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  EXPECT_EQ(Crc32c(big.data(), big.size()), SlowCrc32c(big));
  // Incremental use equals one pass.
  EXPECT_EQ(Crc32c(big.data() + 10, big.size() - 10, Crc32c(big.data(), 10)),
            Crc32c(big.data(), big.size()));
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/tb";
}

TEST(EventWriterTest, RecordsVerifyAndDecodeToScalars) {
  auto writer = EventWriter::Open(TempDir());
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(
      (*writer)
          ->WriteScalars(1, {{"actor/pg_loss", 0.5}, {"critic/score/mean", 2}})
          .ok());
  ASSERT_TRUE((*writer)->WriteScalars(2, {{"actor/pg_loss", -1.25}}).ok());
  const std::string path = (*writer)->path();
  EXPECT_NE(path.find("/events.out.tfevents."), std::string::npos);

  // Independent framing check: lengths little-endian, masked CRCs via
  // SlowCrc32c.
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  size_t pos = 0;
  int count = 0;
  while (pos < bytes.size()) {
    uint64_t len = 0;
    for (int i = 0; i < 8; ++i)
      len |= uint64_t(uint8_t(bytes[pos + i])) << (8 * i);
    uint32_t len_crc = 0, data_crc = 0;
    for (int i = 0; i < 4; ++i)
      len_crc |= uint32_t(uint8_t(bytes[pos + 8 + i])) << (8 * i);
    for (int i = 0; i < 4; ++i) {
      data_crc |= uint32_t(uint8_t(bytes[pos + 12 + len + i])) << (8 * i);
    }
    EXPECT_EQ(len_crc, MaskCrc(SlowCrc32c(bytes.substr(pos, 8))));
    EXPECT_EQ(data_crc, MaskCrc(SlowCrc32c(bytes.substr(pos + 12, len))));
    pos += 12 + len + 4;
    ++count;
  }
  EXPECT_EQ(count, 3);

  auto records = ReadRecords(path);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 3u);
  tensorboard::Event e0, e1, e2;
  ASSERT_TRUE(e0.ParseFromString((*records)[0]));
  EXPECT_EQ(e0.file_version(), "brain.Event:2");
  ASSERT_TRUE(e1.ParseFromString((*records)[1]));
  EXPECT_EQ(e1.step(), 1);
  ASSERT_EQ(e1.summary().value_size(), 2);
  EXPECT_EQ(e1.summary().value(0).tag(), "actor/pg_loss");
  EXPECT_FLOAT_EQ(e1.summary().value(0).simple_value(), 0.5f);
  EXPECT_FLOAT_EQ(e1.summary().value(1).simple_value(), 2.0f);
  ASSERT_TRUE(e2.ParseFromString((*records)[2]));
  EXPECT_FLOAT_EQ(e2.summary().value(0).simple_value(), -1.25f);
}

TEST(EventWriterTest, CorruptionIsDetected) {
  auto writer = EventWriter::Open(TempDir() + "2");
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->WriteScalars(7, {{"x", 1}}).ok());
  const std::string path = (*writer)->path();
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  for (size_t cut : {size_t{5}, bytes.size() - 1}) {
    std::ofstream(path + ".cut", std::ios::binary) << bytes.substr(0, cut);
    EXPECT_EQ(ReadRecords(path + ".cut").status().code(),
              absl::StatusCode::kDataLoss);
  }
  std::string flipped = bytes;
  flipped[bytes.size() - 6] ^= 0x40;
  std::ofstream(path + ".flip", std::ios::binary) << flipped;
  EXPECT_EQ(ReadRecords(path + ".flip").status().code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace verl::profiler
