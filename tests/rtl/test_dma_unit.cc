// The DMA as an ISA unit (tpu_dma_unit): DMA.LOOP and DMA.COPY instructions (docs/isa.md) on the
// HBM port model and the SRAM model (random latency and back-pressure). A copy moves what the
// reference walk (sw/numerics/dma_ref.h) of its loop registers says, bytes outside it unchanged;
// loop registers persist from copy to copy, and each DMA.LOOP writes exactly its two loops of
// its walk; a faulting copy reports FAULT_DMA with its PC, the DMA fault code and the address;
// clear_i resets the loop registers to count 1, stride 0; streamed copies (taken back to back,
// their loops set while the copy before runs) land as their own loops say, faults naming their PCs.
#include <gtest/gtest.h>

#include <random>

#include "Vtpu_dma_unit.h"
#include "harness/hbm/hbm_port_model.h"
#include "harness/hbm/hbm_port_pins.h"
#include "harness/sim_ctrl.h"
#include "harness/sram_port_model.h"
#include "harness/vl_bits.h"
#include "sw/numerics/dma_ref.h"
#include "tessera/chip_params.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr uint64_t kHbmBytes = 1ull << 20,
                   kUbBytes = chip_params::CHIP_UB_BYTES;  // the Vtpu_dma_unit build
constexpr unsigned kHbm = 0, kUb = 1;

class DmaUnit : public ::testing::Test {
 protected:
  DmaUnit()
      : sim_(test::current_test_name()),
        rng_(test::test_seed()),
        hbm_(hbm::HbmPortConfig{kHbmBytes}, rng_()),
        ub_(kUbBytes, rng_()) {
    auto& m = sim_.top();
    m.clear_i = 0;
    m.instr_valid_i = 0;
    m.instr_i = {};
    m.pc_i = 0;
    hbm::drive_hbm_port(m, hbm::HbmSlaveOut{});  // the HBM port idle
    m.ub_rgnt_i = 0;
    m.ub_rdata_i = {};
    m.ub_wgnt_i = 0;
    sim_.reset();
    auto& c = hbm_.config();
    c.req_ready_pct = c.wd_ready_pct = 70;
    ub_.rgnt_pct = ub_.wgnt_pct = 70;
  }

  void step() {
    auto& m = sim_.top();
    const auto h = hbm_.drive();
    hbm::drive_hbm_port(m, h);
    const auto s = ub_.drive();
    m.ub_rgnt_i = s.rgnt;
    m.ub_wgnt_i = s.wgnt;
    sram::put_bytes(m.ub_rdata_i, s.rdata);
    sim_.eval();
    if (m.fault_o) {
      ++faults_;
      last_fault_ = {m.fault_code_o, m.fault_pc_o, m.fault_addr_o, m.fault_info_o};
    }
    hbm_.edge(hbm::hbm_master_out(m));
    ub_.edge(m.ub_rreq_o, m.ub_raddr_o, m.ub_wreq_o, m.ub_waddr_o, m.ub_wmask_o,
             sram::get_bytes(m.ub_wdata_o), sim_.cycle());
    sim_.tick();
  }

  // Hands one instruction to the unit (waiting for ready); returns the cycle it was taken.
  uint64_t take(std::array<uint32_t, 4> w, uint32_t pc) {
    auto& m = sim_.top();
    m.instr_valid_i = 1;
    for (int i = 0; i < 4; ++i) m.instr_i[i] = w[i];
    m.pc_i = pc;
    for (int g = 0;; ++g) {
      sim_.eval();
      const bool taken = m.instr_ready_o;
      const uint64_t at = sim_.cycle();
      step();
      if (taken) {
        m.instr_valid_i = 0;
        return at;
      }
      if (g >= 100000) {
        ADD_FAILURE() << "instruction not taken";
        m.instr_valid_i = 0;
        return at;
      }
    }
  }
  // Hands one instruction to the unit (waiting for ready), then runs until it is idle.
  void issue(std::array<uint32_t, 4> w, uint32_t pc) {
    auto& m = sim_.top();
    take(w, pc);
    for (int g = 0; g < 2'000'000; ++g) {
      sim_.eval();
      if (m.idle_o) return;
      step();
    }
    ADD_FAILURE() << "copy never finished";
  }
  static std::array<uint32_t, 4> loop(int walk, int pair, const dma::Loop& a, const dma::Loop& b) {
    return {isa::OP_DMA_LOOP | uint32_t(walk) << 8 | uint32_t(pair) << 9 | a.count << 16,
            uint32_t(a.stride), b.count, uint32_t(b.stride)};
  }
  static std::array<uint32_t, 4> copy(unsigned ss, unsigned ds, unsigned e, uint32_t src,
                                      uint32_t dst) {
    return {isa::OP_DMA_COPY | ss << 8 | ds << 9 | e << 12, src, dst, 0};
  }

  uint8_t read(unsigned space, uint64_t a) const {
    return space == kHbm ? hbm_.read_byte(a) : ub_.mem_[a];
  }

  // Programs both walks' loops, copies, and checks every destination byte of the walk.
  void copy_and_check(unsigned ss, const dma::Descriptor& s, unsigned ds, const dma::Descriptor& d,
                      unsigned e, uint32_t pc) {
    for (int p = 0; p < 2; ++p) {
      issue(loop(0, p, s.loops[2 * p], s.loops[2 * p + 1]), pc);
      issue(loop(1, p, d.loops[2 * p], d.loops[2 * p + 1]), pc);
    }
    dma::Descriptor sl = s, dl = d;
    sl.elem_bytes = dl.elem_bytes = e;
    sl.limit = ss == kHbm ? kHbmBytes : kUbBytes;
    dl.limit = ds == kHbm ? kHbmBytes : kUbBytes;
    const auto sw = dma::reference_walk(sl), dw = dma::reference_walk(dl);
    std::vector<uint8_t> expect;
    for (uint64_t a : sw.addrs) {
      for (unsigned k = 0; k < e; ++k) expect.push_back(read(ss, a + k));
    }
    issue(copy(ss, ds, e, uint32_t(s.base), uint32_t(d.base)), pc);
    for (size_t i = 0; i < dw.addrs.size(); ++i) {
      for (unsigned k = 0; k < e; ++k) {
        ASSERT_EQ(read(ds, dw.addrs[i] + k), expect[e * i + k]) << "element " << i;
      }
    }
  }

  struct Fault {
    uint32_t code, pc, addr, info;
  };
  SimCtrl<Vtpu_dma_unit> sim_;
  std::mt19937_64 rng_;
  hbm::HbmPortModel hbm_;
  sram::SramPortModel ub_;
  int faults_ = 0;
  Fault last_fault_{};
};

TEST_F(DmaUnit, LoopsAndCopiesMoveTheWalks) {
  copy_and_check(kHbm, dma::im2col_3x3(0x4000, 28, 28, 2, kHbmBytes), kUb,
                 dma::transpose(0, 9, 26 * 26, 2, kUbBytes), 2, 0x100);
  copy_and_check(kUb, dma::pool_2x2(0x2000, 12, 12, 4, kUbBytes), kHbm,
                 dma::batch_slice(0x10000, 0, 1, 12 * 12, 4, kHbmBytes), 4, 0x110);
  EXPECT_EQ(faults_, 0);
}

// Loop registers persist: a second copy with no DMA.LOOP reuses them; clear_i resets them.
TEST_F(DmaUnit, LoopRegistersPersistUntilClear) {
  dma::Descriptor s, d;
  s.base = 0x100;
  s.loops[0] = {16, 4};
  d.base = 0x9000;
  d.loops[0] = {16, 4};
  copy_and_check(kHbm, s, kHbm, d, 4, 0x200);
  issue(copy(kHbm, kHbm, 4, 0x400, 0xA000), 0x210);  // 16 elements again, no DMA.LOOP
  for (int k = 0; k < 64; ++k) EXPECT_EQ(hbm_.read_byte(0xA000 + k), hbm_.read_byte(0x400 + k));
  auto& m = sim_.top();
  m.clear_i = 1;
  step();
  m.clear_i = 0;
  const uint8_t b40 = hbm_.read_byte(0xB004);
  issue(copy(kHbm, kHbm, 4, 0x800, 0xB000), 0x220);  // one element now
  for (int k = 0; k < 4; ++k) EXPECT_EQ(hbm_.read_byte(0xB000 + k), hbm_.read_byte(0x800 + k));
  EXPECT_EQ(hbm_.read_byte(0xB004), b40) << "only one element after clear";
}

// HBM writes are posted: the unit takes the next copy once a copy's writes are issued, while
// their completions are still on the way, and idle_o (which SIGNAL, FENCE and HALT wait for)
// stays low until every completion is back. A later copy reading the same HBM bytes through the
// port gets the written data.
TEST_F(DmaUnit, HbmWritesArePostedAndIdleWaitsForTheirCompletions) {
  auto& c = hbm_.config();
  c.req_ready_pct = c.wd_ready_pct = 100;
  c.min_latency = c.max_latency = 300;  // completions 300 cycles after each write
  ub_.rgnt_pct = ub_.wgnt_pct = 100;
  auto& m = sim_.top();
  for (int k = 0; k < 256; ++k) ub_.mem_[0x100 + k] = static_cast<uint8_t>(rng_());
  issue(loop(0, 0, {64, 4}, {1, 0}), 0x10);  // 64 fp32 elements, contiguous, both walks
  issue(loop(1, 0, {64, 4}, {1, 0}), 0x20);
  const uint64_t t1 = take(copy(kUb, kHbm, 4, 0x100, 0x4000), 0x30);
  const uint64_t t2 = take(copy(kUb, kHbm, 4, 0x100, 0x8000), 0x40);
  EXPECT_LT(t2 - t1, 150u) << "the second copy waited for the first one's completions";
  uint64_t idle_at = 0;
  for (int g = 0; g < 5000 && !idle_at; ++g) {
    sim_.eval();
    if (m.idle_o) idle_at = sim_.cycle();
    step();
  }
  ASSERT_NE(idle_at, 0u) << "never idle";
  EXPECT_GE(idle_at, t2 + 300) << "idle before the second copy's completions";
  for (int k = 0; k < 256; ++k) {
    ASSERT_EQ(hbm_.read_byte(0x4000 + k), ub_.mem_[0x100 + k]) << k;
    ASSERT_EQ(hbm_.read_byte(0x8000 + k), ub_.mem_[0x100 + k]) << k;
  }
  // Read-after-write through the port: a copy of what was just written, posted again.
  take(copy(kUb, kHbm, 4, 0x100, 0xC000), 0x50);
  issue(copy(kHbm, kUb, 4, 0xC000, 0x2000), 0x60);
  for (int k = 0; k < 256; ++k) ASSERT_EQ(ub_.mem_[0x2000 + k], ub_.mem_[0x100 + k]) << k;
  EXPECT_EQ(faults_, 0);
}

TEST_F(DmaUnit, FaultsReportCodePcAndAddress) {
  dma::Descriptor s, d;
  s.base = 0;
  s.loops[0] = {100, 4};
  d.base = kUbBytes - 40;  // the 11th element leaves the UB
  d.loops[0] = {100, 4};
  for (int p = 0; p < 2; ++p) {
    issue(loop(0, p, s.loops[2 * p], s.loops[2 * p + 1]), 0);
    issue(loop(1, p, d.loops[2 * p], d.loops[2 * p + 1]), 0);
  }
  issue(copy(kHbm, kUb, 4, 0, uint32_t(d.base)), 0x330);
  EXPECT_EQ(faults_, 1);
  EXPECT_EQ(last_fault_.code, uint32_t(isa::FAULT_DMA));
  EXPECT_EQ(last_fault_.pc, 0x330u);
  EXPECT_EQ(last_fault_.addr, uint32_t(kUbBytes));
  EXPECT_EQ(last_fault_.info, chip_params::DMA_FAULT_DST_RANGE);
  // element size 3: fault code 4 at the next copy's PC
  issue(copy(kHbm, kUb, 3, 0, 0), 0x340);
  EXPECT_EQ(faults_, 2);
  EXPECT_EQ(last_fault_.pc, 0x340u);
  EXPECT_EQ(last_fault_.info, 4u);
}

// Instructions streamed as a sequencer hands them over: loads back to back, the next copy's
// DMA.LOOPs taken while a copy runs, then a faulting copy behind them and a copy offered behind
// that. Every load lands as its own loop settings say, the fault names its own PC, no copy is
// taken before or in the cycle of that fault, and idle_o waits for all of it.
TEST_F(DmaUnit, StreamedCopiesKeepTheirLoopsAndPcs) {
  auto& m = sim_.top();
  std::vector<std::vector<uint8_t>> want;
  std::vector<uint64_t> cycles_taken;
  for (uint32_t i = 0; i < 6; ++i) {
    // copy i: 16 rows of (8 + i) fp32 from HBM rows 256 bytes apart, packed into the UB
    const uint32_t run = 8 + i, src = 0x10000 + i * 0x2000, dst = 0x1000 + i * 0x800;
    std::vector<uint8_t> w;
    for (uint32_t r = 0; r < 16; ++r)
      for (uint32_t b = 0; b < run * 4; ++b) w.push_back(hbm_.read_byte(src + r * 256 + b));
    want.push_back(w);
    take(loop(0, 0, {run, 4}, {16, 256}), 0x100 + 16 * i);
    take(loop(1, 0, {run, 4}, {16, int64_t(run * 4)}), 0x104 + 16 * i);
    cycles_taken.push_back(take(copy(kHbm, kUb, 4, src, dst), 0x108 + 16 * i));
    EXPECT_FALSE(m.idle_o);
  }
  take(loop(1, 0, {100, 4}, {1, 0}), 0x200);
  take(loop(0, 0, {100, 4}, {1, 0}), 0x204);
  take(copy(kHbm, kUb, 4, 0, uint32_t(kUbBytes - 40)), 0x208);  // leaves the UB
  // a copy offered behind the faulting one is not taken in the cycle the fault is reported
  // (the sequencer drops what is queued behind a fault)
  m.instr_valid_i = 1;
  const auto next = copy(kHbm, kUb, 4, 0x10000, 0x8000);
  for (int i = 0; i < 4; ++i) m.instr_i[i] = next[i];
  m.pc_i = 0x20c;
  bool fault_seen = false;
  for (int g = 0; g < 200000; ++g) {
    sim_.eval();
    if (m.fault_o) {
      fault_seen = true;
      EXPECT_FALSE(m.instr_ready_o) << "a copy taken in the cycle of the fault before it";
      step();
      break;
    }
    ASSERT_FALSE(m.instr_ready_o) << "the copy behind the faulting one taken before its fault";
    step();
  }
  m.instr_valid_i = 0;
  ASSERT_TRUE(fault_seen);
  for (int g = 0; g < 200000 && !m.idle_o; ++g) step();
  ASSERT_TRUE(m.idle_o);
  EXPECT_EQ(faults_, 1);
  EXPECT_EQ(last_fault_.pc, 0x208u);
  EXPECT_EQ(last_fault_.info, chip_params::DMA_FAULT_DST_RANGE);
  for (uint32_t i = 0; i < 6; ++i)
    for (size_t b = 0; b < want[i].size(); ++b)
      ASSERT_EQ(ub_.mem_[0x1000 + i * 0x800 + b], want[i][b]) << "copy " << i << " byte " << b;
  // each copy taken while the one ahead still writes: the six taken in ~230 cycles (~450 when
  // every copy waits for the one before to finish, seeds 1..10)
  const uint64_t span = cycles_taken.back() - cycles_taken.front();
  std::cout << "[ streamed ] six copies taken in " << span << " cycles" << std::endl;
  EXPECT_LT(span, 340u) << "copies did not run back to back";
}

}  // namespace
}  // namespace tessera
