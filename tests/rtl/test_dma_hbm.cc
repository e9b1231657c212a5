// The DMA (tpu_dma) on the real memory system: its HBM port wired each cycle to port 0 of a
// verilated tpu_hbm with 2 pseudo-channels, whose pins drive the HBM2 device model with the
// timing checker on (every command checked); its SRAM port on the SRAM model. The training
// step's patterns move HBM -> SRAM, SRAM -> HBM and HBM -> HBM and every destination byte is
// checked against the reference walk (sw/numerics/dma_ref.h) applied to the memories' initial
// contents; an out-of-range HBM address faults with its address and leaves HBM intact beyond
// the elements moved before it; a contiguous copy reports its element rate through real HBM
// latency, refresh included.
#include <gtest/gtest.h>

#include <iostream>
#include <random>
#include <unordered_map>

#include "Vtpu_dma.h"
#include "Vtpu_hbm_c2.h"
#include "harness/hbm/hbm_port_pins.h"
#include "harness/hbm/hbm_system.h"
#include "harness/sram_port_model.h"
#include "sw/numerics/dma_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using hbm::Burst;
using S = hbm::HbmSystem<Vtpu_hbm_c2>;

constexpr int kAddrW = 32, kCountW = 16;
constexpr uint64_t kHbmBytes = 1ull << 20;  // the Vtpu_dma build's HbmBytes
constexpr uint64_t kSramBytes = 65536;
constexpr unsigned kHbm = 0, kSram = 1;

class DmaOnHbm : public ::testing::Test {
 protected:
  DmaOnHbm()
      : dma_(test::current_test_name()),
        hbm_(2, 2),
        rng_(test::test_seed()),
        sram_(kSramBytes, rng_()) {
    auto& m = dma_.top();
    m.desc_valid_i = 0;
    m.src_space_i = 0;
    m.dst_space_i = 0;
    m.elem_bytes_i = 2;
    m.src_base_i = 0;
    m.src_count_i = 0;
    m.src_stride_i = {};
    m.dst_base_i = 0;
    m.dst_count_i = 0;
    m.dst_stride_i = {};
    // Local destinations only: the ICI write port (tpu_dma_unit's remote copies) stays idle.
    // Every input is driven: an undriven one starts random (--x-initial unique), which once
    // turned every destination remote for some TESSERA_RAND_SEED draws.
    m.dst_remote_i = 0;
    m.remote_w_ready_i = 0;
    hbm::drive_hbm_port(m, hbm::HbmSlaveOut{});  // the HBM port idle
    m.sram_rgnt_i = 0;
    m.sram_rdata_i = {};
    m.sram_wgnt_i = 0;
    dma_.reset();
    // HBM's first MiB starts with random contents, known to the test.
    for (uint64_t a = 0; a < kHbmBytes; a += 32) {
      Burst b;
      for (auto& x : b) x = static_cast<uint8_t>(rng_());
      hbm_.poke(a, b);
    }
  }

  std::vector<uint8_t> hbm_image() const {
    std::vector<uint8_t> img(kHbmBytes);
    for (uint64_t a = 0; a < kHbmBytes; a += 32) {
      const Burst b = hbm_.peek(a);
      std::copy(b.begin(), b.end(), img.begin() + static_cast<long>(a));
    }
    return img;
  }

  // One cycle of the DMA, the memory system (port 0; port 1 idle) and the SRAM model. The DMA's
  // outputs come from its registers, so they are read first and held while tpu_hbm answers.
  void step() {
    auto& d = dma_.top();
    auto& h = hbm_.top();
    const auto s = sram_.drive();
    d.sram_rgnt_i = s.rgnt;
    d.sram_wgnt_i = s.wgnt;
    sram::put_bytes(d.sram_rdata_i, s.rdata);
    dma_.eval();
    const bool req_valid = d.hbm_req_valid_o, wd_valid = d.hbm_wd_valid_o;
    S::set_bit(h.req_valid_i, 0, req_valid);
    S::set_bit(h.req_write_i, 0, d.hbm_req_write_o);
    put_bits(h.req_addr_i, 0, 32, d.hbm_req_addr_o);
    put_bits(h.req_len_i, 0, 4, d.hbm_req_len_o);
    put_bits(h.req_id_i, 0, 4, d.hbm_req_id_o);
    S::set_bit(h.wd_valid_i, 0, wd_valid);
    for (int w = 0; w < 8; ++w) h.wd_data_i[w] = d.hbm_wd_data_o[w];
    put_bits(h.wd_strb_i, 0, 32, d.hbm_wd_strb_o);
    S::set_bit(h.rd_ready_i, 0, d.hbm_rd_ready_o);
    S::set_bit(h.wr_done_ready_i, 0, d.hbm_wr_done_ready_o);
    hbm_.exchange_pins();
    d.hbm_req_ready_i = S::bit(h.req_ready_o, 0);
    d.hbm_wd_ready_i = S::bit(h.wd_ready_o, 0);
    d.hbm_rd_valid_i = S::bit(h.rd_valid_o, 0);
    d.hbm_rd_id_i = static_cast<uint8_t>(S::field(h.rd_id_o, 0, 4));
    for (int w = 0; w < 8; ++w) d.hbm_rd_data_i[w] = h.rd_data_o[w];
    d.hbm_rd_last_i = S::bit(h.rd_last_o, 0);
    d.hbm_wr_done_valid_i = S::bit(h.wr_done_valid_o, 0);
    d.hbm_wr_done_id_i = static_cast<uint8_t>(S::field(h.wr_done_id_o, 0, 4));
    dma_.eval();
    ASSERT_EQ(bool(d.hbm_req_valid_o), req_valid) << "request valid depends on ready";
    ASSERT_EQ(bool(d.hbm_wd_valid_o), wd_valid) << "write-data valid depends on ready";
    sram_.edge(d.sram_rreq_o, d.sram_raddr_o, d.sram_wreq_o, d.sram_waddr_o, d.sram_wmask_o,
               sram::get_bytes(d.sram_wdata_o), dma_.cycle());
    dma_.tick();
    hbm_.tick();
  }

  static void put_walk(const dma::Descriptor& w, uint32_t& base, uint64_t& count,
                       VlWide<5>& stride) {
    base = static_cast<uint32_t>(w.base);
    count = 0;
    stride = {};
    for (int k = 0; k < 4; ++k) {
      put_bits(count, kCountW * k, kCountW, w.loops[k].count);
      put_bits(stride, (kAddrW + 1) * k, kAddrW + 1, static_cast<uint64_t>(w.loops[k].stride));
    }
  }

  struct Result {
    uint64_t cycles = 0;
    bool fault = false;
    unsigned code = 0;
    int64_t fault_addr = 0;
    uint64_t moved = 0;
  };

  // Runs one descriptor to done_o and checks both memories against the reference walk.
  Result run(unsigned src_space, dma::Descriptor src, unsigned dst_space, dma::Descriptor dst,
             unsigned e) {
    auto& m = dma_.top();
    src.elem_bytes = dst.elem_bytes = e;
    src.limit = src_space == kHbm ? kHbmBytes : kSramBytes;
    dst.limit = dst_space == kHbm ? kHbmBytes : kSramBytes;
    const dma::Walk sw = dma::reference_walk(src), dw = dma::reference_walk(dst);
    std::vector<uint8_t> mem[2] = {hbm_image(), sram_.mem_};
    std::vector<uint8_t> expect[2] = {mem[0], mem[1]};
    const size_t n = std::min(sw.addrs.size(), dw.addrs.size());
    for (size_t i = 0; i < n; ++i) {
      for (unsigned k = 0; k < e; ++k) {
        expect[dst_space][dw.addrs[i] + k] = mem[src_space][sw.addrs[i] + k];
      }
    }

    m.src_space_i = src_space;
    m.dst_space_i = dst_space;
    m.elem_bytes_i = e;
    put_walk(src, m.src_base_i, m.src_count_i, m.src_stride_i);
    put_walk(dst, m.dst_base_i, m.dst_count_i, m.dst_stride_i);
    m.desc_valid_i = 1;
    dma_.eval();
    EXPECT_TRUE(m.desc_ready_o);
    step();
    m.desc_valid_i = 0;
    Result r;
    for (uint64_t c = 1; c < 2'000'000 && !r.cycles; ++c) {
      step();
      if (m.done_o) r.cycles = c;
    }
    EXPECT_NE(r.cycles, 0u) << "the DMA did not finish";
    r.fault = m.fault_o;
    r.code = m.fault_code_o;
    const uint64_t raw = m.fault_addr_o;
    r.fault_addr = static_cast<int64_t>(raw << (63 - kAddrW)) >> (63 - kAddrW);
    r.moved = m.elems_moved_o;
    hbm_.finish();  // the last writes' data reaches the device; checks the refresh interval
    const std::vector<uint8_t> got[2] = {hbm_image(), sram_.mem_};
    for (unsigned sp : {kHbm, kSram}) {
      size_t bad = 0;
      for (size_t a = 0; a < got[sp].size(); ++a) {
        if (got[sp][a] != expect[sp][a] && bad++ < 5) {
          ADD_FAILURE() << (sp == kHbm ? "HBM" : "SRAM") << " byte 0x" << std::hex << a << ": got "
                        << int(got[sp][a]) << ", expected " << int(expect[sp][a]);
        }
      }
      EXPECT_EQ(bad, 0u) << (sp == kHbm ? "HBM" : "SRAM") << " bytes differ";
    }
    return r;
  }

  static dma::Descriptor contiguous(uint64_t base, uint32_t n, unsigned e) {
    dma::Descriptor d;
    d.base = base;
    d.loops[0] = {n, static_cast<int64_t>(e)};
    return d;
  }

  SimCtrl<Vtpu_dma> dma_;
  S hbm_;
  std::mt19937_64 rng_;
  sram::SramPortModel sram_;
};

TEST_F(DmaOnHbm, TrainingPatternsThroughRealHbm) {
  for (unsigned e : {2u, 4u}) {
    const auto im2col = dma::im2col_3x3(0x10000, 28, 28, e, kHbmBytes);
    auto r = run(kHbm, im2col, kSram, contiguous(0, 26 * 26 * 9, e), e);
    EXPECT_FALSE(r.fault);
    EXPECT_EQ(r.moved, 26u * 26 * 9);
    std::cout << "im2col 28x28 (e=" << e << ") HBM -> SRAM: " << r.moved << " elements in "
              << r.cycles << " cycles\n";
    const auto tr = dma::transpose(0x100, 24, 40, e, kSramBytes);
    r = run(kSram, tr, kHbm, contiguous(0x40000, 24 * 40, e), e);
    EXPECT_FALSE(r.fault);
    const auto pool = dma::pool_2x2(0x20000, 26, 26, e, kHbmBytes);
    r = run(kHbm, pool, kHbm, contiguous(0x60000 + 8, 13 * 13 * 4, e), e);
    EXPECT_FALSE(r.fault);
    const auto slice = dma::batch_slice(0x30000, 3, 5, 28 * 28, e, kHbmBytes);
    r = run(kHbm, slice, kSram, contiguous(0x8000, 5 * 28 * 28, e), e);
    EXPECT_FALSE(r.fault);
  }
}

// A walk that leaves HBM faults with the address; elements before it are written, none after.
TEST_F(DmaOnHbm, OutOfRangeHbmAddressFaults) {
  const uint32_t n = 4096;
  const auto r = run(kSram, contiguous(0, n, 4), kHbm, contiguous(kHbmBytes - 4 * 1000, n, 4), 4);
  EXPECT_TRUE(r.fault);
  EXPECT_EQ(r.code, 2u) << "destination out of range";
  EXPECT_EQ(r.fault_addr, static_cast<int64_t>(kHbmBytes));
  EXPECT_EQ(r.moved, 1000u);
}

TEST_F(DmaOnHbm, ContiguousCopyRate) {
  const uint32_t n = 24576;  // 48 KiB of bf16
  auto r = run(kHbm, contiguous(0x1000, n, 2), kSram, contiguous(0, n, 2), 2);
  double rate = double(n) / double(r.cycles);
  std::cout << "HBM -> SRAM contiguous bf16: " << n << " elements in " << r.cycles
            << " cycles = " << rate << " elements/cycle\n";
  // Runs of a word: two pseudo-channels deliver up to 32 B/cycle (16 bf16 elements).
  EXPECT_GT(rate, 8.0);
  // Writes too: a write's request and its data beat go in successive cycles, and the next
  // request with the beat before, so the DMA keeps both pseudo-channels writing (one write
  // every two cycles, the port's limit before, is 8 elements a cycle).
  r = run(kSram, contiguous(0, n, 2), kHbm, contiguous(0x20000, n, 2), 2);
  rate = double(n) / double(r.cycles);
  std::cout << "SRAM -> HBM contiguous bf16: " << n << " elements in " << r.cycles
            << " cycles = " << rate << " elements/cycle\n";
  EXPECT_GT(rate, 9.0);
}

}  // namespace
}  // namespace tessera
