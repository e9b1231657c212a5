// The chip as the host sees it: one shape type for the compiler, the functional model, the
// driver and the tests, with every number from build/generated/tessera/chip_params.h (generated
// from the RTL packages: rtl/pkg/tpu_pkg.sv is the one source of truth; docs/architecture.md).
#pragma once

#include <cstdint>

#include "tessera/chip_params.h"

namespace tessera {

// The machine parameters a program is compiled for and a chip is built with (docs/isa.md).
struct ChipShape {
  int n = static_cast<int>(chip_params::CHIP_N);   // MXU size = VPU lanes
  uint64_t ub_bytes = chip_params::CHIP_UB_BYTES;  // unified buffer
  uint32_t acc_rows = chip_params::CHIP_ACC_ROWS;  // accumulator rows of n fp32
  int channels = 1;  // HBM pseudo-channels of chip_params::HBM_PC_BYTES each

  uint64_t hbm_bytes() const { return static_cast<uint64_t>(channels) * chip_params::HBM_PC_BYTES; }
  // The same chip: every field equal.
  bool operator==(const ChipShape& o) const {
    return n == o.n && ub_bytes == o.ub_bytes && acc_rows == o.acc_rows && channels == o.channels;
  }
  bool operator!=(const ChipShape& o) const { return !(*this == o); }
};

// The full chip (tpu_top's defaults; the N = 16 Verilator builds).
inline constexpr ChipShape kFullChip{};
// The small chip of the unit and chip tests (the N = 4 Verilator builds).
inline constexpr ChipShape kSmallChip{static_cast<int>(chip_params::SMALL_N),
                                      chip_params::SMALL_UB_BYTES, chip_params::SMALL_ACC_ROWS, 1};
// The functional backend's chip for an array size no Verilator build has.
inline constexpr ChipShape large_chip(int n) {
  return ChipShape{n, chip_params::LARGE_UB_BYTES, chip_params::LARGE_ACC_ROWS, 1};
}

}  // namespace tessera
