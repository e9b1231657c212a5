// Element access to Verilator's packed-array ports: a SystemVerilog `logic [W-1:0] [N-1:0] p`
// port is one integer (CData .. QData) up to 64 bits and a VlWide word array above that.
// put_elem / get_elem read and write element i of width W (W divides 32 or is 32) either way.
#pragma once

#include <verilated.h>

#include <cstdint>
#include <type_traits>

namespace tessera {

template <int W, class Port>
inline void put_elem(Port& port, int i, uint32_t value) {
  static_assert(W == 8 || W == 16 || W == 32, "element width");
  const uint64_t mask = (W == 32) ? 0xFFFFFFFFull : ((1ull << W) - 1);
  if constexpr (std::is_integral_v<Port>) {
    const int lsb = i * W;
    port = static_cast<Port>((static_cast<uint64_t>(port) & ~(mask << lsb)) |
                             ((static_cast<uint64_t>(value) & mask) << lsb));
  } else {
    const int bit = i * W, word = bit / 32, lsb = bit % 32;
    const uint32_t m = static_cast<uint32_t>(mask << lsb);
    port[word] = (port[word] & ~m) | ((value << lsb) & m);
  }
}

template <int W, class Port>
inline uint32_t get_elem(const Port& port, int i) {
  const uint64_t mask = (W == 32) ? 0xFFFFFFFFull : ((1ull << W) - 1);
  if constexpr (std::is_integral_v<Port>) {
    return static_cast<uint32_t>((static_cast<uint64_t>(port) >> (i * W)) & mask);
  } else {
    const int bit = i * W, word = bit / 32, lsb = bit % 32;
    return static_cast<uint32_t>((port[word] >> lsb) & mask);
  }
}

// Writes `width` (<= 64) bits of `value` at bit `lsb` of a port of any width, bit by bit: for
// fields that do not sit on word boundaries (descriptor strides, say). Not for hot loops.
template <class Port>
inline void put_bits(Port& port, int lsb, int width, uint64_t value) {
  for (int i = 0; i < width; ++i) {
    const int bit = lsb + i;
    const uint64_t v = (value >> i) & 1u;
    if constexpr (std::is_integral_v<Port>) {
      port = static_cast<Port>((static_cast<uint64_t>(port) & ~(1ull << bit)) | (v << bit));
    } else {
      port[bit / 32] =
          (port[bit / 32] & ~(1u << (bit % 32))) | (static_cast<uint32_t>(v) << (bit % 32));
    }
  }
}

}  // namespace tessera
