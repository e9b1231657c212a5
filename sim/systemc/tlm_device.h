// TlmDevice: the host driver (tessera/driver.h) with TLM-2.0 as its transport — the same
// Device interface, so the same driver code, programs and compiled training step run through
// the SystemC platform. Every HBM copy is one blocking transaction on the HBM socket, every CSR
// access one 4-byte transaction on the CSR socket; run() writes PROG_ADDR and the doorbell, then
// sleeps on the interrupt line (IRQ_ENABLE = done | fault) until STATUS leaves "running".
// Loosely timed: the driver keeps a local time offset (tlm_quantumkeeper), passes it as each
// transaction's delay and syncs when it exceeds the global quantum. Approximately timed: each
// transaction is issued at the current SystemC time and the target consumes its cycles.
// Must be used from an SC_THREAD (HostCpu runs the software in one).
#pragma once

// The TLM utilities need SystemC's declarations first.
// clang-format off
#include <systemc>
#include <tlm>
#include <tlm_utils/tlm_quantumkeeper.h>
// clang-format on

#include "sim/systemc/tessera_chip.h"
#include "tessera/driver.h"

namespace tessera::systemc {

class TlmDevice : public driver::Device {
 public:
  TlmDevice(const driver::DeviceConfig& config, tlm::tlm_initiator_socket<>& csr,
            tlm::tlm_initiator_socket<>& hbm, sc_core::sc_in<bool>& irq, TimingMode mode,
            sc_core::sc_time clock_period);

  void write(uint64_t addr, const std::vector<uint8_t>& bytes) override;
  std::vector<uint8_t> read(uint64_t addr, size_t bytes) override;
  uint32_t csr_read(uint32_t offset) override;
  void csr_write(uint32_t offset, uint32_t value);
  // Cycles = PERF[0] (doorbell to HALT, as the plain rtl backend counts them). The timeout is in
  // chip cycles of SystemC time. Sampling (set_sampling) is not supported here and ignored.
  driver::RunReport run(uint64_t prog_addr, uint64_t timeout) override;

  // The driver's local time ahead of SystemC time (loosely timed), and a sync to it.
  sc_core::sc_time local_time() { return qk_.get_local_time(); }
  void sync();

 private:
  void transport(tlm::tlm_initiator_socket<>& socket, tlm::tlm_command cmd, uint64_t addr,
                 uint8_t* data, size_t bytes);

  tlm::tlm_initiator_socket<>& csr_;
  tlm::tlm_initiator_socket<>& hbm_;
  sc_core::sc_in<bool>& irq_;
  TimingMode mode_;
  sc_core::sc_time period_;
  tlm_utils::tlm_quantumkeeper qk_;
  bool irq_enabled_ = false;
};

}  // namespace tessera::systemc
