// ChipSim: the verilated chip (tpu_top) with the HBM2 device model on every pseudo-channel's
// pins (every command through the timing checker), driven the way a host drives it: HBM loads
// and dumps through the host memory port (32-byte bursts, up to 16 per request, cycle by
// cycle), CSR reads and writes, and run(): PROG_ADDR, the doorbell, then cycles until STATUS
// leaves "running" or a watchdog expires. The rtl backend of the driver and the chip tests are
// built on it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/hbm/hbm_system.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tessera/isa_gen.h"

namespace tessera::chip {

struct ChipRun {
  uint32_t status = 0;  // isa::STATUS_*
  uint32_t fault_code = 0, fault_pc = 0, fault_addr = 0, fault_info = 0;
  uint64_t cycles = 0;  // doorbell to the end
  bool timed_out = false;
  // With stop_on_assertion: an RTL assertion ($error) failed in the last cycle run; the
  // simulator printed its report, the chip's state is the cycle's (ChipSim::run stops there).
  bool assertion_failed = false;
};

// What the HBM device pins carried since the doorbell (all pseudo-channels together): the
// cycles the data bus held read or write data (a burst's cycles per RD or WR), the switches
// between reads and writes (a column command of the other kind than the channel's last), the
// refresh commands (REF of all banks and REFSB of one: the controller issues REFSBs, 16 a tREFI).
struct HbmPinCounts {
  uint64_t bus = 0, turns = 0, refs = 0;
};

// One timeline sample of a run (ChipSim::run with sampling).
struct ChipSample {
  uint64_t cycle = 0;                // since the doorbell
  uint32_t pc = 0, unit_state = 0;   // CSR PC and UNIT_STATE
  std::array<uint64_t, 3> busy{};    // PERF[1..3], cumulative
  uint64_t macs = 0, hbm_bytes = 0;  // PERF[7], PERF[8] + PERF[9], cumulative
  HbmPinCounts hbm;                  // the HBM device pins since the doorbell
};

template <class Model>
class ChipSim {
 public:
  ChipSim(int channels, const hbm::HbmTiming& timing = hbm::HbmTiming{},
          const std::string& wave_name = "")
      : sim_(wave_name),
        dev_(channels, timing),
        burst_(timing.burst_cycles),
        last_col_(static_cast<size_t>(channels), 0),
        map_(channels),
        trefi_(timing.trefi) {
    auto& m = sim_.top();
    m.csr_valid_i = 0;
    m.csr_write_i = 0;
    m.csr_addr_i = 0;
    m.csr_wdata_i = 0;
    m.host_req_valid_i = 0;
    m.host_req_write_i = 0;
    m.host_req_addr_i = 0;
    m.host_req_len_i = 0;
    m.host_req_id_i = 0;
    m.host_wd_valid_i = 0;
    m.host_wd_data_i = {};
    m.host_wd_strb_i = 0;
    m.host_rd_ready_i = 0;
    m.host_wr_done_ready_i = 0;
    hbm::HbmSystem<Model>::clear(m.rdata_valid_i);
    hbm::HbmSystem<Model>::clear(m.rdata_i);
    // ICI links: down and quiet unless a RingSim wires this chip to its neighbours.
    m.link_up_i = 0;
    m.ici_credit_i = 0;
    m.ici_rx_valid_i = 0;
    m.ici_rx_flit_i = {};
    // One evaluation a cycle (SimCtrl::set_clock_prev): a translation unit that instantiates
    // ChipSim includes the model's root header ("Vtpu_top_n16___024root.h") as well.
    sim_.set_clock_prev(&m.rootp->__Vtrigrprev__TOP__clk_i);
    sim_.reset();
  }

  // Back to two evaluations a cycle (the equivalence test of the one-evaluation cycle).
  void use_two_evals() { sim_.set_clock_prev(nullptr); }
  // An RTL assertion ends the run (ChipRun::assertion_failed) instead of aborting the process:
  // for the driver, which reports it as an error of the program that ran (a read of
  // never-written accumulator rows, say). Off by default: a test harness wants the abort.
  void stop_on_assertion(bool on) {
    stop_on_assertion_ = on;
    sim_.context().fatalOnError(!on);
  }
  bool single_eval() const { return sim_.single_eval(); }
  // With stop_on_assertion: an RTL assertion has failed (the ring's per-cycle check).
  bool assertion_failed() { return stop_on_assertion_ && sim_.context().gotError(); }

  Model& top() { return sim_.top(); }
  uint64_t cycle() const { return sim_.cycle(); }
  hbm::HbmDevice& device() { return dev_; }

  // One clock cycle with the inputs set so far. The controller's command pins depend on its
  // state only (not on any input of this cycle), so the device reads them as the last clock
  // edge left them; its read data settles with the edge's other inputs in tick().
  void step() {
    gate();
    hbm::exchange_hbm_pins(sim_.top(), dev_, sim_.cycle(), counter_);
    sim_.tick();
  }

  uint32_t csr_read(uint32_t offset) {
    const PortsIdleOnExit idle{this};
    auto& m = sim_.top();
    m.csr_valid_i = 1;
    m.csr_write_i = 0;
    m.csr_addr_i = offset;
    sim_.eval();
    const uint32_t v = m.csr_rdata_o;
    step();
    m.csr_valid_i = 0;
    return v;
  }
  void csr_write(uint32_t offset, uint32_t value) {
    const PortsIdleOnExit idle{this};
    auto& m = sim_.top();
    m.csr_valid_i = 1;
    m.csr_write_i = 1;
    m.csr_addr_i = offset;
    m.csr_wdata_i = value;
    step();
    m.csr_valid_i = 0;
    m.csr_write_i = 0;
  }

  // A function called at the start of every clock cycle this class runs, before the clock edge
  // (for the host-port loops before that cycle's inputs are set; csr_read/csr_write set their
  // inputs first): the SystemC platform (sim/systemc) uses it to pace the chip by its clock (the
  // function waits for the next edge). None by default.
  void set_cycle_gate(std::function<void()> gate) { gate_ = std::move(gate); }

  // Writes `bytes` at `addr` (32-byte aligned; a partial last burst is written with byte
  // enables) through the host port; returns when every write has completed. `enables`, when
  // given (one entry per byte, nonzero = write), masks bytes out through the burst strobes.
  void hbm_write(uint64_t addr, const std::vector<uint8_t>& bytes,
                 const std::vector<uint8_t>* enables = nullptr) {
    if (addr % 32) throw std::invalid_argument("hbm_write: address not 32-byte aligned");
    const PortsIdleOnExit idle{this};
    auto& m = sim_.top();
    const size_t bursts = (bytes.size() + 31) / 32;
    size_t sent = 0, beats = 0, done = 0, requests = 0;
    for (uint64_t guard = 0; done < requests || sent < bursts; ++guard) {
      if (guard > 100 * bursts + 100000) throw std::runtime_error("hbm_write: host port stuck");
      gate();
      const size_t len = std::min<size_t>(16, bursts - sent);
      m.host_req_valid_i = sent < bursts && beats == sent;
      m.host_req_write_i = 1;
      m.host_req_addr_i = static_cast<uint32_t>(addr + 32 * sent);
      m.host_req_len_i = static_cast<uint8_t>(len == 0 ? 0 : len - 1);
      m.host_wd_valid_i = beats < sent;
      if (beats < sent) {
        uint32_t strb = 0;
        for (int k = 0; k < 32; ++k) {
          const size_t i = 32 * beats + k;
          put_elem<8>(m.host_wd_data_i, k, i < bytes.size() ? bytes[i] : 0);
          if (i < bytes.size() && (!enables || (*enables)[i])) strb |= 1u << k;
        }
        m.host_wd_strb_i = strb;
      }
      m.host_wr_done_ready_i = 1;
      sim_.eval();
      hbm::exchange_hbm_pins(sim_.top(), dev_, sim_.cycle(), counter_);
      sim_.eval();
      if (m.host_req_valid_i && m.host_req_ready_o) {
        sent += len;
        ++requests;
      }
      if (m.host_wd_valid_i && m.host_wd_ready_o) ++beats;
      if (m.host_wr_done_valid_o) {
        if (m.host_wr_done_err_o) throw std::runtime_error("hbm_write: address beyond HBM");
        ++done;
      }
      sim_.tick();
    }
    m.host_req_valid_i = 0;
    m.host_wd_valid_i = 0;
    m.host_wr_done_ready_i = 0;
    // A completion means the WR issued; let its data reach the device.
    for (int i = 0; i < 16; ++i) step();
    last_host_cycle_ = sim_.cycle();
  }

  std::vector<uint8_t> hbm_read(uint64_t addr, size_t n) {
    if (addr % 32) throw std::invalid_argument("hbm_read: address not 32-byte aligned");
    const PortsIdleOnExit idle{this};
    auto& m = sim_.top();
    const size_t bursts = (n + 31) / 32;
    std::vector<uint8_t> out;
    size_t sent = 0;
    for (uint64_t guard = 0; out.size() < 32 * bursts; ++guard) {
      if (guard > 100 * bursts + 100000) throw std::runtime_error("hbm_read: host port stuck");
      gate();
      const size_t len = std::min<size_t>(16, bursts - sent);
      m.host_req_valid_i = sent < bursts;
      m.host_req_write_i = 0;
      m.host_req_addr_i = static_cast<uint32_t>(addr + 32 * sent);
      m.host_req_len_i = static_cast<uint8_t>(len == 0 ? 0 : len - 1);
      m.host_rd_ready_i = 1;
      sim_.eval();
      hbm::exchange_hbm_pins(sim_.top(), dev_, sim_.cycle(), counter_);
      sim_.eval();
      if (m.host_req_valid_i && m.host_req_ready_o) sent += len;
      if (m.host_rd_valid_o) {
        if (m.host_rd_err_o) throw std::runtime_error("hbm_read: address beyond HBM");
        for (int k = 0; k < 32; ++k)
          out.push_back(static_cast<uint8_t>(get_elem<8>(m.host_rd_data_o, k)));
      }
      sim_.tick();
    }
    m.host_req_valid_i = 0;
    m.host_rd_ready_i = 0;
    last_host_cycle_ = sim_.cycle();
    out.resize(n);
    return out;
  }

  // Idles to the cycle a doorbell is rung at when its timing must be reproducible: at least one
  // whole refresh interval (plus the refreshes' own time) after the last host-port access — so a
  // set of single-bank refreshes has closed every row the host left open and every timing
  // constraint has expired — and at a
  // multiple of tREFI, a fixed phase of the controller's free-running refresh timer. From there
  // a program's cycle count and every counter depend only on the program and its data
  // addresses, not on what the host did before or how long it took (the SystemC platform's
  // doorbell uses the same rule).
  void idle_to_doorbell_phase() {
    const uint64_t t = static_cast<uint64_t>(trefi_);
    while (sim_.cycle() < last_host_cycle_ + t + kRefreshSettle || sim_.cycle() % t != 0) step();
  }

  // Runs the program at prog_addr to its end (HALT or a fault), at most max_cycles.
  // `align_refresh`: ring the doorbell at a fixed phase of the HBM refresh interval, at least one
  // refresh after the last host access (idle_to_doorbell_phase: up to ~2 tREFI idle cycles
  // first). The controller refreshes on a free-running timer and keeps rows open, so without it
  // the same program's cycle count varies with where it happened to start and with what the
  // host touched last; aligned, a program's timing is reproducible from run to run and harness
  // to harness (the training step's cycles are identical every step: its timing does not depend
  // on the data).
  //
  // `samples`: every `sample_every` cycles the run records the decode PC, UNIT_STATE and the
  // cumulative busy, MAC and HBM byte counters (combinational CSR reads between clock edges:
  // they change nothing in the chip) — the raw material of the per-phase cycle report and the
  // timeline (sw/tools/train_tool.cc).
  ChipRun run(uint32_t prog_addr, uint64_t max_cycles = 10'000'000, bool align_refresh = false,
              uint64_t sample_every = 0, std::vector<ChipSample>* samples = nullptr) {
    csr_write(isa::CSR_PROG_ADDR, prog_addr);
    if (align_refresh) idle_to_doorbell_phase();
    reset_pin_counts();
    ring_doorbell();
    const uint64_t start = sim_.cycle();
    ChipRun r;
    auto& m = sim_.top();
    m.csr_valid_i = 1;
    m.csr_write_i = 0;
    m.csr_addr_i = isa::CSR_STATUS;
    sim_.eval();
    for (;;) {
      r.status = m.csr_rdata_o;  // settled by the last clock edge (the inputs are unchanged)
      if (r.status != isa::STATUS_RUNNING) break;
      if (samples && sample_every && (sim_.cycle() - start) % sample_every == 0)
        samples->push_back(sample(sim_.cycle() - start));
      if (sim_.cycle() - start >= max_cycles) {
        r.timed_out = true;
        break;
      }
      step();
      if (stop_on_assertion_ && sim_.context().gotError()) {
        r.assertion_failed = true;
        break;
      }
    }
    m.csr_valid_i = 0;
    r.cycles = sim_.cycle() - start;
    end_run_waves();
    r.fault_code = csr_read(isa::CSR_FAULT_CODE);
    r.fault_pc = csr_read(isa::CSR_FAULT_PC);
    r.fault_addr = csr_read(isa::CSR_FAULT_ADDR);
    r.fault_info = csr_read(isa::CSR_FAULT_INFO);
    return r;
  }

  // Rings the doorbell (the program at CSR_PROG_ADDR starts); a dump armed by arm_waves starts
  // with it.
  void ring_doorbell() {
    csr_write(isa::CSR_DOORBELL, 1);
    if (waves_.armed) {
      const uint64_t t0 = sim_.cycle();
      sim_.open_waves(waves_.path);
      sim_.set_dump_window(t0, t0 + waves_.from,
                           waves_.to == UINT64_MAX ? UINT64_MAX : t0 + waves_.to);
      waves_.armed = false;
      waves_.open = true;
    }
  }
  // The run that rang the doorbell has ended: an armed dump ends with it.
  void end_run_waves() {
    if (!waves_.open) return;
    sim_.close_waves();
    sim_.set_dump_window(0, 0, UINT64_MAX);
    waves_.open = false;
  }
  // The next program run (run(), or a RingSim run) dumps its cycles [from, to) since the
  // doorbell into the FST file `path` (the file's time in ns = the program's cycle), for that
  // run only.
  void arm_waves(const std::string& path, uint64_t from = 0, uint64_t to = UINT64_MAX) {
    if (to <= from) throw std::invalid_argument("waves: the window's end is not after its start");
    waves_ = {true, false, path, from, to};
  }

  // HBM commands seen on the pins since the last doorbell (for checking the counters).
  uint64_t acts_seen() const { return acts_; }
  uint64_t column_commands_seen() const { return pins_.bus / static_cast<uint64_t>(burst_); }
  const HbmPinCounts& pin_counts() const { return pins_; }
  // Zeroes the pin counters (run() does at its doorbell; so does RingSim at each chip's).
  void reset_pin_counts() {
    acts_ = 0;
    pins_ = HbmPinCounts{};
    std::fill(last_col_.begin(), last_col_.end(), 0);
  }

  uint64_t perf(int counter) {
    const uint64_t lo = csr_read(isa::CSR_PERF_BASE + 8 * counter);
    const uint64_t hi = csr_read(isa::CSR_PERF_BASE + 8 * counter + 4);
    return lo | hi << 32;
  }

  // One timeline sample now (combinational CSR reads between clock edges; they change nothing
  // in the chip): what run() records with sampling, for harnesses that clock the chip
  // themselves (RingSim). The CSR port must be idle or holding the STATUS read.
  ChipSample sample_now(uint64_t cycle) { return sample(cycle); }

 private:
  uint32_t peek(uint32_t addr) {
    auto& m = sim_.top();
    m.csr_addr_i = addr;
    sim_.eval();
    return m.csr_rdata_o;
  }
  ChipSample sample(uint64_t cycle) {
    ChipSample s;
    s.cycle = cycle;
    s.pc = peek(isa::CSR_PC);
    s.unit_state = peek(isa::CSR_UNIT_STATE);
    auto wide = [&](int c) {
      const uint64_t lo = peek(isa::CSR_PERF_BASE + 8 * c);
      return lo | static_cast<uint64_t>(peek(isa::CSR_PERF_BASE + 8 * c + 4)) << 32;
    };
    for (int u = 0; u < 3; ++u) s.busy[u] = wide(1 + u);
    s.macs = wide(7);
    s.hbm_bytes = wide(8) + wide(9);
    s.hbm = pins_;
    sim_.top().csr_addr_i = isa::CSR_STATUS;
    sim_.eval();
    return s;
  }

  void gate() {
    if (gate_) gate_();
  }
  // The host-side inputs back at idle when a CSR or host-port access ends, however it ends (an
  // exception mid-burst must not leave a request or a CSR write asserted for later cycles).
  struct PortsIdleOnExit {
    ChipSim* sim;
    ~PortsIdleOnExit() {
      auto& m = sim->sim_.top();
      m.csr_valid_i = 0;
      m.csr_write_i = 0;
      m.host_req_valid_i = 0;
      m.host_wd_valid_i = 0;
      m.host_rd_ready_i = 0;
      m.host_wr_done_ready_i = 0;
    }
  };

  // Cycles a REF takes to come and finish once due on an idle controller (PRE, tRP, tRFC).
  static constexpr uint64_t kRefreshSettle = 256;

  struct ArmedWaves {
    bool armed = false, open = false;
    std::string path;
    uint64_t from = 0, to = UINT64_MAX;
  } waves_;
  SimCtrl<Model> sim_;
  hbm::HbmDevice dev_;
  std::function<void()> gate_;
  uint64_t last_host_cycle_ = 0;
  uint64_t acts_ = 0;
  int burst_;
  std::vector<int8_t> last_col_;  // per pseudo-channel: 0 none yet, 1 RD, 2 WR
  HbmPinCounts pins_;
  std::function<void(int, const hbm::HbmPinsIn&)> counter_ = [this](int c,
                                                                    const hbm::HbmPinsIn& in) {
    if (!in.cmd_valid) return;
    if (in.cmd == hbm::HbmCmd::kAct) ++acts_;
    if (in.cmd == hbm::HbmCmd::kRef || in.cmd == hbm::HbmCmd::kRefSb) ++pins_.refs;
    if (in.cmd == hbm::HbmCmd::kRd || in.cmd == hbm::HbmCmd::kWr) {
      pins_.bus += static_cast<uint64_t>(burst_);
      const int8_t kind = in.cmd == hbm::HbmCmd::kRd ? 1 : 2;
      int8_t& last = last_col_[static_cast<size_t>(c)];
      if (last && last != kind) ++pins_.turns;
      last = kind;
    }
  };
  hbm::HbmAddressMap map_;
  int trefi_;
  bool stop_on_assertion_ = false;
};

}  // namespace tessera::chip
