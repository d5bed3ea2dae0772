// File: verl/profiler/crc32c.h
//
// CRC-32C (Castagnoli), as TFRecord / TensorBoard event files require.
// Debian's Abseil predates absl::crc32c, hence this small table version.
#ifndef VERL_PROFILER_CRC32C_H_
#define VERL_PROFILER_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace verl::profiler {

// CRC-32C of `n` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t Crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord's masked CRC: rotate right by 15 and add 0xa282ead8.
inline uint32_t MaskCrc(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace verl::profiler

#endif  // VERL_PROFILER_CRC32C_H_
