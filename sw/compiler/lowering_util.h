// Helpers shared by the step compilers (CnnTrainStep, DenseStackStep): UB arenas, DMA walks,
// linear copies and the seeded Glorot initializer.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "sw/compiler/program_builder.h"

namespace tessera::compiler::lowering {

inline uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// UB space of one phase: a bump allocator over [begin, end).
class UbArena {
 public:
  UbArena(uint64_t begin, uint64_t end, int n, const char* phase)
      : next_(begin), end_(end), align_(std::max<uint64_t>(4ull * n, 64)), phase_(phase) {}
  uint32_t take(uint64_t bytes) {
    next_ = (next_ + align_ - 1) / align_ * align_;
    const uint64_t at = next_;
    next_ += bytes;
    if (next_ > end_)
      throw std::invalid_argument(std::string("the ") + phase_ + " phase needs more UB than the " +
                                  std::to_string(end_) + "-byte unified buffer holds (" +
                                  std::to_string(next_) + " bytes); use a smaller batch or a " +
                                  "larger chip");
    return static_cast<uint32_t>(at);
  }
  uint64_t free() const {
    const uint64_t a = (next_ + align_ - 1) / align_ * align_;
    return a < end_ ? end_ - a : 0;
  }

 private:
  uint64_t next_, end_, align_;
  const char* phase_;
};

inline DmaWalk walk(isa::Space s, uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  DmaWalk w;
  w.space = s;
  w.base = base;
  w.loops = std::move(loops);
  return w;
}
inline DmaWalk hbm(uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  return walk(isa::Space::kHbm, base, std::move(loops));
}
inline DmaWalk ub(uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  return walk(isa::Space::kUb, base, std::move(loops));
}
// A contiguous copy of `count` elements of `e` bytes (split into loops of <= 65535).
inline void copy_linear(ProgramBuilder& b, isa::Space ss, uint64_t src, isa::Space ds, uint64_t dst,
                 uint64_t count, int e) {
  while (count) {
    uint64_t c0 = std::min<uint64_t>(count, 65535), c1 = 1;
    if (count > 65535) {
      c0 = 4096;
      c1 = std::min<uint64_t>(count / 4096, 65535);
    }
    const uint64_t n = c0 * c1;
    std::vector<std::pair<uint32_t, int32_t>> loops{{static_cast<uint32_t>(c0), e}};
    if (c1 > 1) loops.push_back({static_cast<uint32_t>(c1), static_cast<int32_t>(c0 * e)});
    b.dma_copy(walk(ss, src, loops), walk(ds, dst, loops), e);
    src += n * e;
    dst += n * e;
    count -= n;
  }
}

// splitmix64: a fixed generator (the same numbers on every platform and standard library).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline std::vector<float> glorot(uint64_t& state, size_t count, double fan_in, double fan_out) {
  const double limit = std::sqrt(6.0 / (fan_in + fan_out));
  std::vector<float> v(count);
  for (auto& x : v) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    x = static_cast<float>((2.0 * u - 1.0) * limit);
  }
  return v;
}

}  // namespace tessera::compiler::lowering
