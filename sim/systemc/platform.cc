// Platform and run_platform (platform.h).
#include "sim/systemc/platform.h"

#include "sim/systemc/tlm_device.h"  // SystemC, then tlm_utils::tlm_quantumkeeper

namespace tessera::systemc {

Platform::Platform(sc_core::sc_module_name name, const ChipConfig& config,
                   HostCpu::Software software)
    : sc_module(name), irq("irq"), chip("chip", config), cpu("cpu", config, std::move(software)) {
  if (config.mode == TimingMode::kApproximatelyTimed) {
    // Rising edges half a period after each whole period: transactions annotated in whole
    // periods never coincide with an edge.
    clock = std::make_unique<sc_core::sc_clock>("clock", config.clock_period, 0.5,
                                                config.clock_period / 2, true);
    chip.clk(*clock);
  }
  tlm_utils::tlm_quantumkeeper::set_global_quantum(config.quantum);
  cpu.csr_socket.bind(chip.csr_socket);
  cpu.hbm_socket.bind(chip.hbm_socket);
  chip.irq(irq);
  cpu.irq(irq);
}

PlatformRun run_platform(const ChipConfig& config, HostCpu::Software software) {
  Platform p("tessera", config, std::move(software));
  sc_core::sc_start();
  if (!p.cpu.finished())
    throw std::runtime_error("the SystemC simulation stopped before the host software returned");
  if (p.cpu.error()) std::rethrow_exception(p.cpu.error());
  return PlatformRun{p.cpu.finish_time(), p.chip.cycles()};
}

}  // namespace tessera::systemc
