// TesseraChip: the verilated Tessera chip as a SystemC module with TLM-2.0 target sockets
// (docs/systemc.md). Two base-protocol sockets, blocking transport with timing annotation:
//   csr_socket — the CSR space of docs/isa.md, offsets 0x000 .. 0x0A7, 32-bit aligned accesses;
//   hbm_socket — the host port into HBM, byte addresses 0 .. HBM size - 1, any length, byte
//                enables honoured (the port's write strobes); debug transport reads and writes
//                the device model's storage without cycles.
// `irq` is the chip's interrupt line (irq_o = IRQ_PENDING & IRQ_ENABLE). Behind the RTL memory
// controller sits the HBM2 device model with its timing checker, as in the plain harness: every
// cycle runs through harness/chip/chip_sim.h.
//
// Timing modes:
//   kApproximatelyTimed — the chip is clocked by `clk` (an sc_clock of the configured period
//     must be bound): one chip cycle per rising edge. A transaction waits for its annotated
//     time, then drives the RTL port cycle by cycle on the following edges; it returns with the
//     delay consumed (0). Transactions are serialized.
//   kLooselyTimed — temporal decoupling: the chip runs in the calling thread. A transaction at
//     local time t = now + delay first runs the chip up to t, then performs the access; the
//     cycles it took are added to `delay` (the initiator's quantum keeper decides when to sync).
//     A thread of the module advances the chip to SystemC time once per quantum and updates
//     `irq` (so the interrupt is seen up to one quantum late). `clk` may stay unbound.
// Doorbell writes are applied at a reproducible point — at least one refresh after the last
// host-port access and at a multiple of the refresh interval (ChipSim::idle_to_doorbell_phase, as
// ChipSim::run does with align_refresh): a program's cycle count and counters are then the same
// whatever the host's timing, in both modes and in the plain harness.
// Rejected transactions (outside the map, widths, byte enables, streaming) get the standard
// error responses and a logged reason (errors(), SC_REPORT_WARNING); the chip is not touched.
// If the chip model itself fails (the HBM timing checker or the host port throws: a chip bug),
// the module logs it, stops the chip and answers every later transaction with
// TLM_GENERIC_ERROR_RESPONSE naming the cause; the simulation goes on.
#pragma once

// The TLM utilities need SystemC's declarations first.
// clang-format off
#include <systemc>
#include <tlm>
#include <tlm_utils/simple_target_socket.h>
// clang-format on

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/systemc/chip_core.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"

namespace tessera::systemc {

enum class TimingMode { kLooselyTimed, kApproximatelyTimed };
const char* timing_mode_name(TimingMode m);  // "lt" | "at"
TimingMode parse_timing_mode(const std::string& name);

struct ChipConfig {
  driver::DeviceConfig device;  // one of driver::rtl_configurations() (backend ignored)
  TimingMode mode = TimingMode::kApproximatelyTimed;
  sc_core::sc_time clock_period = sc_core::sc_time(1, sc_core::SC_NS);  // nominal 1 GHz
  sc_core::sc_time quantum = sc_core::sc_time(10, sc_core::SC_US);      // LT background step
  bool align_doorbell = true;
  std::string wave_name;  // FST dump name when WAVES=1
};

// The CSR socket's map: CSR offsets below this (the PERF counters end it).
constexpr uint64_t kCsrMapBytes = isa::CSR_PERF_BASE + 8 * driver::kPerfCounters;

class TesseraChip : public sc_core::sc_module {
 public:
  tlm_utils::simple_target_socket<TesseraChip> csr_socket;
  tlm_utils::simple_target_socket<TesseraChip> hbm_socket;
  sc_core::sc_port<sc_core::sc_signal_in_if<bool>, 1, sc_core::SC_ZERO_OR_MORE_BOUND> clk;
  sc_core::sc_out<bool> irq;

  TesseraChip(sc_core::sc_module_name name, const ChipConfig& config);
  ~TesseraChip() override;

  const ChipConfig& config() const { return config_; }
  uint64_t hbm_bytes() const { return config_.device.hbm_bytes(); }
  // Chip clock cycles simulated since the module was built.
  uint64_t cycles() const { return core_->cycle() - cycle0_; }
  // The reasons of every rejected transaction, in order.
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  void csr_b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  void hbm_b_transport(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay);
  unsigned int hbm_transport_dbg(tlm::tlm_generic_payload& trans);
  // Checks a payload; on failure sets the response, logs the reason and returns false.
  bool check(tlm::tlm_generic_payload& trans, const char* socket);
  void reject(tlm::tlm_generic_payload& trans, tlm::tlm_response_status status,
              const std::string& why);
  // Runs one access's cycles (`body`) between begin_access and end_access; a chip-model failure
  // becomes TLM_GENERIC_ERROR_RESPONSE and stops the chip (stop()).
  void perform(tlm::tlm_generic_payload& trans, sc_core::sc_time& delay, const char* socket,
               const std::function<void()>& body);
  void stop(const std::string& why);  // the chip model failed: no more cycles, refuse accesses

  void end_of_elaboration() override;
  void on_clock();   // AT: one chip cycle per rising edge (or hands the edge to a transaction)
  void lt_thread();  // LT: advances the chip to SystemC time every quantum
  void begin_access(sc_core::sc_time& delay);  // AT: wait until annotated time; LT: catch up
  void end_access(sc_core::sc_time& delay);    // AT: delay 0; LT: delay = chip's lead
  void catch_up(const sc_core::sc_time& t);    // LT: run idle cycles until the chip is at t
  void sync_irq();                             // notes a change of the chip's irq_o for write_irq
  void write_irq();                            // the one process that writes `irq`
  sc_core::sc_time chip_time() const { return config_.clock_period * double(cycles()); }

  ChipConfig config_;
  std::unique_ptr<ChipCore> core_;
  uint64_t cycle0_ = 0;
  bool busy_ = false;              // a transaction owns the RTL's host ports
  sc_core::sc_event edge_, idle_;  // AT: an edge handed to the transaction; access finished
  sc_core::sc_event irq_changed_;
  bool irq_level_ = false;
  std::vector<std::string> errors_;
  std::string broken_;  // why the chip model stopped (empty while it runs)
};

}  // namespace tessera::systemc
