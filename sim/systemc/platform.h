// Platform: the ready-made virtual platform — a clock (approximately timed), the chip
// (TesseraChip), its interrupt signal and a HostCpu running host software against it, socket to
// socket. run_platform() builds it, simulates until the software returns and rethrows anything
// it threw. The SystemC kernel cannot be restarted: one platform run per process.
#pragma once

#include <memory>

#include "sim/systemc/host_cpu.h"
#include "sim/systemc/tessera_chip.h"

namespace tessera::systemc {

class Platform : public sc_core::sc_module {
 public:
  Platform(sc_core::sc_module_name name, const ChipConfig& config, HostCpu::Software software);

  std::unique_ptr<sc_core::sc_clock> clock;  // approximately timed only
  sc_core::sc_signal<bool> irq;
  TesseraChip chip;
  HostCpu cpu;
};

struct PlatformRun {
  sc_core::sc_time sim_time;  // SystemC time when the software returned
  uint64_t chip_cycles = 0;   // chip cycles simulated in all (idle ones included)
};

PlatformRun run_platform(const ChipConfig& config, HostCpu::Software software);

}  // namespace tessera::systemc
