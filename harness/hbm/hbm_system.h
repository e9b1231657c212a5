// HbmSystem: a verilated tpu_hbm (any Channels / Ports configuration) wired pin to pin to the
// HBM2 device model, one HbmChannelModel per pseudo-channel, every command of every channel
// through the timing checker; plus HbmPortDriver, which runs request traffic through the ports
// (multi-burst requests, write data on wd, back-pressure on every response channel), checks
// every response against a per-port scoreboard and measures latency and bandwidth. The tests
// (tests/rtl/test_hbm.cc), the benches and `tessera hbm-replay` all use it.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <ostream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/hbm/hbm_device.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tessera/chip_params.h"

namespace tessera::hbm {

// tpu_hbm's address map (rtl/hbm/tpu_hbm.sv): burst = addr >> 5; pseudo-channel =
// burst[pc_lsb +: log2(channels)]; the rest, PC field removed, is the controller's burst address:
// bank group [1:0], column [6:2], bank [8:7], row [22:9] (tpu_hbm_ctrl's ColLow map).
struct HbmLocation {
  int pc = 0, bg = 0, bank = 0;
  uint32_t row = 0, col = 0;
};

class HbmAddressMap {
 public:
  HbmAddressMap(int channels, int pc_lsb = 0) : channels_(channels), pc_lsb_(pc_lsb) {
    while ((1 << pc_bits_) < channels) ++pc_bits_;
    if ((1 << pc_bits_) != channels || channels < 1 || channels > 16) {
      throw std::invalid_argument("channels must be 1, 2, 4, 8 or 16");
    }
  }
  int channels() const { return channels_; }
  uint64_t capacity_bytes() const {
    return static_cast<uint64_t>(channels_) * chip_params::HBM_PC_BYTES;
  }
  bool in_range(uint64_t addr) const { return addr < capacity_bytes(); }
  HbmLocation locate(uint64_t addr) const {
    const uint64_t burst = addr >> 5;
    const uint64_t low = burst & ((1ull << pc_lsb_) - 1);
    const uint64_t local = ((burst >> (pc_lsb_ + pc_bits_)) << pc_lsb_) | low;
    HbmLocation l;
    l.pc = static_cast<int>((burst >> pc_lsb_) & ((1ull << pc_bits_) - 1));
    l.bg = static_cast<int>(local & 3);
    l.col = static_cast<uint32_t>((local >> 2) & 31);
    l.bank = static_cast<int>((local >> 7) & 3);
    l.row = static_cast<uint32_t>((local >> 9) & 0x3FFF);
    return l;
  }
  uint64_t address(const HbmLocation& l) const {
    const uint64_t local = (static_cast<uint64_t>(l.row) << 9) |
                           (static_cast<uint64_t>(l.bank) << 7) | (l.col << 2) |
                           static_cast<uint64_t>(l.bg);
    const uint64_t low = local & ((1ull << pc_lsb_) - 1);
    const uint64_t burst = ((local >> pc_lsb_) << (pc_lsb_ + pc_bits_)) |
                           (static_cast<uint64_t>(l.pc) << pc_lsb_) | low;
    return burst << 5;
  }

 private:
  int channels_, pc_lsb_, pc_bits_ = 0;
};

// Per-channel command statistics, counted from the pins.
struct HbmChannelStats {
  uint64_t act = 0, rd = 0, wr = 0, pre = 0, ref = 0;
  uint64_t refsb = 0;           // single-bank refreshes
  uint64_t refresh_cycles = 0;  // cycles from a REF until tRFC has passed
  // Column commands (RD/WR) to a row that an earlier column command had already used since its
  // ACT: the exact row hits. The first column command after an ACT is the miss that needed it.
  uint64_t row_hits = 0;
  // PREs that closed a row no column command used since its ACT: activations wasted (in random
  // traffic each one costs a tRC and a tFAW slot that served nothing).
  uint64_t unused_acts = 0;
};

// Field access on a verilated port of any width (fields at [width * i +: width], width <= 64):
// whole words, not bit by bit (the chip's harness reads the HBM pins every cycle).
template <class P>
uint64_t pin_field(const P& port, int lsb, int width) {
  const uint64_t mask = width >= 64 ? ~0ull : (1ull << width) - 1;
  if constexpr (std::is_integral_v<P>) {
    return (static_cast<uint64_t>(port) >> lsb) & mask;
  } else {
    const int w = lsb / 32, sh = lsb % 32;
    uint64_t v = static_cast<uint64_t>(port[w]) >> sh;
    if (sh + width > 32) v |= static_cast<uint64_t>(port[w + 1]) << (32 - sh);
    if (sh + width > 64) v |= static_cast<uint64_t>(port[w + 2]) << (64 - sh);
    return v & mask;
  }
}

// One cycle of every pseudo-channel's pins of a model that has tpu_hbm's pin names (tpu_hbm
// itself, tpu_top): the commands and write beats go to the device model (which throws on any
// timing or protocol violation), its read beats come back. `on_pins(c, in)` sees channel c's
// pins first. The caller evaluates the model before and after. Write data is read only with
// its valid (the device reads it only then); read data pins are written with a beat and zeroed
// in the cycle after one, so they hold zeros whenever their valid is low, as before.
template <class Model, class OnPins>
void exchange_hbm_pins(Model& m, HbmDevice& dev, uint64_t cycle, OnPins on_pins) {
  for (int c = 0; c < dev.pcs(); ++c) {
    HbmPinsIn in;
    in.cmd_valid = pin_field(m.cmd_valid_o, c, 1) != 0;
    if (in.cmd_valid) {
      in.cmd = static_cast<HbmCmd>(pin_field(m.cmd_o, 3 * c, 3));
      in.bg = static_cast<int>(pin_field(m.bg_o, 2 * c, 2));
      in.bank = static_cast<int>(pin_field(m.bank_o, 2 * c, 2));
      in.row = static_cast<uint32_t>(pin_field(m.row_o, 14 * c, 14));
      in.col = static_cast<uint32_t>(pin_field(m.col_o, 5 * c, 5));
    }
    in.wdata_valid = pin_field(m.wdata_valid_o, c, 1) != 0;
    if (in.wdata_valid) {
      for (int k = 0; k < kBeatBytes; ++k) {
        in.wdata[k] = static_cast<uint8_t>(get_elem<8>(m.wdata_o, 16 * c + k));
      }
      in.wstrb = static_cast<uint16_t>(pin_field(m.wdata_strb_o, 16 * c, 16));
    }
    on_pins(c, in);
    const HbmPinsOut out = dev.channel(c).step(cycle, in);
    const bool was_valid = pin_field(m.rdata_valid_i, c, 1) != 0;
    put_bits(m.rdata_valid_i, c, 1, out.rdata_valid ? 1 : 0);
    if (out.rdata_valid || was_valid) {
      for (int k = 0; k < kBeatBytes; ++k) put_elem<8>(m.rdata_i, 16 * c + k, out.rdata[k]);
    }
  }
}

template <class Model>
class HbmSystem {
 public:
  HbmSystem(int channels, int ports, const HbmTiming& timing = HbmTiming{},
            const std::string& wave_name = "", int pc_lsb = 0)
      : map_(channels, pc_lsb),
        ports_(ports),
        timing_(timing),
        sim_(wave_name),
        dev_(channels, timing),
        stats_(static_cast<size_t>(channels)) {
    auto& m = sim_.top();
    m.req_valid_i = 0;
    m.req_write_i = 0;
    clear(m.req_addr_i);
    clear(m.req_len_i);
    clear(m.req_id_i);
    m.wd_valid_i = 0;
    clear(m.wd_data_i);
    clear(m.wd_strb_i);
    m.rd_ready_i = 0;
    m.wr_done_ready_i = 0;
    m.rdata_valid_i = 0;
    clear(m.rdata_i);
    sim_.reset();
  }

  Model& top() { return sim_.top(); }
  SimCtrl<Model>& sim() { return sim_; }
  HbmDevice& device() { return dev_; }
  const HbmAddressMap& map() const { return map_; }
  int ports() const { return ports_; }
  int channels() const { return map_.channels(); }
  uint64_t cycle() const { return sim_.cycle(); }
  const std::vector<HbmChannelStats>& stats() const { return stats_; }
  void set_trace(std::ostream* trace) {
    for (int c = 0; c < channels(); ++c) dev_.channel(c).set_trace(trace);
  }

  // Backdoor, through the address map.
  void poke(uint64_t addr, const Burst& data) {
    const HbmLocation l = map_.locate(addr);
    dev_.channel(l.pc).poke(l.bg, l.bank, l.row, l.col, data);
  }
  Burst peek(uint64_t addr) const {
    const HbmLocation l = map_.locate(addr);
    return const_cast<HbmDevice&>(dev_).channel(l.pc).peek(l.bg, l.bank, l.row, l.col);
  }

  // After the port inputs of this cycle are set: settle, pass every channel's pins through the
  // device model (which throws on any violation) and its read data back, settle again. The
  // port outputs (ready, responses) are then valid for this cycle; tick() ends it.
  void exchange_pins() {
    sim_.eval();
    exchange_hbm_pins(sim_.top(), dev_, sim_.cycle(), [this](int c, const HbmPinsIn& in) {
      if (in.cmd_valid) count(c, in.cmd, in.bg * 4 + in.bank);
      if (refresh_left_[c] > 0) {
        --refresh_left_[c];
        ++stats_[static_cast<size_t>(c)].refresh_cycles;
      }
    });
    sim_.eval();
  }
  void tick() { sim_.tick(); }
  // End of simulation: runs idle cycles (no requests, responses taken) until the memory system
  // is idle, so the write data of the last completions reaches the device, then checks data
  // still due and the refresh interval. Throws if it does not go idle.
  void finish(uint64_t limit = 10'000) {
    auto& m = sim_.top();
    m.req_valid_i = 0;
    m.wd_valid_i = 0;
    for (int p = 0; p < ports_; ++p) {
      set_bit(m.rd_ready_i, p, true);
      set_bit(m.wr_done_ready_i, p, true);
    }
    for (uint64_t n = 0;; ++n) {
      exchange_pins();
      if (!m.busy_o) break;
      if (n == limit) {
        throw std::runtime_error("HBM memory system still busy " + std::to_string(limit) +
                                 " cycles after the end of traffic");
      }
      tick();
    }
    tick();
    for (int c = 0; c < channels(); ++c) dev_.channel(c).finish(sim_.cycle());
  }

  // Port field access (a port's fields sit at [width * port +: width]).
  template <class P>
  static void clear(P& port) {
    if constexpr (std::is_integral_v<P>) {
      port = 0;
    } else {
      for (size_t i = 0; i < sizeof(port) / sizeof(port[0]); ++i) port[i] = 0;
    }
  }
  template <class P>
  static bool bit(const P& port, int i) {
    return field(port, i, 1) != 0;
  }
  template <class P>
  static void set_bit(P& port, int i, bool v) {
    put_bits(port, i, 1, v ? 1 : 0);
  }
  template <class P>
  static uint64_t field(const P& port, int lsb, int width) {
    return pin_field(port, lsb, width);
  }

 private:
  void count(int c, HbmCmd cmd, int bank) {
    auto& s = stats_[static_cast<size_t>(c)];
    switch (cmd) {
      case HbmCmd::kAct:
        ++s.act;
        fresh_row_[c][bank] = true;
        break;
      case HbmCmd::kRd:
      case HbmCmd::kWr:
        ++(cmd == HbmCmd::kRd ? s.rd : s.wr);
        if (fresh_row_[c][bank]) {
          fresh_row_[c][bank] = false;
        } else {
          ++s.row_hits;
        }
        break;
      case HbmCmd::kPre:
        ++s.pre;
        if (fresh_row_[c][bank]) {  // opened, never read or written
          ++s.unused_acts;
          fresh_row_[c][bank] = false;
        }
        break;
      case HbmCmd::kRef:
        ++s.ref;
        refresh_left_[c] = timing_.trfc;
        break;
      case HbmCmd::kRefSb:
        ++s.refsb;
        break;
    }
  }

  HbmAddressMap map_;
  int ports_;
  HbmTiming timing_;
  SimCtrl<Model> sim_;
  HbmDevice dev_;
  std::vector<HbmChannelStats> stats_;
  std::map<int, int> refresh_left_;
  std::map<int, std::array<bool, 16>> fresh_row_;  // per channel, per bank (bg * 4 + bank):
                                                   // opened by an ACT, no column command yet
};

// One request through a port: `bursts` consecutive 32-byte bursts from `addr`.
struct HbmRequest {
  bool write = false;
  uint64_t addr = 0;
  int bursts = 1;              // 1..16
  int id = 0;                  // 0..15
  uint64_t not_before = 0;     // not presented before this cycle
  std::vector<Burst> data;     // writes: one per burst
  std::vector<uint32_t> strb;  // writes: byte enables per burst (empty: all bytes)
};

// Drives traffic through every port of an HbmSystem: each port presents its queued requests in
// order (each no earlier than its not_before cycle), then the write data of accepted writes;
// takes responses with probability ready_pct; checks that each port's read data and write
// completions come back in request order with the right id, last and err flags and, for reads,
// the data of the scoreboard (a memory image per port updated when a write is accepted; ports
// are meant to use disjoint addresses, or to order shared ones through completions).
template <class Model>
class HbmPortDriver {
 public:
  struct Options {
    int ready_pct = 100;  // chance a response is taken in a cycle
    int wd_pct = 100;     // chance write data is presented in a cycle
    bool check_data = true;
  };
  struct Results {
    uint64_t read_requests = 0, write_requests = 0, read_bursts = 0, write_bursts = 0;
    uint64_t first_accept = UINT64_MAX, last_response = 0;
    std::vector<uint64_t> read_latencies;  // acceptance to the last burst's response, cycles
  };

  HbmPortDriver(HbmSystem<Model>& sys, uint64_t seed, Options opt)
      : sys_(sys), rng_(seed), opt_(opt), ports_(static_cast<size_t>(sys.ports())) {}
  HbmPortDriver(HbmSystem<Model>& sys, uint64_t seed) : HbmPortDriver(sys, seed, Options{}) {}

  void submit(int port, HbmRequest r) {
    if (r.bursts < 1 || r.bursts > 16) throw std::invalid_argument("bursts must be 1..16");
    if (r.write && static_cast<int>(r.data.size()) != r.bursts) {
      throw std::invalid_argument("a write needs one data burst per burst");
    }
    ports_.at(static_cast<size_t>(port)).to_send.push_back(std::move(r));
  }
  // Memory contents known to the scoreboard (e.g. after a poke).
  void preload(uint64_t addr, const Burst& data) {
    sys_.poke(addr, data);
    image_[addr] = data;
  }
  bool idle() const {
    for (const auto& p : ports_) {
      if (!p.to_send.empty() || !p.reads.empty() || !p.writes.empty() || !p.wdata.empty()) {
        return false;
      }
    }
    return true;
  }
  size_t pending(int port) const { return ports_.at(static_cast<size_t>(port)).to_send.size(); }

  // One cycle of every port.
  void cycle() {
    auto& m = sys_.top();
    const uint64_t now = sys_.cycle();
    for (int p = 0; p < sys_.ports(); ++p) {
      Port& st = ports_[static_cast<size_t>(p)];
      const bool req = !st.to_send.empty() && st.to_send.front().not_before <= now;
      HbmSystem<Model>::set_bit(m.req_valid_i, p, req);
      if (req) {
        const HbmRequest& r = st.to_send.front();
        HbmSystem<Model>::set_bit(m.req_write_i, p, r.write);
        put_bits(m.req_addr_i, 32 * p, 32, r.addr);
        put_bits(m.req_len_i, 4 * p, 4, static_cast<uint64_t>(r.bursts - 1));
        put_bits(m.req_id_i, 4 * p, 4, static_cast<uint64_t>(r.id));
      }
      const bool wd = !st.wdata.empty() && pct(opt_.wd_pct);
      HbmSystem<Model>::set_bit(m.wd_valid_i, p, wd);
      if (wd) {
        const auto& [data, strb] = st.wdata.front();
        for (int k = 0; k < 8; ++k) {
          uint32_t w = 0;
          for (int b = 0; b < 4; ++b) w |= static_cast<uint32_t>(data[4 * k + b]) << (8 * b);
          put_elem<32>(m.wd_data_i, 8 * p + k, w);
        }
        put_elem<32>(m.wd_strb_i, p, strb);
      }
      HbmSystem<Model>::set_bit(m.rd_ready_i, p, pct(opt_.ready_pct));
      HbmSystem<Model>::set_bit(m.wr_done_ready_i, p, pct(opt_.ready_pct));
    }
    sys_.exchange_pins();
    for (int p = 0; p < sys_.ports(); ++p) observe(p, now);
    sys_.tick();
  }

  // Runs until every queued request has been answered (throws after `limit` cycles).
  void run(uint64_t limit = 10'000'000) {
    const uint64_t start = sys_.cycle();
    while (!idle()) {
      if (sys_.cycle() - start > limit) {
        throw std::runtime_error("HBM traffic did not finish within " + std::to_string(limit) +
                                 " cycles: " + where());
      }
      cycle();
    }
  }
  const Results& results() const { return results_; }
  uint64_t errors() const { return errors_; }
  const std::vector<std::string>& mismatches() const { return mismatches_; }

 private:
  struct PendingRead {
    int id;
    int bursts_left;
    uint64_t addr;  // next burst's address
    uint64_t accepted;
    bool err;
    std::vector<Burst> expect;
  };
  struct PendingWrite {
    int id;
    bool err;
  };
  struct Port {
    std::deque<HbmRequest> to_send;
    std::deque<PendingRead> reads;
    std::deque<PendingWrite> writes;
    std::deque<std::pair<Burst, uint32_t>> wdata;  // beats still to send
  };

  bool pct(int p) { return p >= 100 || static_cast<int>(rng_() % 100) < p; }

  void fail(const std::string& what) {
    ++errors_;
    if (mismatches_.size() < 20) mismatches_.push_back(what);
  }

  void observe(int p, uint64_t now) {
    auto& m = sys_.top();
    Port& st = ports_[static_cast<size_t>(p)];
    using S = HbmSystem<Model>;
    if (!st.to_send.empty() && S::bit(m.req_valid_i, p) && S::bit(m.req_ready_o, p)) {
      HbmRequest r = std::move(st.to_send.front());
      st.to_send.pop_front();
      results_.first_accept = std::min(results_.first_accept, now);
      bool err = false;
      for (int b = 0; b < r.bursts; ++b) err |= !sys_.map().in_range(r.addr + 32ull * b);
      if (r.write) {
        ++results_.write_requests;
        results_.write_bursts += static_cast<uint64_t>(r.bursts);
        for (int b = 0; b < r.bursts; ++b) {
          const uint32_t strb = r.strb.empty() ? 0xFFFFFFFFu : r.strb[static_cast<size_t>(b)];
          st.wdata.emplace_back(r.data[static_cast<size_t>(b)], strb);
          const uint64_t a = r.addr + 32ull * b;
          if (!sys_.map().in_range(a)) continue;
          Burst& img = image_[a];
          for (int k = 0; k < kBurstBytes; ++k) {
            if ((strb >> k) & 1) img[k] = r.data[static_cast<size_t>(b)][k];
          }
        }
        st.writes.push_back({r.id, err});
      } else {
        ++results_.read_requests;
        results_.read_bursts += static_cast<uint64_t>(r.bursts);
        PendingRead pr{r.id, r.bursts, r.addr, now, err, {}};
        for (int b = 0; b < r.bursts; ++b) {
          const uint64_t a = r.addr + 32ull * b;
          const auto it = image_.find(a);
          pr.expect.push_back(!sys_.map().in_range(a) || it == image_.end() ? Burst{} : it->second);
        }
        st.reads.push_back(std::move(pr));
      }
    }
    if (!st.wdata.empty() && S::bit(m.wd_valid_i, p) && S::bit(m.wd_ready_o, p)) {
      st.wdata.pop_front();
    }
    if (S::bit(m.rd_valid_o, p) && S::bit(m.rd_ready_i, p)) {
      results_.last_response = now;
      if (st.reads.empty()) {
        fail("port " + std::to_string(p) + ": read data with no read outstanding at cycle " +
             std::to_string(now));
      } else {
        PendingRead& pr = st.reads.front();
        const int id = static_cast<int>(S::field(m.rd_id_o, 4 * p, 4));
        const bool last = S::bit(m.rd_last_o, p);
        const bool err = S::bit(m.rd_err_o, p);
        const bool oor = !sys_.map().in_range(pr.addr);
        if (id != pr.id || last != (pr.bursts_left == 1) || err != oor) {
          std::ostringstream s;
          s << "port " << p << " cycle " << now << " read of 0x" << std::hex << pr.addr << std::dec
            << ": got id " << id << " last " << last << " err " << err << ", expected id " << pr.id
            << " last " << (pr.bursts_left == 1) << " err " << oor;
          fail(s.str());
        }
        Burst got;
        for (int k = 0; k < kBurstBytes; ++k) {
          got[k] = static_cast<uint8_t>(get_elem<8>(m.rd_data_o, 32 * p + k));
        }
        const size_t idx = pr.expect.size() - static_cast<size_t>(pr.bursts_left);
        if (opt_.check_data && got != pr.expect[idx]) {
          std::ostringstream s;
          s << "port " << p << " cycle " << now << " read of 0x" << std::hex << pr.addr << ": data "
            << hexs(got) << ", expected " << hexs(pr.expect[idx]);
          fail(s.str());
        }
        pr.addr += 32;
        if (--pr.bursts_left == 0) {
          results_.read_latencies.push_back(now - pr.accepted);
          st.reads.pop_front();
        }
      }
    }
    if (S::bit(m.wr_done_valid_o, p) && S::bit(m.wr_done_ready_i, p)) {
      results_.last_response = now;
      if (st.writes.empty()) {
        fail("port " + std::to_string(p) + ": write completion with no write outstanding");
      } else {
        const int id = static_cast<int>(S::field(m.wr_done_id_o, 4 * p, 4));
        const bool err = S::bit(m.wr_done_err_o, p);
        if (id != st.writes.front().id || err != st.writes.front().err) {
          std::ostringstream s;
          s << "port " << p << " cycle " << now << ": write completion id " << id << " err " << err
            << ", expected id " << st.writes.front().id << " err " << st.writes.front().err;
          fail(s.str());
        }
        st.writes.pop_front();
      }
    }
  }

  static std::string hexs(const Burst& b) {
    static const char kD[] = "0123456789abcdef";
    std::string s;
    for (int i = kBurstBytes - 1; i >= 0; --i) {
      s += kD[b[static_cast<size_t>(i)] >> 4];
      s += kD[b[static_cast<size_t>(i)] & 15];
    }
    return s;
  }

  std::string where() const {
    std::ostringstream s;
    for (size_t p = 0; p < ports_.size(); ++p) {
      s << "port " << p << ": " << ports_[p].to_send.size() << " to send, "
        << ports_[p].reads.size() << " reads and " << ports_[p].writes.size()
        << " writes outstanding, " << ports_[p].wdata.size() << " data beats to send; ";
    }
    return s.str();
  }

  HbmSystem<Model>& sys_;
  std::mt19937_64 rng_;
  Options opt_;
  std::vector<Port> ports_;
  std::unordered_map<uint64_t, Burst> image_;
  Results results_;
  uint64_t errors_ = 0;
  std::vector<std::string> mismatches_;
};

}  // namespace tessera::hbm
