// Runs the fuzz entry (parquet_fuzz.cc) over the malformed table, every
// truncation and every byte and bit flip of a small valid file, and byte
// flips of the independent fixtures, so CI exercises it without libFuzzer.
#include <cstddef>
#include <cstdint>
#include <string>

#include "gtest/gtest.h"
#include "verl/core/file_util.h"
#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_test_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace verl::rl::parquet {
namespace {

int RunEntry(const std::string& bytes) {
  return LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                                bytes.size());
}

bool Reads(const std::string& bytes) {
  auto r = ParquetReader::FromBytes(bytes);
  return r.ok() && r->ReadAll().ok();
}

TEST(ParquetFuzzTest, MalformedTable) {
  for (const testing::MalformedCase& c : testing::MalformedCases()) {
    EXPECT_EQ(RunEntry(c.bytes), 0) << c.name;
  }
}

TEST(ParquetFuzzTest, EveryTruncationFails) {
  const std::string file = testing::SmallParquetFile();
  EXPECT_TRUE(Reads(file));
  for (size_t n = 0; n < file.size(); ++n) {
    const std::string cut = file.substr(0, n);
    EXPECT_EQ(RunEntry(cut), 0);
    EXPECT_FALSE(Reads(cut)) << n;
  }
}

TEST(ParquetFuzzTest, EveryByteAndBitFlip) {
  const std::string file = testing::SmallParquetFile();
  int rejected = 0;
  for (size_t i = 0; i < file.size(); ++i) {
    for (int mask : {0xff, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80}) {
      std::string flipped = file;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      EXPECT_EQ(RunEntry(flipped), 0);
      rejected += !Reads(flipped);
    }
  }
  EXPECT_GT(rejected, static_cast<int>(file.size()));
}

TEST(ParquetFuzzTest, ByteFlipsOfIndependentFixtures) {
  for (const char* name : {"arrow_zstd_dict.parquet", "hyparquet_delta.parquet",
                           "arrow_uncompressed_delta.parquet"}) {
    auto file = core::ReadFile(testing::Testdata(name));
    ASSERT_TRUE(file.ok()) << file.status();
    for (size_t i = 0; i < file->size(); i += 13) {
      std::string flipped = *file;
      flipped[i] = static_cast<char>(flipped[i] ^ (0x5a + i));
      EXPECT_EQ(RunEntry(flipped), 0);
    }
  }
}

}  // namespace
}  // namespace verl::rl::parquet
