// File: verl/rl/data/parquet/parquet_fuzz.cc
//
// libFuzzer entry for the Parquet reader. Any input must either be rejected
// with a Status or read completely; rows that read must write back (project
// writer) into a file that reads to the same number of rows. A crash,
// sanitizer report or CHECK failure is a finding. parquet_fuzz_test runs
// this entry over the malformed table, truncations and byte flips without
// libFuzzer; parquet_fuzz.sh builds the real fuzzer with clang.
#include <glog/logging.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "verl/rl/data/parquet/parquet_reader.h"
#include "verl/rl/data/parquet/parquet_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using verl::rl::parquet::ParquetReader;
  auto reader = ParquetReader::FromBytes(
      std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  if (!reader.ok()) return 0;
  auto rows = reader->ReadAll();
  if (!rows.ok() || rows->empty()) return 0;
  // Rows a file yields may still be unwritable (e.g. an always-empty struct).
  auto bytes = verl::rl::parquet::SerializeParquet(*rows);
  if (!bytes.ok()) return 0;
  auto again = ParquetReader::FromBytes(*bytes, "rewritten");
  CHECK(again.ok()) << again.status();
  auto back = again->ReadAll();
  CHECK(back.ok()) << back.status();
  CHECK_EQ(back->size(), rows->size());
  return 0;
}
