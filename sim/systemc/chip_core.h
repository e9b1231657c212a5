// ChipCore: the verilated chip on the HBM2 device model (harness/chip/chip_sim.h's ChipSim) behind
// a small virtual interface, so the SystemC module does not depend on which Verilator model (N = 4
// or N = 16, sim/CMakeLists.txt) it wraps. Every cycle runs through ChipSim exactly as in the
// plain harness: the same host-port protocol, the same device model and timing checker.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/driver.h"

namespace tessera::systemc {

class ChipCore {
 public:
  // One of driver::rtl_configurations(); throws std::invalid_argument otherwise. `wave_name`:
  // the FST dump's name when WAVES=1 (harness/sim_ctrl.h).
  static std::unique_ptr<ChipCore> make(const driver::DeviceConfig& config,
                                        const std::string& wave_name = "");
  virtual ~ChipCore() = default;

  virtual void step() = 0;  // one clock cycle, host ports idle
  virtual uint32_t csr_read(uint32_t offset) = 0;
  virtual void csr_write(uint32_t offset, uint32_t value) = 0;
  // Through the host port: 32-byte aligned spans; `enables` (one per byte) masks a write.
  virtual void hbm_write(uint64_t addr, const std::vector<uint8_t>& bytes,
                         const std::vector<uint8_t>* enables) = 0;
  virtual std::vector<uint8_t> hbm_read(uint64_t addr, size_t bytes) = 0;
  // Backdoor into the device model's storage: no cycles, no controller (debug transport).
  virtual uint8_t peek(uint64_t addr) = 0;
  virtual void poke(uint64_t addr, uint8_t value) = 0;

  virtual uint64_t cycle() const = 0;  // clock cycles run since construction (reset included)
  virtual bool irq() = 0;              // the chip's irq_o
  // Idle cycles to a reproducible doorbell point (ChipSim::idle_to_doorbell_phase).
  virtual void idle_to_doorbell_phase() = 0;
  // Called at the start of every cycle (ChipSim::set_cycle_gate).
  virtual void set_cycle_gate(std::function<void()> gate) = 0;
};

}  // namespace tessera::systemc
