// RingSim: N verilated chips (ChipSim, each with its HBM2 device model) joined in a ring by
// their ICI links — chip r's `next` port to chip (r + 1) mod N's `prev` port — through wires
// that delay everything by the link latency L cycles (docs/architecture.md, "ICI"). A run rings
// every chip's doorbell, then advances the chips in lock-step windows of L cycles: within a
// window each chip needs only what its neighbours sent in the previous window (the link ports'
// wire outputs are registers and the wire adds L cycles), so the chips of one window can run
// one after another or on separate threads, with bit-identical results either way — the
// conservative synchronization of the issue. Chips that have halted keep running (their links
// still deliver and return credits) until every chip has ended and the links are quiet.
// A chip's fault ends the run within a window: the others are stopped (they would wait for
// ever on what the faulted chip will not send) and the ring refuses further runs.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "harness/chip/chip_sim.h"
#include "tessera/chip_params.h"

namespace tessera::chip {

// Chips of the ring in other processes (the MPI mode: MpiTransport in sw/driver/rtl_device.cc
// over sw/driver/mpi_ring.cc): this process
// clocks chip `local()` only; after every window exchange() hands each process every chip's
// window — its state record and its two ports' wire bundles, `bytes_per_chip` bytes at
// `mine` — in `all` (chip r at r * bytes_per_chip), so that every process takes the same
// decisions. (A process that fails outside a run ends the job: tessera/mpi_ring.h, abort().)
class RingTransport {
 public:
  virtual ~RingTransport() = default;
  virtual int local() const = 0;
  virtual void exchange(const void* mine, void* all, size_t bytes_per_chip) = 0;
};

struct RingRun {
  std::vector<ChipRun> chips;        // per chip: cycles from its doorbell to its end, fault CSRs
  uint64_t cycles = 0;               // lock-step cycles until every chip had ended
  uint64_t flits = 0;                // flits the links carried (all links, both directions)
  std::vector<uint64_t> link_flits;  // per chip and port: [2r] next, [2r + 1] prev (sent)
  bool timed_out = false;
  std::string error;  // empty when every chip halted
};

template <class Model>
class RingSim {
 public:
  static constexpr int kFlitWords = chip_params::FlitW / 32;  // a flit as 32-bit words

  // `threads`: worker threads advancing the chips (1: the calling thread does all).
  // `transport`: the ring spans processes; this one holds and clocks chip transport->local()
  // only (threads then 1). Without: every chip is here.
  RingSim(int chips, int channels, int link_latency = 32, int threads = 1,
          const hbm::HbmTiming& timing = hbm::HbmTiming{}, const std::string& wave_name = "",
          RingTransport* transport = nullptr)
      : n_(chips),
        latency_(link_latency),
        threads_(transport ? 1 : std::max(1, std::min(threads, chips))),
        transport_(transport) {
    if (chips < 1) throw std::invalid_argument("RingSim: at least one chip");
    if (link_latency < 1) throw std::invalid_argument("RingSim: link latency must be >= 1");
    for (int r = 0; r < n_; ++r) {
      if (!is_local(r)) {
        chips_.push_back(nullptr);
        continue;
      }
      chips_.push_back(std::make_unique<ChipSim<Model>>(
          channels, timing, wave_name.empty() ? "" : wave_name + "_chip" + std::to_string(r)));
      chips_.back()->top().link_up_i = n_ > 1 ? 3 : 0;
    }
    wires_.assign(static_cast<size_t>(n_) * 2 * 2 * latency_, Bundle{});
  }

  int size() const { return n_; }
  int link_latency() const { return latency_; }
  // The last run's timeline samples of chip r (this process's chips; run's sample_every).
  const std::vector<ChipSample>& samples(int r) const { return samples_.at(r); }
  bool is_local(int r) const { return !transport_ || r == transport_->local(); }
  // An RTL assertion on a chip of this process ends the run (RingRun::chips[r].assertion_failed,
  // the error naming the chip, the cycle and the decode PC; every process of the ring stops)
  // instead of aborting the process (ChipSim::stop_on_assertion). Off by default.
  void stop_on_assertion(bool on) {
    for (auto& c : chips_)
      if (c) c->stop_on_assertion(on);
  }
  ChipSim<Model>& chip(int r) {
    if (!is_local(r) || !chips_.at(r))
      throw std::logic_error("RingSim: chip " + std::to_string(r) + " is in another process");
    return *chips_.at(r);
  }

  // Runs program prog_addrs[r] on chip r (one address: the same on all), at most max_cycles
  // lock-step cycles. align_refresh: each chip's doorbell at its reproducible refresh phase
  // (ChipSim::idle_to_doorbell_phase), which makes every cycle count independent of the host.
  // `sample_every`: every that many cycles each chip of this process records a ChipSample
  // (samples(r) after the run), as ChipSim::run does.
  RingRun run(const std::vector<uint32_t>& prog_addrs, uint64_t max_cycles = 10'000'000,
              bool align_refresh = true, uint64_t sample_every = 0) {
    sample_every_ = sample_every;
    samples_.assign(n_, {});
    if (failed_) {
      throw std::runtime_error(
          "RingSim: an earlier run ended with a fault or a timeout; the "
          "chips were stopped mid-program: build a new ring");
    }
    if (prog_addrs.size() != 1 && prog_addrs.size() != static_cast<size_t>(n_)) {
      throw std::invalid_argument("RingSim::run: one program address, or one per chip");
    }
    for (int r = 0; r < n_; ++r) {
      if (!is_local(r)) continue;
      ChipSim<Model>& c = *chips_[r];
      c.csr_write(isa::CSR_PROG_ADDR, prog_addrs[prog_addrs.size() == 1 ? 0 : r]);
      if (align_refresh) c.idle_to_doorbell_phase();
      c.reset_pin_counts();
      c.ring_doorbell();
      auto& m = c.top();
      m.csr_valid_i = 1;
      m.csr_write_i = 0;
      m.csr_addr_i = isa::CSR_STATUS;
      m.eval();  // csr_rdata_o reads STATUS from here on
    }
    state_.assign(n_, ChipState{});
    for (auto& b : wires_) b = Bundle{};
    window_ = 0;
    stop_ = false;
    RingRun out;

    // Each window: every worker advances its chips L cycles; the last to arrive decides.
    const auto window = [&](int worker) {
      for (int r = worker; r < n_; r += threads_)
        if (is_local(r)) advance(r);
      if (transport_) exchange();
    };
    const auto decide = [&]() {
      const uint64_t done_cycles = (window_ + 1) * static_cast<uint64_t>(latency_);
      bool all_ended = true, quiet = true, faulted = false;
      for (const ChipState& s : state_) {
        all_ended = all_ended && s.ended && s.ended_at < window_ * latency_;
        quiet = quiet && !s.active_in_window;
        faulted = faulted || s.faulted || s.asserted;
      }
      for (int r = 0; r < n_; ++r) {
        for (int l = 0; l < 2; ++l) quiet = quiet && outstanding(r, l) == 0;
      }
      if (all_ended && quiet) {
        stop_ = true;
      } else if (faulted) {
        stop_ = true;
        out.error = "a chip faulted or failed an RTL assertion; the others were stopped";
      } else if (done_cycles >= max_cycles) {
        stop_ = true;
        out.timed_out = true;
        out.error = "watchdog: " + std::to_string(done_cycles) + " lock-step cycles";
      }
      ++window_;
    };
    if (threads_ == 1) {
      while (!stop_) {
        window(0);
        decide();
      }
    } else {
      Barrier barrier(threads_);
      std::vector<std::thread> workers;
      for (int w = 1; w < threads_; ++w) {
        workers.emplace_back([&, w] {
          for (;;) {
            window(w);
            barrier.arrive_and_wait(decide);
            if (stop_) break;
          }
        });
      }
      for (;;) {
        window(0);
        barrier.arrive_and_wait(decide);  // the last arriving thread runs decide()
        if (stop_) break;
      }
      for (auto& t : workers) t.join();
    }

    // Results, read through the CSR port after the lock-step (the links are quiet or the run
    // is abandoned). The link inputs go idle first: they hold the last cycle's values, which
    // the host's cycles must not apply again (a credit twice, a flit twice).
    // Every process reads its own chips' CSRs; the others' come with their state records
    // (exchanged once more, so that every process reports the same ring).
    for (int r = 0; r < n_; ++r) {
      if (!is_local(r)) continue;
      ChipSim<Model>& c = *chips_[r];
      c.end_run_waves();
      c.top().ici_rx_valid_i = 0;
      c.top().ici_credit_i = 0;
      c.top().csr_valid_i = 0;
      ChipState& st = state_[r];
      st.status = c.csr_read(isa::CSR_STATUS);
      st.fault_code = c.csr_read(isa::CSR_FAULT_CODE);
      st.fault_pc = c.csr_read(isa::CSR_FAULT_PC);
      st.fault_addr = c.csr_read(isa::CSR_FAULT_ADDR);
      st.fault_info = c.csr_read(isa::CSR_FAULT_INFO);
      st.pc = st.status == isa::STATUS_RUNNING ? c.csr_read(isa::CSR_PC) : 0;
      st.unit_state = st.status == isa::STATUS_RUNNING ? c.csr_read(isa::CSR_UNIT_STATE) : 0;
    }
    if (transport_) exchange_states();
    for (int r = 0; r < n_; ++r) {
      const ChipState& st = state_[r];
      ChipRun cr;
      cr.status = st.status;
      cr.fault_code = st.fault_code;
      cr.fault_pc = st.fault_pc;
      cr.fault_addr = st.fault_addr;
      cr.fault_info = st.fault_info;
      cr.cycles = st.ended ? st.ended_at : window_ * latency_;
      cr.timed_out = !st.ended;
      cr.assertion_failed = st.asserted;
      out.chips.push_back(cr);
      out.cycles = std::max(out.cycles, cr.cycles);
      for (int l = 0; l < 2; ++l) {
        out.link_flits.push_back(st.sent[l]);
        out.flits += st.sent[l];
      }
      if (st.asserted) {
        out.error += "\n  chip " + std::to_string(r) + ": RTL assertion failed at cycle " +
                     std::to_string(cr.cycles) + " (decode at pc 0x" + hex(st.pc) + ")";
      } else if (cr.status == isa::STATUS_RUNNING) {
        out.error += "\n  chip " + std::to_string(r) + ": stopped while running at pc 0x" +
                     hex(st.pc) + " (unit state 0x" + hex(st.unit_state) + ")";
      } else if (cr.status == isa::STATUS_FAULTED) {
        out.error += "\n  chip " + std::to_string(r) + ": fault " + std::to_string(cr.fault_code) +
                     " at pc 0x" + hex(cr.fault_pc) + " (addr 0x" + hex(cr.fault_addr) +
                     ", info 0x" + hex(cr.fault_info) + ") after " + std::to_string(cr.cycles) +
                     " cycles";
      }
    }
    if (!out.error.empty()) failed_ = true;
    return out;
  }

 private:
  // What one port puts on its wire in one cycle (registered outputs of tpu_ici_port).
  struct Bundle {
    uint8_t valid = 0, credit = 0;
    uint32_t flit[kFlitWords] = {};
  };
  // Plain data: it crosses processes as bytes (RingTransport).
  struct ChipState {
    bool ended = false, faulted = false, asserted = false, active_in_window = false;
    uint64_t ended_at = 0;
    uint64_t sent[2] = {0, 0};     // flits sent on each port
    uint64_t credits[2] = {0, 0};  // credits this chip's port returned (for the far sender)
    uint32_t status = 0, fault_code = 0, fault_pc = 0, fault_addr = 0, fault_info = 0;
    uint32_t pc = 0, unit_state = 0;  // where a chip stopped while running
  };
  static_assert(std::is_trivially_copyable<ChipState>::value, "ChipState crosses processes");

  // After a window: every chip's state and this window's wire bundles from every process.
  void exchange() {
    const size_t wire_bytes = 2 * static_cast<size_t>(latency_) * sizeof(Bundle);
    const size_t per = sizeof(ChipState) + wire_bytes;
    std::vector<uint8_t> mine(per), all(per * static_cast<size_t>(n_));
    const int me = transport_->local();
    std::memcpy(mine.data(), &state_[me], sizeof(ChipState));
    for (int port = 0; port < 2; ++port)
      std::memcpy(mine.data() + sizeof(ChipState) + port * latency_ * sizeof(Bundle),
                  &wire(me, port, window_, 0), latency_ * sizeof(Bundle));
    transport_->exchange(mine.data(), all.data(), per);
    for (int r = 0; r < n_; ++r) {
      if (r == me) continue;
      const uint8_t* p = all.data() + per * static_cast<size_t>(r);
      std::memcpy(&state_[r], p, sizeof(ChipState));
      for (int port = 0; port < 2; ++port)
        std::memcpy(&wire(r, port, window_, 0),
                    p + sizeof(ChipState) + port * latency_ * sizeof(Bundle),
                    latency_ * sizeof(Bundle));
    }
  }
  void exchange_states() {
    std::vector<uint8_t> all(sizeof(ChipState) * static_cast<size_t>(n_));
    const int me = transport_->local();
    transport_->exchange(&state_[me], all.data(), sizeof(ChipState));
    for (int r = 0; r < n_; ++r)
      if (r != me) std::memcpy(&state_[r], all.data() + sizeof(ChipState) * r, sizeof(ChipState));
  }

  // A simple reusable barrier; the last thread to arrive runs `last` before releasing the rest.
  class Barrier {
   public:
    explicit Barrier(int n) : n_(n) {}
    template <class F>
    void arrive_and_wait(const F& last) {
      const uint64_t gen = gen_.load(std::memory_order_acquire);
      if (count_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
        last();
        count_.store(0, std::memory_order_relaxed);
        gen_.store(gen + 1, std::memory_order_release);
        return;
      }
      for (int spin = 0; gen_.load(std::memory_order_acquire) == gen; ++spin) {
        if (spin > 64) std::this_thread::yield();
      }
    }

   private:
    const int n_;
    std::atomic<int> count_{0};
    std::atomic<uint64_t> gen_{0};
  };

  static std::string hex(uint32_t v) {
    char b[16];
    std::snprintf(b, sizeof b, "%x", v);
    return b;
  }

  // wires_[((r * 2 + port) * 2 + parity) * L + t]: what chip r's port sent at cycle t of a
  // window of that parity.
  Bundle& wire(int r, int port, uint64_t window, int t) {
    return wires_[((static_cast<size_t>(r) * 2 + port) * 2 + (window & 1)) * latency_ + t];
  }
  // The chip and port at the far end of chip r's port (0 next, 1 prev).
  int far_chip(int r, int port) const { return port == 0 ? (r + 1) % n_ : (r + n_ - 1) % n_; }

  // Flits chip r's port has sent that the far receiver has not yet consumed.
  uint64_t outstanding(int r, int port) const {
    return state_[r].sent[port] - state_[far_chip(r, port)].credits[1 - port];
  }

  // Chip r through the L cycles of the current window.
  void advance(int r) {
    ChipSim<Model>& c = *chips_[r];
    ChipState& s = state_[r];
    auto& m = c.top();
    s.active_in_window = false;
    for (int t = 0; t < latency_; ++t) {
      const uint64_t cycle = window_ * latency_ + t;
      // Inputs: what the far ports sent L cycles ago (the previous window, same offset).
      uint8_t rx_valid = 0, credit = 0;
      if (n_ > 1) {
        for (int port = 0; port < 2; ++port) {
          const Bundle& in =
              window_ == 0 ? idle_ : wire(far_chip(r, port), 1 - port, window_ - 1, t);
          rx_valid |= static_cast<uint8_t>(in.valid << port);
          credit |= static_cast<uint8_t>(in.credit << port);
          for (int k = 0; k < kFlitWords; ++k) m.ici_rx_flit_i[kFlitWords * port + k] = in.flit[k];
        }
      }
      m.ici_rx_valid_i = rx_valid;
      m.ici_credit_i = credit;
      // Outputs this cycle (registers: they do not depend on this cycle's inputs).
      for (int port = 0; port < 2; ++port) {
        Bundle& o = wire(r, port, window_, t);
        o.valid = (m.ici_tx_valid_o >> port) & 1;
        o.credit = (m.ici_credit_o >> port) & 1;
        for (int k = 0; k < kFlitWords; ++k) o.flit[k] = m.ici_tx_flit_o[kFlitWords * port + k];
        s.sent[port] += o.valid;
        s.credits[port] += o.credit;
        s.active_in_window = s.active_in_window || o.valid || o.credit;
      }
      if (s.asserted) continue;  // stopped on an RTL assertion: its clock stays still
      if (!s.ended) {
        // STATUS is the sequencer's state (no input reaches it within a cycle): as the last
        // clock edge left it, like ChipSim::run.
        const uint32_t status = m.csr_rdata_o;
        if (status != isa::STATUS_RUNNING) {
          s.ended = true;
          s.ended_at = cycle;
          s.faulted = status == isa::STATUS_FAULTED;
        } else if (sample_every_ && cycle % sample_every_ == 0) {
          samples_[r].push_back(c.sample_now(cycle));
        }
      }
      c.step();
      if (c.assertion_failed()) {
        s.asserted = s.ended = true;
        s.ended_at = cycle;
      }
    }
  }

  const int n_, latency_, threads_;
  RingTransport* transport_;
  uint64_t sample_every_ = 0;
  std::vector<std::vector<ChipSample>> samples_;
  std::vector<std::unique_ptr<ChipSim<Model>>> chips_;
  std::vector<Bundle> wires_;
  std::vector<ChipState> state_;
  const Bundle idle_{};
  uint64_t window_ = 0;
  bool stop_ = false;
  bool failed_ = false;
};

}  // namespace tessera::chip
