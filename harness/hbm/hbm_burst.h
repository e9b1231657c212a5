// The HBM2 data units every HBM harness piece shares: a beat (one data-bus cycle of a 64-bit
// pseudo-channel at double data rate) and a burst (BL4: two beats, the unit of every request).
#pragma once

#include <array>
#include <cstdint>

namespace tessera::hbm {

constexpr int kBeatBytes = 16;
constexpr int kBurstBytes = 32;
using Beat = std::array<uint8_t, kBeatBytes>;
using Burst = std::array<uint8_t, kBurstBytes>;

}  // namespace tessera::hbm
