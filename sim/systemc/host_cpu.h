// HostCpu: a TLM-2.0 initiator that stands for the host processor: it runs host software — any
// function of a driver::Device — in an SC_THREAD, on a TlmDevice over its two initiator
// sockets and its interrupt input. When the software returns (or throws) it stops the
// simulation; what it threw is kept for the caller of sc_start (error()).
#pragma once

// The TLM utilities need SystemC's declarations first.
// clang-format off
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_initiator_socket.h>
// clang-format on

#include <exception>
#include <functional>

#include "sim/systemc/tessera_chip.h"
#include "tessera/driver.h"

namespace tessera::systemc {

class HostCpu : public sc_core::sc_module {
 public:
  using Software = std::function<void(driver::Device&)>;

  tlm_utils::simple_initiator_socket<HostCpu> csr_socket;
  tlm_utils::simple_initiator_socket<HostCpu> hbm_socket;
  sc_core::sc_in<bool> irq;

  // `chip` says which chip the sockets reach (its DeviceConfig, timing mode and clock period).
  HostCpu(sc_core::sc_module_name name, const ChipConfig& chip, Software software);

  bool finished() const { return finished_; }
  std::exception_ptr error() const { return error_; }
  // SystemC time when the software returned.
  sc_core::sc_time finish_time() const { return finish_time_; }

 private:
  void main();

  ChipConfig chip_;
  Software software_;
  bool finished_ = false;
  std::exception_ptr error_;
  sc_core::sc_time finish_time_;
};

}  // namespace tessera::systemc
