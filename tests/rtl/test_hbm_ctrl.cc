// The HBM2 pseudo-channel controller (tpu_hbm_ctrl) driving the device model
// (harness/hbm/hbm_device.h) pin to pin, every cycle: every command the controller issues goes
// through the timing checker and the data-timing rules, so any protocol bug throws and fails the
// test. A scoreboard checks that every read returns the data of the last write accepted before
// it and that responses of one id come back in request order; random traffic from several
// masters (ids), with and without back-pressure and request gaps; runs over several refresh
// intervals count the refreshes (single-bank at the defaults, all-bank under the distinct
// timing); a sequential read stream reports its bandwidth as a fraction of peak.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "Vtpu_hbm_ctrl.h"
#include "Vtpu_hbm_ctrl_alt.h"
#include "harness/hbm/hbm_device.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using hbm::Burst;

// The controller's address map (ColLow): burst = addr >> 5; bg = [1:0], col = [6:2],
// bank = [8:7], row = [22:9].
struct Loc {
  int bg, bank;
  uint32_t row, col;
};
Loc locate(uint32_t addr) {
  const uint32_t b = addr >> 5;
  return {static_cast<int>(b & 3), static_cast<int>((b >> 7) & 3), (b >> 9) & 0x3FFF,
          (b >> 2) & 0x1F};
}
uint32_t addr_of(int bg, int bank, uint32_t row, uint32_t col) {
  return ((row << 9) | (static_cast<uint32_t>(bank) << 7) | (col << 2) |
          static_cast<uint32_t>(bg))
         << 5;
}

std::string hex(const Burst& b) {
  std::ostringstream s;
  for (int i = hbm::kBurstBytes - 1; i >= 0; --i) {
    static const char kD[] = "0123456789abcdef";
    s << kD[b[i] >> 4] << kD[b[i] & 15];
  }
  return s.str();
}

struct Req {
  bool write = false;
  uint32_t addr = 0;
  int id = 0;
  Burst data{};
  uint32_t strb = 0xFFFFFFFFu;  // byte enables
};

// The bench: one controller model (built with the timing parameters of `timing`) and the device
// model under the same timing.
template <class Model>
class HbmCtrlBench : public ::testing::Test {
 protected:
  explicit HbmCtrlBench(const hbm::HbmTiming& timing = hbm::HbmTiming{})
      : timing_(timing), sim_(test::current_test_name()), dev_(timing), rng_(test::test_seed()) {
    auto& m = sim_.top();
    m.req_valid_i = 0;
    m.req_write_i = 0;
    m.req_addr_i = 0;
    m.req_id_i = 0;
    for (int w = 0; w < 8; ++w) m.req_wdata_i[w] = 0;
    m.req_wstrb_i = 0xFFFFFFFFu;
    m.rd_ready_i = 0;
    m.wr_done_ready_i = 0;
    m.rdata_valid_i = 0;
    for (int w = 0; w < 4; ++w) m.rdata_i[w] = 0;
    sim_.reset();
  }

  Burst random_burst() {
    Burst b;
    for (auto& x : b) x = static_cast<uint8_t>(rng_());
    return b;
  }

  // Loads memory through the backdoor (device and scoreboard alike).
  void preload(uint32_t addr, const Burst& data) {
    const Loc l = locate(addr);
    dev_.poke(l.bg, l.bank, l.row, l.col, data);
    mem_[addr] = data;
  }

  // One cycle: `req` (may be null) is presented; returns whether it was accepted.
  bool cycle(const Req* req, bool rd_ready, bool wd_ready) {
    auto& m = sim_.top();
    m.req_valid_i = req != nullptr;
    if (req) {
      m.req_write_i = req->write;
      m.req_addr_i = req->addr;
      m.req_id_i = static_cast<uint8_t>(req->id);
      for (int k = 0; k < hbm::kBurstBytes; ++k) put_elem<8>(m.req_wdata_i, k, req->data[k]);
      m.req_wstrb_i = req->strb;
    }
    m.rd_ready_i = rd_ready;
    m.wr_done_ready_i = wd_ready;
    sim_.eval();

    hbm::HbmPinsIn in;
    in.cmd_valid = m.cmd_valid_o;
    in.cmd = static_cast<hbm::HbmCmd>(m.cmd_o);
    in.bg = m.bg_o;
    in.bank = m.bank_o;
    in.row = m.row_o;
    in.col = m.col_o;
    in.wdata_valid = m.wdata_valid_o;
    in.wstrb = m.wdata_strb_o;
    for (int k = 0; k < hbm::kBeatBytes; ++k) {
      in.wdata[k] = static_cast<uint8_t>(get_elem<8>(m.wdata_o, k));
    }
    if (in.cmd_valid) {
      ++cmd_count_[m.cmd_o];
      cmds_.push_back({sim_.cycle(), in.cmd, in.bg, in.bank, in.row});
    }
    if (in.cmd_valid && in.cmd == hbm::HbmCmd::kRef) ref_cycles_.push_back(sim_.cycle());
    if (in.cmd_valid && in.cmd == hbm::HbmCmd::kRefSb) {
      refsb_.push_back({sim_.cycle(), in.bg * timing_.banks_per_group + in.bank});
    }
    const hbm::HbmPinsOut out = dev_.step(sim_.cycle(), in);  // throws on any violation
    m.rdata_valid_i = out.rdata_valid;
    for (int k = 0; k < hbm::kBeatBytes; ++k) put_elem<8>(m.rdata_i, k, out.rdata[k]);
    sim_.eval();

    const bool accepted = req && m.req_ready_o;
    if (accepted) {
      if (req->write) {
        Burst& cur = mem_[req->addr];  // zeros if never written, as in the device model
        for (int k = 0; k < hbm::kBurstBytes; ++k) {
          if ((req->strb >> k) & 1) cur[k] = req->data[k];
        }
        ++writes_due_[req->id];
      } else {
        const auto it = mem_.find(req->addr);
        reads_due_[req->id].push_back(
            {req->addr, it == mem_.end() ? Burst{} : it->second, accept_seq_++});
      }
      ++outstanding_;
    }
    if (m.rd_valid_o && rd_ready) {
      const int id = m.rd_id_o;
      auto& q = reads_due_[id];
      EXPECT_FALSE(q.empty()) << "read response for id " << id << " with none outstanding";
      if (!q.empty()) {
        Burst got;
        for (int k = 0; k < hbm::kBurstBytes; ++k) {
          got[k] = static_cast<uint8_t>(get_elem<8>(m.rd_data_o, k));
        }
        EXPECT_EQ(hex(q.front().data), hex(got))
            << "id " << id << " read of 0x" << std::hex << q.front().addr << std::dec
            << " at cycle " << sim_.cycle();
        if (q.front().seq < last_resp_seq_) ++reordered_;
        last_resp_seq_ = q.front().seq;
        q.pop_front();
        ++reads_done_;
        --outstanding_;
      }
    }
    if (m.wr_done_valid_o && wd_ready) {
      const int id = m.wr_done_id_o;
      EXPECT_GT(writes_due_[id], 0) << "write completion for id " << id << " with none due";
      --writes_due_[id];
      --outstanding_;
    }
    sim_.tick();
    return accepted;
  }

  // Runs until every response has come back and the controller is idle.
  void drain(uint64_t limit = 200'000) {
    uint64_t n = 0;
    while ((outstanding_ != 0 || sim_.top().busy_o) && n++ < limit) cycle(nullptr, true, true);
    ASSERT_EQ(outstanding_, 0) << "responses missing after " << limit << " cycles";
    for (int i = 0; i < 8; ++i) cycle(nullptr, true, true);
    dev_.finish(sim_.cycle());
  }

  // Random traffic from `masters` ids over a pool of addresses in a few rows of every bank.
  // `busy_pct`: chance a master presents a request in a cycle; `ready_pct`: response ready.
  void random_traffic(uint64_t cycles, int masters, int busy_pct, int ready_pct,
                      int pool_size = 1024) {
    std::vector<uint32_t> pool;
    for (int i = 0; i < pool_size; ++i) {
      const uint32_t addr = addr_of(rng_() % 4, rng_() % 4, rng_() % 4, rng_() % 32);
      if (!mem_.count(addr)) preload(addr, random_burst());
      pool.push_back(addr);
    }
    bool have = false;
    Req cur;
    for (uint64_t c = 0; c < cycles; ++c) {
      if (!have && static_cast<int>(rng_() % 100) < busy_pct) {
        cur.id = static_cast<int>(rng_() % masters);
        cur.write = rng_() % 100 < 40;
        // Some locality: half the requests go near the previous address.
        cur.addr = (rng_() % 2) ? pool[rng_() % pool.size()] : (cur.addr + 32) & 0xFFFFFE0u;
        if (cur.write) {
          cur.data = random_burst();
          // a quarter of the writes are partial (byte strobes)
          cur.strb = (rng_() % 4 == 0) ? static_cast<uint32_t>(rng_()) : 0xFFFFFFFFu;
        }
        have = true;
      }
      const bool rd = static_cast<int>(rng_() % 100) < ready_pct;
      const bool wd = static_cast<int>(rng_() % 100) < ready_pct;
      if (cycle(have ? &cur : nullptr, rd, wd)) {
        have = false;
      } else if (have) {
        ++stalled_;
      }
    }
    drain();
  }

  // A sequential read stream of `bursts` bursts from address 0 (preloaded); returns the achieved
  // bandwidth as a fraction of the data bus's peak (16 B/cycle), from first acceptance to last
  // response.
  double stream_reads(uint32_t bursts) {
    for (uint32_t i = 0; i < bursts; ++i) preload(i * 32, random_burst());
    uint32_t next = 0;
    uint64_t first = 0, last = 0;
    Req r;
    while (reads_done_ < bursts) {
      r.addr = next * 32;
      r.id = 0;
      const bool want = next < bursts;
      if (cycle(want ? &r : nullptr, true, true)) {
        if (next == 0) first = sim_.cycle();
        ++next;
      }
      last = sim_.cycle();
      if (last - first > 40u * bursts) {
        ADD_FAILURE() << "stream stalled";
        return 0;
      }
    }
    drain();
    const double bytes = 32.0 * bursts;
    const double fraction = bytes / 16.0 / static_cast<double>(last - first);
    std::cout << "streaming read: " << bursts << " bursts in " << (last - first)
              << " cycles = " << bytes / static_cast<double>(last - first)
              << " B/cycle, fraction of peak (16 B/cycle) = " << fraction << " (ACT "
              << cmd_count_[0] << ", PRE " << cmd_count_[3] << ", REF " << cmd_count_[4]
              << ", REFSB " << cmd_count_[5] << ")\n";
    return fraction;
  }

  // Appends `count` writes of random data in order over the bank groups and columns of `row`
  // of `bank`.
  void append_writes(std::vector<Req>& reqs, int count, int bank, uint32_t row) {
    for (int i = 0; i < count; ++i) {
      Req w;
      w.write = true;
      w.id = 4;
      w.addr = addr_of(i % 4, bank, row, static_cast<uint32_t>(i / 4));
      w.data = random_burst();
      reqs.push_back(w);
    }
  }

  // Presents `reqs` in order, one a cycle until accepted, then drains.
  void run(const std::vector<Req>& reqs) {
    size_t next = 0;
    for (uint64_t c = 0; next < reqs.size(); ++c) {
      ASSERT_LT(c, 100'000u) << "request " << next << " never accepted";
      if (cycle(&reqs[next], true, true)) ++next;
    }
    drain();
  }

  // The column commands in issue order, as runs of one kind: {is_write, count}.
  std::vector<std::pair<bool, int>> column_runs() const {
    std::vector<std::pair<bool, int>> runs;
    for (const Cmd& c : cmds_) {
      if (c.cmd != hbm::HbmCmd::kRd && c.cmd != hbm::HbmCmd::kWr) continue;
      const bool w = c.cmd == hbm::HbmCmd::kWr;
      if (runs.empty() || runs.back().first != w) runs.push_back({w, 0});
      ++runs.back().second;
    }
    return runs;
  }

  struct Cmd {
    uint64_t cycle;
    hbm::HbmCmd cmd;
    int bg, bank;
    uint32_t row;
  };
  std::vector<Cmd> cmds_;  // every command issued, in order
  struct Due {
    uint32_t addr;
    Burst data;
    uint64_t seq;
  };
  hbm::HbmTiming timing_;
  SimCtrl<Model> sim_;
  hbm::HbmChannelModel dev_;
  std::mt19937_64 rng_;
  std::map<uint32_t, Burst> mem_;
  std::map<int, std::deque<Due>> reads_due_;
  std::map<int, int> writes_due_;
  int64_t outstanding_ = 0;
  uint64_t accept_seq_ = 0, last_resp_seq_ = 0, reordered_ = 0, reads_done_ = 0;
  uint64_t cmd_count_[8] = {};
  uint64_t stalled_ = 0;  // cycles a presented request was not accepted
  std::vector<uint64_t> ref_cycles_;
  struct RefSb {
    uint64_t cycle;
    int bank;  // bg * banks_per_group + bank
  };
  std::vector<RefSb> refsb_;
};

// The controller at its defaults (the brief's timing).
using HbmCtrl = HbmCtrlBench<Vtpu_hbm_ctrl>;

class HbmCtrlAlt : public HbmCtrlBench<Vtpu_hbm_ctrl_alt> {
 protected:
  HbmCtrlAlt() : HbmCtrlBench(hbm::HbmTiming::alternate()) {}
};

TEST_F(HbmCtrlAlt, RandomTrafficScoreboard) {
  random_traffic(20000, 6, 100, 100);
  std::cout << "reads " << reads_done_ << ", WR " << cmd_count_[2] << ", REF " << cmd_count_[4]
            << "\n";
  EXPECT_GT(reads_done_, 500u);
  EXPECT_GE(cmd_count_[4], 90u);
}

TEST_F(HbmCtrlAlt, RandomTrafficBackPressure) {
  random_traffic(20000, 6, 60, 40);
  EXPECT_GT(reads_done_, 500u);
}

TEST_F(HbmCtrlAlt, SameAddressHazards) {
  random_traffic(10000, 4, 100, 80, 12);
  EXPECT_GT(reads_done_, 300u);
}

TEST_F(HbmCtrl, RandomTrafficScoreboard) {
  random_traffic(20000, 6, 100, 100);
  std::cout << "reads " << reads_done_ << ", ACT " << cmd_count_[0] << " RD " << cmd_count_[1]
            << " WR " << cmd_count_[2] << " PRE " << cmd_count_[3] << " REF " << cmd_count_[4]
            << ", responses returned out of request order across ids: " << reordered_
            << ", cycles a request waited: " << stalled_ << "\n";
  EXPECT_GT(reads_done_, 1000u);
  EXPECT_GT(cmd_count_[2], 700u);
}

TEST_F(HbmCtrl, RandomTrafficBackPressure) {
  random_traffic(20000, 6, 60, 40);
  EXPECT_GT(reads_done_, 500u);
}

// A pool of 12 addresses: most requests meet a queued write or read of the same address, so
// the front-end hazard stalls and the write drains they force are exercised.
TEST_F(HbmCtrl, SameAddressHazards) {
  random_traffic(10000, 4, 100, 80, 12);
  std::cout << "reads " << reads_done_ << ", WR " << cmd_count_[2]
            << ", cycles a request waited: " << stalled_ << "\n";
  EXPECT_GT(reads_done_, 500u);
}

// A continuous read stream with one write in it: the write still completes (writes are not
// starved by reads; WriteMaxAge bounds the wait).
TEST_F(HbmCtrl, WriteNotStarvedByReads) {
  Req w;
  w.write = true;
  w.id = 5;
  w.addr = addr_of(2, 3, 100, 7);
  w.data = random_burst();
  Req r;
  r.id = 1;
  uint32_t next = 0;
  bool write_sent = false;
  uint64_t write_cycle = 0, done_cycle = 0;
  for (int c = 0; c < 4000; ++c) {
    const bool send_write = !write_sent && c > 100;
    r.addr = (next % 4096) * 32;
    const Req* req = send_write ? &w : &r;
    const int before = writes_due_[5];
    if (cycle(req, true, true)) {
      if (send_write) {
        write_sent = true;
        write_cycle = sim_.cycle();
      } else {
        ++next;
      }
    }
    if (write_sent && done_cycle == 0 && writes_due_[5] == 0 && before == 1) {
      done_cycle = sim_.cycle();
    }
  }
  drain();
  ASSERT_TRUE(write_sent);
  ASSERT_NE(done_cycle, 0u) << "write never completed while reads streamed";
  std::cout << "write completed " << done_cycle - write_cycle << " cycles after acceptance\n";
  EXPECT_LT(done_cycle - write_cycle, 1500u);
}

// A read stream: bursts in order over the four bank groups and 32 columns of `bank`, row after
// row from `row0`.
std::vector<Req> read_stream(int bank, uint32_t row0, int bursts) {
  std::vector<Req> v;
  for (int i = 0; i < bursts; ++i) {
    Req r;
    r.id = 1;
    r.addr = addr_of(i % 4, bank, row0 + static_cast<uint32_t>(i / 128),
                     static_cast<uint32_t>((i / 4) % 32));
    v.push_back(r);
  }
  return v;
}

// A write drain forced by age (WriteMaxAge), with fewer writes queued than WriteHigh, issues
// MinDrain (16) WRs or empties the queue before reads resume: one bus turnaround for all twelve
// writes, not one for every few (at WriteLow with reads waiting, a drain ends after one WR).
TEST_F(HbmCtrl, AgedWriteDrainIssuesAllItsWritesInOneRun) {
  std::vector<Req> reqs = read_stream(0, 10, 200);
  append_writes(reqs, 12, 2, 50);
  const std::vector<Req> more = read_stream(0, 12, 1200);  // reads wait for the whole drain
  reqs.insert(reqs.end(), more.begin(), more.end());
  run(reqs);
  const auto runs = column_runs();
  std::vector<int> write_runs;
  for (const auto& r : runs) {
    if (r.first) write_runs.push_back(r.second);
  }
  std::cout << "write runs:";
  for (int n : write_runs) std::cout << " " << n;
  std::cout << " (of " << runs.size() << " runs)\n";
  ASSERT_EQ(write_runs.size(), 1u) << "the writes were split over several drains";
  EXPECT_EQ(write_runs[0], 12);
  EXPECT_TRUE(runs.front().first == false && runs.back().first == false)
      << "the drain came before the first read or after the last: not forced by age";
}

// Row preparation: writes queued for a closed bank that the read stream does not use get their
// ACT in a cycle the reads leave free, so when the drain starts the first WR waits only for the
// read data to leave the bus (CL + Burst - CWL after the last RD), not for tRCD as well.
TEST_F(HbmCtrl, WriteRowOpenedWhileReadsStream) {
  const hbm::HbmTiming& t = timing_;
  std::vector<Req> reqs = read_stream(0, 10, 300);
  append_writes(reqs, 24, 2, 50);  // WriteHigh: the drain starts when the last is queued
  const std::vector<Req> more = read_stream(0, 13, 300);
  reqs.insert(reqs.end(), more.begin(), more.end());
  run(reqs);
  size_t first_wr = 0;
  while (first_wr < cmds_.size() && cmds_[first_wr].cmd != hbm::HbmCmd::kWr) ++first_wr;
  ASSERT_LT(first_wr, cmds_.size());
  size_t act = 0, last_rd = 0;
  for (size_t i = 0; i < first_wr; ++i) {
    if (cmds_[i].cmd == hbm::HbmCmd::kAct && cmds_[i].bank == 2 && cmds_[i].row == 50 && !act) {
      act = i;
    }
    if (cmds_[i].cmd == hbm::HbmCmd::kRd) last_rd = i;
  }
  const uint64_t gap = cmds_[first_wr].cycle - cmds_[last_rd].cycle;
  std::cout << "ACT for the writes at cycle " << cmds_[act].cycle << ", last RD at "
            << cmds_[last_rd].cycle << ", first WR " << gap << " cycles after it\n";
  ASSERT_NE(act, 0u) << "no ACT for the writes' row before the first WR";
  EXPECT_LT(act, last_rd) << "the writes' row was opened only after the reads stopped";
  EXPECT_LE(gap, static_cast<uint64_t>(t.cl + 2 - t.cwl + 2));
}

// At the defaults the controller refreshes one bank at a time: 16 REFSBs owed every tREFI,
// each bank once a set (the device's checker enforces the set and tRFCSB/tRREFD). Under random
// traffic over every bank, banks with queued requests wait until RefUrgent (32) REFSBs are owed,
// so the REFSBs may lag the timer by up to two sets, never more: each bank's refreshes stay
// within 4 x tREFI of each other (two sets plus the lag), well inside the 9 x tREFI limit.
TEST_F(HbmCtrl, SingleBankRefreshDuringTraffic) {
  const hbm::HbmTiming& t = timing_;
  random_traffic(5 * t.trefi + 1000, 4, 90, 90);
  const uint64_t end = sim_.cycle();
  const uint64_t owed = 16 * ((end - 1) / t.trefi);  // the timer's wraps up to the end
  std::cout << refsb_.size() << " REFSBs of " << owed << " owed by cycle " << end << ", "
            << ref_cycles_.size() << " REFs\n";
  EXPECT_TRUE(ref_cycles_.empty()) << "an all-bank REF with single-bank refresh";
  EXPECT_LE(refsb_.size(), owed);
  EXPECT_GE(refsb_.size() + 32, owed);
  std::vector<uint64_t> last(16, 0);
  for (const RefSb& r : refsb_) {
    EXPECT_LE(r.cycle - last[static_cast<size_t>(r.bank)], 4u * t.trefi)
        << "bank " << r.bank << " at cycle " << r.cycle;
    last[static_cast<size_t>(r.bank)] = r.cycle;
  }
}

// The distinct timing's build refreshes all banks at once (RefPerBank = 0): a REF every tREFI,
// never postponed beyond the REF's own wait for the banks to close.
TEST_F(HbmCtrlAlt, RefreshDuringTraffic) {
  const hbm::HbmTiming& t = timing_;
  random_traffic(3 * t.trefi + 1000, 4, 90, 90);
  std::cout << "REF at cycles:";
  for (uint64_t c : ref_cycles_) std::cout << " " << c;
  std::cout << "\n";
  EXPECT_TRUE(refsb_.empty());
  EXPECT_GE(ref_cycles_.size(), 3u);
  for (size_t i = 1; i < ref_cycles_.size(); ++i) {
    EXPECT_LE(ref_cycles_[i] - ref_cycles_[i - 1], static_cast<uint64_t>(t.trefi + t.trfc));
  }
}

// A sequential stream over many refresh intervals: an all-bank REF every tREFI stops the data
// bus for at least tRFC (then the banks reopen), so with REFs a stream could reach at most
// 1 - tRFC / tREFI of the peak (0.933). Refreshing the banks the stream is not using, one at a
// time, keeps it above that ceiling.
TEST_F(HbmCtrl, SingleBankRefreshKeepsAStreamAboveTheAllBankCeiling) {
  const hbm::HbmTiming& t = timing_;
  const double fraction = stream_reads(40000);
  const double ceiling = 1.0 - static_cast<double>(t.trfc) / t.trefi;
  std::cout << "all-bank refresh ceiling " << ceiling << "\n";
  EXPECT_GE(refsb_.size() + 32, 16u * (sim_.cycle() / t.trefi));
  EXPECT_GT(fraction, ceiling);
}

// Two ids each read a sequence that alternates between two rows of one bank (a row-hit
// scheduler is tempted to reorder it); each id's responses must still come in request order.
TEST_F(HbmCtrl, PerIdOrdering) {
  std::vector<Req> reqs;
  for (int i = 0; i < 64; ++i) {
    for (int id = 0; id < 2; ++id) {
      Req r;
      r.id = id == 0 ? 3 : 12;
      r.addr = addr_of(id, 1, (i % 2) ? 7u : 2u, static_cast<uint32_t>(i / 2));
      preload(r.addr, random_burst());
      reqs.push_back(r);
    }
  }
  size_t next = 0;
  while (next < reqs.size()) {
    if (cycle(&reqs[next], rng_() % 2, true)) ++next;
  }
  drain();
  EXPECT_EQ(reads_done_, reqs.size());
}

// Row-hit cap: one request opens row 0 of a bank, an older miss to row 1 of that bank waits while
// 14 hits to row 0 (other ids) queue behind it. FR-FCFS serves hits first, but only RowHitCap
// (8) column commands to the row before the miss gets its PRE: the miss is not served last.
TEST_F(HbmCtrl, RowHitCapBoundsMissWait) {
  std::vector<Req> reqs;
  auto add = [&](int id, uint32_t row, uint32_t col) {
    Req r;
    r.id = id;
    r.addr = addr_of(0, 0, row, col);
    preload(r.addr, random_burst());
    reqs.push_back(r);
  };
  add(0, 0, 0);
  add(1, 1, 0);
  for (int id = 2; id < 16; ++id) add(id, 0, static_cast<uint32_t>(id));
  std::vector<int> order;
  size_t next = 0;
  for (int c = 0; c < 2000 && reads_done_ < reqs.size(); ++c) {
    const uint64_t before = reads_done_;
    sim_.eval();
    const int id = sim_.top().rd_valid_o ? sim_.top().rd_id_o : -1;
    if (cycle(next < reqs.size() ? &reqs[next] : nullptr, true, true)) ++next;
    if (reads_done_ != before) order.push_back(id);
  }
  drain();
  ASSERT_EQ(order.size(), reqs.size());
  const size_t pos = std::find(order.begin(), order.end(), 1) - order.begin();
  std::cout << "the row miss was response " << pos << " of " << order.size() << "\n";
  EXPECT_LE(pos, 9u);
}

// The latencies the RTL header states: on an idle channel a read of a closed bank answers
// CL + 3 + tRCD cycles after acceptance, a row hit CL + 3, a row conflict CL + 3 + tRP + tRCD.
TEST_F(HbmCtrl, IdleReadLatency) {
  const hbm::HbmTiming& t = timing_;
  auto latency = [&](uint32_t addr) {
    Req r;
    r.addr = addr;
    r.id = 2;
    while (!cycle(&r, true, true)) {
    }
    const uint64_t accepted = sim_.cycle();
    for (int c = 0; c < 200; ++c) {
      sim_.eval();
      if (sim_.top().rd_valid_o) break;
      cycle(nullptr, true, true);
    }
    const uint64_t lat = sim_.cycle() + 1 - accepted;
    for (int c = 0; c < 100; ++c) cycle(nullptr, true, true);  // back to idle, tRAS met
    return lat;
  };
  const uint64_t closed = latency(addr_of(1, 2, 5, 3));
  const uint64_t hit = latency(addr_of(1, 2, 5, 4));
  const uint64_t conflict = latency(addr_of(1, 2, 6, 4));
  drain();
  std::cout << "idle read latency: closed bank " << closed << ", row hit " << hit
            << ", row conflict " << conflict << " cycles\n";
  EXPECT_EQ(hit, static_cast<uint64_t>(t.cl + 3));
  EXPECT_EQ(closed, static_cast<uint64_t>(t.cl + 3 + t.trcd));
  EXPECT_EQ(conflict, static_cast<uint64_t>(t.cl + 3 + t.trp + t.trcd));
}

TEST_F(HbmCtrl, StreamingReadBandwidth) { EXPECT_GE(stream_reads(8192), 0.5); }

// Under the distinct timing a stream is bound by refresh: every 200 cycles a REF closes all 16
// banks (tRFC 37, then 16 ACTs under tFAW = 23), and tCCD_S = 3 caps it at 2/3 of the bus.
// This checks that it keeps flowing (and every command is legal), not its speed.
TEST_F(HbmCtrlAlt, StreamingReadBandwidth) { EXPECT_GE(stream_reads(2048), 0.2); }

}  // namespace
}  // namespace tessera
