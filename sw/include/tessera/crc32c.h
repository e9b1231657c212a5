// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord files and of
// Tessera checkpoints, and TFRecord's masked form of it. Table-driven, one byte a step.
// crc32c("123456789") == 0xE3069283; a running CRC continues: crc32c(b, m, crc32c(a, n)) is the
// CRC of a followed by b.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera::runlog {

uint32_t crc32c(const void* data, size_t n, uint32_t crc = 0);

// TFRecord stores CRCs masked, so that a CRC of data that itself holds CRCs stays strong.
constexpr uint32_t mask_crc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }
constexpr uint32_t unmask_crc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}
inline uint32_t masked_crc32c(const void* data, size_t n) { return mask_crc32c(crc32c(data, n)); }

}  // namespace tessera::runlog
