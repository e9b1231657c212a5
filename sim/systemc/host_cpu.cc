// HostCpu: host software on the driver's TLM transport (host_cpu.h).
#include "sim/systemc/host_cpu.h"

#include "sim/systemc/tlm_device.h"

namespace tessera::systemc {

HostCpu::HostCpu(sc_core::sc_module_name name, const ChipConfig& chip, Software software)
    : sc_module(name),
      csr_socket("csr_socket"),
      hbm_socket("hbm_socket"),
      irq("irq"),
      chip_(chip),
      software_(std::move(software)) {
  SC_HAS_PROCESS(HostCpu);
  SC_THREAD(main);
  // The compiler and the training step run on this thread's stack.
  set_stack_size(64 << 20);
}

void HostCpu::main() {
  try {
    TlmDevice device(chip_.device, csr_socket, hbm_socket, irq, chip_.mode, chip_.clock_period);
    software_(device);
    device.sync();
  } catch (const sc_core::sc_unwind_exception&) {
    throw;  // this thread is being killed or reset: SystemC needs the exception back
  } catch (...) {
    error_ = std::current_exception();
  }
  finished_ = true;
  finish_time_ = sc_core::sc_time_stamp();
  sc_core::sc_stop();
}

}  // namespace tessera::systemc
