// SramPortModel: a C++ model of an SRAM behind a grant, for testing a master of the buffer's
// ports (tpu_dma's sram_* signals): a byte array, registered read (data the cycle after the
// granted read; random junk otherwise), byte-masked writes, random grants. Throws on an address
// beyond its size. Per cycle: drive() gives the grants and read data, edge() takes the master's
// requests at the rising edge. put_bytes / get_bytes move a 32-byte word in and out of a
// verilated 256-bit port.
#pragma once

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace tessera::sram {

constexpr int kWordBytes = 32;

// The SRAM behind a grant: byte array, registered read (data the cycle after the granted read;
// junk otherwise), byte-masked writes, random grants. Throws on an address beyond its size.
class SramPortModel {
 public:
  SramPortModel(uint64_t bytes, uint64_t seed) : mem_(bytes), rng_(seed) {
    for (auto& b : mem_) b = static_cast<uint8_t>(rng_());
  }
  struct Out {
    bool rgnt = false, wgnt = false;
    std::array<uint8_t, kWordBytes> rdata = {};
  };
  Out drive() {
    out_.rgnt = static_cast<int>(rng_() % 100) < rgnt_pct;
    out_.wgnt = static_cast<int>(rng_() % 100) < wgnt_pct;
    if (read_pending_) {
      out_.rdata = read_word_;
    } else {
      for (auto& b : out_.rdata) b = static_cast<uint8_t>(rng_());
    }
    return out_;
  }
  void edge(bool rreq, uint64_t raddr, bool wreq, uint64_t waddr, uint32_t wmask,
            const std::array<uint8_t, kWordBytes>& wdata, uint64_t cycle) {
    const uint64_t words = mem_.size() / kWordBytes;
    read_pending_ = rreq && out_.rgnt;
    if (read_pending_) {  // read before write
      if (raddr >= words) throw std::runtime_error("SRAM read beyond the array at cycle " +
                                                   std::to_string(cycle));
      for (int k = 0; k < kWordBytes; ++k) read_word_[k] = mem_[raddr * kWordBytes + k];
      ++reads;
    }
    if (wreq && out_.wgnt) {
      if (waddr >= words) throw std::runtime_error("SRAM write beyond the array at cycle " +
                                                   std::to_string(cycle));
      for (int k = 0; k < kWordBytes; ++k) {
        if ((wmask >> k) & 1u) mem_[waddr * kWordBytes + k] = wdata[k];
      }
      ++writes;
    }
  }
  void reset_port() { read_pending_ = false; }

  std::vector<uint8_t> mem_;
  int rgnt_pct = 100, wgnt_pct = 100;
  uint64_t reads = 0, writes = 0;

 private:
  std::mt19937_64 rng_;
  Out out_;
  bool read_pending_ = false;
  std::array<uint8_t, kWordBytes> read_word_ = {};
};

template <class Wide>
void put_bytes(Wide& port, const std::array<uint8_t, kWordBytes>& bytes) {
  for (int w = 0; w < kWordBytes / 4; ++w) {
    port[w] = uint32_t(bytes[4 * w]) | uint32_t(bytes[4 * w + 1]) << 8 |
              uint32_t(bytes[4 * w + 2]) << 16 | uint32_t(bytes[4 * w + 3]) << 24;
  }
}
template <class Wide>
std::array<uint8_t, kWordBytes> get_bytes(const Wide& port) {
  std::array<uint8_t, kWordBytes> b;
  for (int k = 0; k < kWordBytes; ++k) b[k] = static_cast<uint8_t>(port[k / 4] >> (8 * (k % 4)));
  return b;
}

}  // namespace tessera::sram
