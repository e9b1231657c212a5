// The DMA data mover (rtl/dma/tpu_dma.sv) against a reference built from the reference walk
// (sw/numerics/dma_ref.h): for every element i below the number expected to move,
// dst[dst_walk[i] .. + e] = src[src_walk[i] .. + e], and every other byte of the destination
// space is unchanged (memories start filled with random bytes). The DMA's HBM port talks to an
// independent C++ model of the slave (harness/hbm/hbm_port_model.h, which checks the protocol);
// its SRAM port to a byte-array model with a 1-cycle read and random grants. Cases: the training
// step's patterns (im2col 3x3 of a 28x28 image, 2x2 pooling, transpose, batch slice) in bf16 and
// fp32 as sources into a contiguous destination for HBM->SRAM, SRAM->HBM and SRAM->SRAM; a
// transpose as the destination (scatter); random descriptors in every direction under random
// back-pressure on every interface; every fault code with its address, the writes before it
// intact and the next descriptor working; reset in the middle of a transfer; descriptors back
// to back over shared regions (program order kept); and the rate of a long contiguous copy (a
// word per cycle where the memories allow).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "Vtpu_dma.h"
#include "harness/hbm/hbm_port_model.h"
#include "harness/hbm/hbm_port_pins.h"
#include "harness/sim_ctrl.h"
#include "harness/sram_port_model.h"
#include "harness/vl_bits.h"
#include "sw/numerics/dma_ref.h"
#include "tessera/chip_params.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

// The model's configuration (sim/CMakeLists.txt: Vtpu_dma).
constexpr int kAddrW = 32, kCountW = 16;
constexpr uint64_t kHbmBytes = 1ull << 20;
constexpr uint64_t kSramBytes = 65536;
constexpr unsigned kHbm = 0, kSram = 1;  // address spaces

// Fault codes (tpu_pkg::DMA_FAULT_*).
constexpr unsigned kFaultNone = chip_params::DMA_FAULT_NONE,
                   kFaultSrcRange = chip_params::DMA_FAULT_SRC_RANGE,
                   kFaultDstRange = chip_params::DMA_FAULT_DST_RANGE,
                   kFaultCount = chip_params::DMA_FAULT_COUNT,
                   kFaultElemSize = chip_params::DMA_FAULT_ELEM_SIZE,
                   kFaultAlign = chip_params::DMA_FAULT_ALIGN;

uint64_t space_bytes(unsigned space) { return space == kHbm ? kHbmBytes : kSramBytes; }
const char* space_name(unsigned space) { return space == kHbm ? "HBM" : "SRAM"; }

// One DMA descriptor: two walks (their limits are the spaces' sizes) and the element size.
struct Transfer {
  unsigned src_space = kHbm, dst_space = kSram;
  unsigned elem_bytes = 2;
  dma::Descriptor src, dst;  // base and loops used; limit and elem_bytes filled in by the bench
  std::string describe() const {
    std::ostringstream os;
    os << space_name(src_space) << "->" << space_name(dst_space) << " e=" << elem_bytes
       << " src base 0x" << std::hex << src.base << std::dec << " loops";
    for (const auto& l : src.loops) os << " " << l.count << "x" << l.stride;
    os << " dst base 0x" << std::hex << dst.base << std::dec << " loops";
    for (const auto& l : dst.loops) os << " " << l.count << "x" << l.stride;
    return os.str();
  }
};

// What the DMA must report: computed from the descriptor alone (not from the RTL).
struct Outcome {
  bool fault = false;
  unsigned code = kFaultNone;
  int64_t addr = 0;
  uint64_t moved = 0;  // elements 0 .. moved-1 are written
  dma::Walk src, dst;
};

uint64_t walk_elems(const dma::Descriptor& d) {
  uint64_t n = 1;
  for (const auto& l : d.loops) n *= l.count;
  return n;
}

// The first element address of a walk that is not a multiple of the element size, if any.
bool first_misaligned(const dma::Descriptor& d, unsigned e, int64_t* addr) {
  const auto& l = d.loops;
  for (uint32_t i3 = 0; i3 < l[3].count; ++i3)
    for (uint32_t i2 = 0; i2 < l[2].count; ++i2)
      for (uint32_t i1 = 0; i1 < l[1].count; ++i1)
        for (uint32_t i0 = 0; i0 < l[0].count; ++i0) {
          const int64_t a = static_cast<int64_t>(d.base) + i3 * l[3].stride + i2 * l[2].stride +
                            i1 * l[1].stride + i0 * l[0].stride;
          if (((a % e) + e) % e != 0) {
            *addr = a;
            return true;
          }
        }
  return false;
}

Outcome predict(Transfer t) {
  Outcome o;
  const unsigned e = t.elem_bytes;
  if (e != 2 && e != 4) {
    o.fault = true;
    o.code = kFaultElemSize;
    return o;
  }
  if (walk_elems(t.src) != walk_elems(t.dst)) {
    o.fault = true;
    o.code = kFaultCount;
    return o;
  }
  if (walk_elems(t.src) == 0) return o;
  if (first_misaligned(t.src, e, &o.addr) || first_misaligned(t.dst, e, &o.addr)) {
    o.fault = true;
    o.code = kFaultAlign;
    return o;
  }
  t.src.elem_bytes = t.dst.elem_bytes = e;
  t.src.limit = space_bytes(t.src_space);
  t.dst.limit = space_bytes(t.dst_space);
  o.src = dma::reference_walk(t.src);
  o.dst = dma::reference_walk(t.dst);
  const uint64_t ns = o.src.addrs.size(), nd = o.dst.addrs.size();
  o.moved = std::min(ns, nd);
  // The first fault in element order; at the same element the source's (it is read first).
  if (o.src.fault && (!o.dst.fault || ns <= nd)) {
    o.fault = true;
    o.code = kFaultSrcRange;
    o.addr = o.src.fault_addr;
  } else if (o.dst.fault) {
    o.fault = true;
    o.code = kFaultDstRange;
    o.addr = o.dst.fault_addr;
  }
  return o;
}

using sram::get_bytes;
using sram::put_bytes;
using sram::SramPortModel;

struct Result {
  bool done = false;
  bool fault = false;
  unsigned code = 0;
  int64_t addr = 0;
  uint64_t moved = 0;
  uint64_t cycles = 0;  // acceptance to done
};

class Dma : public ::testing::Test {
 protected:
  Dma()
      : sim_(test::current_test_name()),
        seed_(test::test_seed()),
        rng_(seed_),
        hbm_(hbm::HbmPortConfig{kHbmBytes}, seed_ ^ 0x5EED),
        sram_(kSramBytes, seed_ ^ 0xA11CE) {
    auto& m = sim_.top();
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
    sim_.reset();
  }

  // Random back-pressure everywhere (pct = chance a ready or grant is high in a cycle).
  void back_pressure(int pct, int gap_pct, bool data_needs_request) {
    auto& c = hbm_.config();
    c.req_ready_pct = c.wd_ready_pct = pct;
    c.rd_gap_pct = c.wr_done_gap_pct = gap_pct;
    c.min_latency = 1;
    c.max_latency = 40;
    c.data_needs_request = data_needs_request;
    sram_.rgnt_pct = sram_.wgnt_pct = pct;
  }

  // One clock cycle with both memory models.
  void step() {
    auto& m = sim_.top();
    const auto h = hbm_.drive();
    hbm::drive_hbm_port(m, h);
    const auto s = sram_.drive();
    m.sram_rgnt_i = s.rgnt;
    m.sram_wgnt_i = s.wgnt;
    put_bytes(m.sram_rdata_i, s.rdata);
    sim_.eval();
    reads_ += (m.hbm_req_valid_o && m.hbm_req_ready_i && !m.hbm_req_write_o) ||
              (m.sram_rreq_o && m.sram_rgnt_i);
    hbm_.edge(hbm::hbm_master_out(m));
    sram_.edge(m.sram_rreq_o, m.sram_raddr_o, m.sram_wreq_o, m.sram_waddr_o, m.sram_wmask_o,
               get_bytes(m.sram_wdata_o), sim_.cycle());
    sim_.tick();
  }

  void put_walk(const dma::Descriptor& d, uint32_t& base, uint64_t& count, VlWide<5>& stride) {
    base = static_cast<uint32_t>(d.base);
    count = 0;
    stride = {};
    for (int k = 0; k < 4; ++k) {
      put_bits(count, kCountW * k, kCountW, d.loops[k].count);
      put_bits(stride, (kAddrW + 1) * k, kAddrW + 1, static_cast<uint64_t>(d.loops[k].stride));
    }
  }

  // Drives the descriptor onto the inputs with desc_valid_i high.
  void offer(const Transfer& t) {
    auto& m = sim_.top();
    m.src_space_i = t.src_space;
    m.dst_space_i = t.dst_space;
    m.elem_bytes_i = t.elem_bytes;
    put_walk(t.src, m.src_base_i, m.src_count_i, m.src_stride_i);
    put_walk(t.dst, m.dst_base_i, m.dst_count_i, m.dst_stride_i);
    m.desc_valid_i = 1;
  }

  // Offers the descriptor (after a random delay), then runs until done_o (at most max_cycles).
  void start(const Transfer& t) {
    auto& m = sim_.top();
    for (int i = static_cast<int>(rng_() % 3); i > 0; --i) step();
    offer(t);
    sim_.eval();
    ASSERT_TRUE(m.desc_ready_o) << "DMA not idle when a descriptor is offered";
    step();
    m.desc_valid_i = 0;
    // The descriptor was sampled: scribble over the inputs.
    m.src_base_i = static_cast<uint32_t>(rng_());
    m.dst_base_i = static_cast<uint32_t>(rng_());
    m.elem_bytes_i = 3;
    m.src_count_i = rng_();
    m.dst_count_i = rng_();
    EXPECT_TRUE(m.busy_o);
  }

  Result finish(uint64_t max_cycles) {
    auto& m = sim_.top();
    Result r;
    for (uint64_t c = 1; c <= max_cycles; ++c) {
      step();
      if (m.done_o) {
        r.done = true;
        r.cycles = c;
        break;
      }
    }
    if (!r.done) return r;
    r.fault = m.fault_o;
    r.code = m.fault_code_o;
    const uint64_t raw = m.fault_addr_o;  // sign-extend AddrW + 1 bits
    r.addr = static_cast<int64_t>(raw << (63 - kAddrW)) >> (63 - kAddrW);
    r.moved = m.elems_moved_o;
    EXPECT_FALSE(m.busy_o);
    EXPECT_TRUE(m.desc_ready_o);
    step();
    EXPECT_FALSE(m.done_o) << "done_o is a one-cycle pulse";
    EXPECT_EQ(bool(m.fault_o), r.fault) << "fault_o is sticky";
    EXPECT_TRUE(hbm_.idle()) << "HBM requests still in flight after done";
    hbm_.check_final();
    return r;
  }

  // Bytes of a space as they are now (HBM: the pages written so far; the rest is init_byte).
  struct Snapshot {
    std::vector<uint8_t> sram;
    std::unordered_map<uint64_t, std::array<uint8_t, hbm::HbmPortModel::kPage>> hbm_pages;
  };
  Snapshot snapshot() const {
    Snapshot s;
    s.sram = sram_.mem_;
    hbm_.for_each_page([&](uint64_t base, const auto& bytes) {
      s.hbm_pages[base / hbm::HbmPortModel::kPage] = bytes;
    });
    return s;
  }
  uint8_t byte_at(const Snapshot& s, unsigned space, uint64_t a) const {
    if (space == kSram) return s.sram.at(a);
    const auto it = s.hbm_pages.find(a / hbm::HbmPortModel::kPage);
    return it == s.hbm_pages.end() ? hbm_.init_byte(a) : it->second[a % hbm::HbmPortModel::kPage];
  }
  uint8_t byte_now(unsigned space, uint64_t a) const {
    return space == kSram ? sram_.mem_.at(a) : hbm_.read_byte(a);
  }

  // Runs a transfer and checks the outcome and both memories against the reference.
  Result run_and_check(const Transfer& t, uint64_t max_cycles = 400000) {
    const Outcome want = predict(t);
    const Snapshot before = snapshot();
    start(t);
    const Result got = finish(max_cycles);
    EXPECT_TRUE(got.done) << "no done_o within " << max_cycles << " cycles: " << t.describe();
    if (!got.done) return got;
    EXPECT_EQ(got.fault, want.fault) << t.describe();
    EXPECT_EQ(got.code, want.code) << t.describe();
    EXPECT_EQ(got.addr, want.addr) << t.describe();
    EXPECT_EQ(got.moved, want.moved) << t.describe();
    // Expected destination bytes: element i of the source walk at element i of the destination.
    std::map<uint64_t, uint8_t> expect;
    for (uint64_t i = 0; i < want.moved; ++i) {
      for (unsigned b = 0; b < t.elem_bytes; ++b) {
        expect[want.dst.addrs[i] + b] = byte_at(before, t.src_space, want.src.addrs[i] + b);
      }
    }
    int bad = 0;
    auto check_byte = [&](unsigned space, uint64_t a) {
      if (bad > 10) return;
      uint8_t w = byte_at(before, space, a);
      if (space == t.dst_space) {
        const auto it = expect.find(a);
        if (it != expect.end()) w = it->second;
      }
      const uint8_t g = byte_now(space, a);
      if (g != w) {
        ADD_FAILURE() << space_name(space) << " byte 0x" << std::hex << a << ": got 0x" << int(g)
                      << ", want 0x" << int(w) << std::dec << " (" << t.describe() << ")";
        ++bad;
      }
    };
    for (uint64_t a = 0; a < kSramBytes; ++a) check_byte(kSram, a);
    // HBM: pages the same as before need no byte-by-byte look (expected bytes are checked below).
    hbm_.for_each_page([&](uint64_t base, const auto& bytes) {
      const auto it = before.hbm_pages.find(base / hbm::HbmPortModel::kPage);
      if (it != before.hbm_pages.end() && it->second == bytes) return;
      for (uint64_t i = 0; i < hbm::HbmPortModel::kPage; ++i) check_byte(kHbm, base + i);
    });
    for (const auto& [a, v] : expect) check_byte(t.dst_space, a);
    return got;
  }

  SimCtrl<Vtpu_dma> sim_;
  uint64_t reads_ = 0;  // source word reads issued (HBM read requests taken, SRAM reads granted)
  uint64_t seed_;
  std::mt19937_64 rng_;
  hbm::HbmPortModel hbm_;
  SramPortModel sram_;
};

dma::Descriptor contiguous(uint64_t base, uint64_t n, unsigned e) {
  dma::Descriptor d;
  d.base = base;
  d.loops[0] = {static_cast<uint32_t>(n), int64_t(e)};
  return d;
}

struct Pattern {
  const char* name;
  dma::Descriptor (*make)(uint64_t base, unsigned e);
};
const Pattern kPatterns[] = {
    {"im2col 3x3 of 28x28",
     [](uint64_t b, unsigned e) { return dma::im2col_3x3(b, 28, 28, e, 0); }},
    {"pool 2x2 of 28x28", [](uint64_t b, unsigned e) { return dma::pool_2x2(b, 28, 28, e, 0); }},
    {"transpose 24x40", [](uint64_t b, unsigned e) { return dma::transpose(b, 24, 40, e, 0); }},
    {"batch slice 1..2 of 784",
     [](uint64_t b, unsigned e) { return dma::batch_slice(b, 1, 2, 784, e, 0); }},
};

TEST_F(Dma, TrainingPatternsIntoContiguousDestination) {
  back_pressure(80, 10, true);
  const std::pair<unsigned, unsigned> dirs[] = {{kHbm, kSram}, {kSram, kHbm}, {kSram, kSram}};
  for (const auto& p : kPatterns) {
    for (unsigned e : {2u, 4u}) {
      for (const auto& [ss, ds] : dirs) {
        Transfer t;
        t.src_space = ss;
        t.dst_space = ds;
        t.elem_bytes = e;
        t.src = p.make(ss == kSram ? 0x40 : 0x12340, e);
        t.dst = contiguous(ds == kSram ? 0x4000 + 3 * e : 0x80000 + 2 * e, walk_elems(t.src), e);
        SCOPED_TRACE(std::string(p.name) + ": " + t.describe());
        const auto r = run_and_check(t);
        EXPECT_FALSE(r.fault);
        EXPECT_EQ(r.moved, walk_elems(t.src));
      }
    }
  }
}

TEST_F(Dma, TransposeAsScatterDestination) {
  back_pressure(70, 20, false);
  const std::pair<unsigned, unsigned> dirs[] = {
      {kHbm, kSram}, {kSram, kHbm}, {kSram, kSram}, {kHbm, kHbm}};
  for (unsigned e : {2u, 4u}) {
    for (const auto& [ss, ds] : dirs) {
      Transfer t;
      t.src_space = ss;
      t.dst_space = ds;
      t.elem_bytes = e;
      t.dst = dma::transpose(ds == kSram ? 0x8000 : 0x40000, 30, 36, e, 0);
      t.src = contiguous(ss == kSram ? 0x100 + e : 0x1000, walk_elems(t.dst), e);
      SCOPED_TRACE(t.describe());
      run_and_check(t);
    }
  }
}

// Random counts, strides and bases in both spaces and both element sizes, under random
// back-pressure on every interface; some walks run out of their space (range faults).
TEST_F(Dma, RandomDescriptorsUnderBackPressure) {
  auto rnd = [&](uint64_t n) { return rng_() % n; };
  std::array<int, 4> per_direction = {};
  std::array<int, 8> per_code = {};
  uint64_t elems = 0;
  for (int n = 0; n < 120; ++n) {
    back_pressure(30 + static_cast<int>(rnd(71)), static_cast<int>(rnd(50)), rnd(2) == 0);
    Transfer t;
    t.src_space = static_cast<unsigned>(rnd(2));
    t.dst_space = static_cast<unsigned>(rnd(2));
    t.elem_bytes = rnd(2) ? 4 : 2;
    const unsigned e = t.elem_bytes;
    uint64_t total = 1;
    for (auto& l : t.src.loops) {
      l.count = 1 + static_cast<uint32_t>(rnd(rnd(3) == 0 ? 24 : 6));
      l.stride = (static_cast<int64_t>(rnd(129)) - 64) * e;
      total *= l.count;
    }
    if (total > 4000) {  // keep each case short
      --n;
      continue;
    }
    // The destination walks the same number of elements in another loop shape.
    uint64_t left = total;
    for (int k = 0; k < 3; ++k) {
      std::vector<uint32_t> divs;
      for (uint32_t d = 1; d <= left && d < 65536; ++d) {
        if (left % d == 0) divs.push_back(d);
      }
      const uint32_t c = divs[rnd(divs.size())];
      t.dst.loops[k] = {c, (static_cast<int64_t>(rnd(129)) - 64) * e};
      left /= c;
    }
    t.dst.loops[3] = {static_cast<uint32_t>(left), (static_cast<int64_t>(rnd(2049)) - 1024) * e};
    if (rnd(2)) t.dst.loops[0].stride = e;  // often contiguous rows: write combining
    // Bases: mostly in the middle of the space, now and then near an edge (range faults).
    auto base = [&](unsigned space, uint64_t lo, uint64_t hi) {
      const uint64_t size = space_bytes(space);
      if (rnd(8) == 0) return (rnd(2) ? rnd(256) : size - 1 - rnd(256)) / e * e;
      return (lo + rnd(hi - lo)) / e * e;
    };
    // Same space: source and destination in different halves, so they cannot overlap.
    const bool same = t.src_space == t.dst_space;
    const uint64_t ssz = space_bytes(t.src_space), dsz = space_bytes(t.dst_space);
    t.src.base =
        same ? base(t.src_space, ssz / 8, ssz / 4) : base(t.src_space, ssz / 4, ssz * 3 / 4);
    t.dst.base = same ? base(t.dst_space, dsz * 5 / 8, dsz * 3 / 4)
                      : base(t.dst_space, dsz / 4, dsz * 3 / 4);
    // Walks that reach into each other's bytes in one space are redrawn.
    const Outcome o = predict(t);
    if (same && o.code != kFaultElemSize) {
      std::vector<bool> touched(space_bytes(t.src_space), false);
      for (uint64_t a : o.src.addrs)
        for (unsigned b = 0; b < e; ++b) touched[a + b] = true;
      bool overlap = false;
      for (uint64_t a : o.dst.addrs)
        for (unsigned b = 0; b < e; ++b) overlap |= touched[a + b];
      if (overlap) {
        --n;
        continue;
      }
    }
    SCOPED_TRACE("descriptor " + std::to_string(n) + ": " + t.describe());
    const auto r = run_and_check(t);
    ++per_direction[t.src_space * 2 + t.dst_space];
    ++per_code[r.code & 7];
    elems += r.moved;
    if (HasFailure()) break;
  }
  std::cout << "[ random   ] HBM->HBM " << per_direction[0] << ", HBM->SRAM " << per_direction[1]
            << ", SRAM->HBM " << per_direction[2] << ", SRAM->SRAM " << per_direction[3]
            << " descriptors; " << elems << " elements moved; faults: " << per_code[1]
            << " source range, " << per_code[2] << " destination range" << std::endl;
  EXPECT_GT(per_code[1], 0) << "no source range fault drawn";
  EXPECT_GT(per_code[2], 0) << "no destination range fault drawn";
  for (int d = 0; d < 4; ++d) EXPECT_GT(per_direction[d], 0) << "direction " << d << " not drawn";
}

// Every fault code with its address; elements before a range fault stay written, the DMA goes
// idle within a bounded number of cycles, and the next descriptor works.
TEST_F(Dma, FaultsReportCodeAndAddressThenRecover) {
  back_pressure(60, 20, true);
  const auto good = [&](unsigned ss, unsigned ds) {
    Transfer t;
    t.src_space = ss;
    t.dst_space = ds;
    t.elem_bytes = 2;
    t.src = dma::pool_2x2(ss == kSram ? 0x200 : 0x2000, 8, 8, 2, 0);
    t.dst = contiguous(ds == kSram ? 0xC000 : 0x90000, 64, 2);
    const auto r = run_and_check(t, 20000);
    EXPECT_FALSE(r.fault);
  };
  struct Case {
    const char* what;
    Transfer t;
    unsigned code;
  };
  std::vector<Case> cases;
  {  // 1: the source walks past the end of HBM after 200 elements
    Transfer t;
    t.src_space = kHbm;
    t.dst_space = kSram;
    t.elem_bytes = 4;
    t.src = contiguous(kHbmBytes - 200 * 4, 1000, 4);
    t.dst = contiguous(0x1000, 1000, 4);
    cases.push_back({"source past the end of HBM", t, kFaultSrcRange});
  }
  {  // 1: the source walks below address 0 of the SRAM (negative stride)
    Transfer t;
    t.src_space = kSram;
    t.dst_space = kHbm;
    t.elem_bytes = 2;
    t.src.base = 0x100;
    t.src.loops[1] = {20, -64};
    t.src.loops[0] = {8, 2};
    t.dst = contiguous(0x3000, 160, 2);
    cases.push_back({"source below 0 of the SRAM", t, kFaultSrcRange});
  }
  {  // 2: the destination runs past the end of the SRAM while the source reads ahead (HBM)
    Transfer t;
    t.src_space = kHbm;
    t.dst_space = kSram;
    t.elem_bytes = 2;
    t.src = contiguous(0x4000, 3000, 2);
    t.dst = contiguous(kSramBytes - 2 * 1234, 3000, 2);
    cases.push_back({"destination past the end of the SRAM", t, kFaultDstRange});
  }
  {  // 2: the destination (a transpose in HBM) leaves HBM
    Transfer t;
    t.src_space = kSram;
    t.dst_space = kHbm;
    t.elem_bytes = 4;
    t.src = contiguous(0x800, 800, 4);
    t.dst = dma::transpose(kHbmBytes - 40 * 4 * 10, 20, 40, 4, 0);
    cases.push_back({"transposed destination leaves HBM", t, kFaultDstRange});
  }
  {  // 1: both walks leave their space at the same element: the source's fault is reported
    Transfer t;
    t.src_space = kHbm;
    t.dst_space = kSram;
    t.elem_bytes = 4;
    t.src = contiguous(kHbmBytes - 150 * 4, 400, 4);
    t.dst = contiguous(kSramBytes - 150 * 4, 400, 4);
    cases.push_back({"both walks fault at element 150", t, kFaultSrcRange});
  }
  {  // 2: the source faults first in time (it reads ahead of a slow scattered destination, one
     // HBM write per element) but later in element order
    Transfer t;
    t.src_space = kSram;
    t.dst_space = kHbm;
    t.elem_bytes = 2;
    t.src = contiguous(kSramBytes - 110 * 2, 400, 2);
    t.dst.base = kHbmBytes - 100 * 64;
    t.dst.loops[0] = {400, 64};
    cases.push_back({"source faults at 110, destination at 100", t, kFaultDstRange});
  }
  {  // 3: counts differ
    Transfer t;
    t.src = contiguous(0x100, 64, 2);
    t.dst = contiguous(0x100, 63, 2);
    cases.push_back({"element counts differ", t, kFaultCount});
  }
  for (unsigned e : {0u, 1u, 3u, 8u}) {  // 4: illegal element size
    Transfer t;
    t.elem_bytes = e;
    t.src = contiguous(0x100, 16, 2);
    t.dst = contiguous(0x100, 16, 2);
    cases.push_back({"illegal element size", t, kFaultElemSize});
  }
  {  // 5: misaligned source base
    Transfer t;
    t.elem_bytes = 4;
    t.src = contiguous(0x102, 16, 4);
    t.dst = contiguous(0x100, 16, 4);
    cases.push_back({"misaligned source base", t, kFaultAlign});
  }
  {  // 5: misaligned destination stride on an outer loop
    Transfer t;
    t.elem_bytes = 4;
    t.src = contiguous(0x100, 32, 4);
    t.dst.base = 0x400;
    t.dst.loops[0] = {4, 4};
    t.dst.loops[1] = {1, 3};  // unused loop: a misaligned stride there is harmless
    t.dst.loops[2] = {8, 66};
    cases.push_back({"misaligned destination stride", t, kFaultAlign});
  }
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.what) + ": " + c.t.describe());
    ASSERT_EQ(predict(c.t).code, c.code) << "the case does not test what it says";
    const auto r = run_and_check(c.t, 50000);  // never hangs: done within 50k cycles
    EXPECT_TRUE(r.fault);
    EXPECT_EQ(r.code, c.code);
    std::cout << "[ fault    ] " << c.what << ": code " << r.code << " addr 0x" << std::hex
              << r.addr << std::dec << ", " << r.moved << " elements moved, idle after " << r.cycles
              << " cycles" << std::endl;
    good(c.t.src_space, c.t.dst_space);
  }
}

TEST_F(Dma, ResetInTheMiddleOfATransfer) {
  back_pressure(70, 20, true);
  for (int i = 0; i < 4; ++i) {
    Transfer t;
    t.src_space = i & 1 ? kSram : kHbm;
    t.dst_space = i & 2 ? kSram : kHbm;
    t.elem_bytes = 2;
    t.src = contiguous(0x1000, 8000, 2);
    t.dst = contiguous(t.src_space == t.dst_space ? 0x8000 : 0x2000, 8000, 2);
    start(t);
    const int cycles = 300 + static_cast<int>(rng_() % 300);
    for (int c = 0; c < cycles; ++c) step();
    auto& m = sim_.top();
    ASSERT_TRUE(m.busy_o) << "the transfer should still be running";
    hbm_.reset_port();
    sram_.reset_port();
    sim_.reset();
    sim_.eval();
    EXPECT_FALSE(m.busy_o);
    EXPECT_TRUE(m.desc_ready_o);
    EXPECT_FALSE(m.fault_o);
    EXPECT_FALSE(m.hbm_req_valid_o);
    EXPECT_FALSE(m.sram_rreq_o);
    EXPECT_FALSE(m.sram_wreq_o);
    // A fresh transfer after the reset is exact.
    Transfer u;
    u.src_space = t.src_space;
    u.dst_space = t.dst_space;
    u.elem_bytes = 4;
    u.src = dma::im2col_3x3(0x400, 10, 10, 4, 0);
    u.dst = contiguous(0xA000, walk_elems(u.src), 4);
    SCOPED_TRACE(u.describe());
    const auto r = run_and_check(u);
    EXPECT_FALSE(r.fault);
  }
}

// Descriptors offered back to back, each as soon as the DMA takes it: copies in range run
// back to back (the next source walk starts behind the copy in progress) unless the next one
// reads what that copy writes. Copies read and write a few shared regions in every direction
// (read after write, write after read, write after write) with range and alignment faults
// among them; the memories after the sequence must equal the copies applied one after the
// other, and each done_o must report its own copy's outcome, in order.
TEST_F(Dma, BackToBackDescriptorsKeepProgramOrder) {
  auto& m = sim_.top();
  auto rnd = [&](uint64_t n) { return rng_() % n; };
  constexpr uint64_t kRegion = 2048;
  constexpr int kRegions = 6;  // per space: regions 0..5 at region_base
  auto region_base = [](unsigned space, int r) {
    return (space == kSram ? 0x1000 : 0x40000) + uint64_t(r) * kRegion;
  };
  // A walk of `total` elements inside region r: rows of `run` elements, `pitch` bytes apart,
  // or (scatter) the same elements column by column.
  auto walk = [&](unsigned space, int r, unsigned e, uint32_t run, uint32_t rows, bool scatter) {
    dma::Descriptor d;
    const uint32_t pitch = run * e + static_cast<uint32_t>(rnd(3)) * 32;
    d.base = region_base(space, r) + rnd(4) * 32;
    if (scatter) {
      d.loops[0] = {rows, int64_t(pitch)};
      d.loops[1] = {run, int64_t(e)};
    } else {
      d.loops[0] = {run, int64_t(e)};
      d.loops[1] = {rows, int64_t(pitch)};
    }
    return d;
  };
  std::vector<Transfer> seq;
  for (int n = 0; n < 80; ++n) {
    Transfer t;
    t.src_space = static_cast<unsigned>(rnd(2));
    t.dst_space = rnd(4) ? 1u - t.src_space : t.src_space;  // mostly loads and stores
    t.elem_bytes = rnd(2) ? 4 : 2;
    const unsigned e = t.elem_bytes;
    const uint32_t run = 1 + static_cast<uint32_t>(rnd(32 / e * 4));
    const uint32_t rows =
        1 + static_cast<uint32_t>(rnd(std::max<uint64_t>(1, 1536 / (run * e + 64))));
    const int rs = static_cast<int>(rnd(kRegions));
    int rd = static_cast<int>(rnd(kRegions));
    if (t.src_space == t.dst_space)
      while (rd == rs) rd = static_cast<int>(rnd(kRegions));
    t.src = walk(t.src_space, rs, e, run, rows, false);
    t.dst = walk(t.dst_space, rd, e, run, rows, rnd(3) == 0);
    const uint64_t k = rnd(16);
    if (k == 0) t.dst.base = space_bytes(t.dst_space) - 64;  // runs out of its space
    if (k == 1) t.src.base = space_bytes(t.src_space) - 96;
    if (k == 2) t.dst.base += e / 2;        // misaligned
    if (k == 3) t.dst.loops[1].count += 1;  // element counts differ
    seq.push_back(t);
  }
  back_pressure(80, 10, true);
  const Snapshot before = snapshot();
  // the expected bytes: every copy applied in order over the memories as they were
  std::map<std::pair<unsigned, uint64_t>, uint8_t> now;
  auto read = [&](unsigned space, uint64_t a) {
    const auto it = now.find({space, a});
    return it != now.end() ? it->second : byte_at(before, space, a);
  };
  std::vector<Outcome> want;
  for (const Transfer& t : seq) {
    want.push_back(predict(t));
    const Outcome& o = want.back();
    std::vector<uint8_t> moved;  // all reads before the writes: the walks do not overlap
    for (uint64_t i = 0; i < o.moved; ++i)
      for (unsigned b = 0; b < t.elem_bytes; ++b)
        moved.push_back(read(t.src_space, o.src.addrs[i] + b));
    for (uint64_t i = 0, j = 0; i < o.moved; ++i)
      for (unsigned b = 0; b < t.elem_bytes; ++b)
        now[{t.dst_space, o.dst.addrs[i] + b}] = moved[j++];
  }
  // Offer each descriptor until it is taken; record each done_o's report.
  std::vector<Result> got;
  size_t next = 0;
  uint64_t taken_behind = 0, cycles = 0;
  while (got.size() < seq.size() && cycles < 2000000) {
    if (next < seq.size()) {
      offer(seq[next]);
    } else {
      m.desc_valid_i = 0;
    }
    sim_.eval();
    const bool take = m.desc_valid_i && m.desc_ready_o;
    if (take && m.busy_o) ++taken_behind;
    step();
    ++cycles;
    if (take) ++next;
    if (m.done_o) {
      Result r;
      r.done = true;
      r.fault = m.fault_o;
      r.code = m.fault_code_o;
      const uint64_t raw = m.fault_addr_o;
      r.addr = static_cast<int64_t>(raw << (63 - kAddrW)) >> (63 - kAddrW);
      r.moved = m.elems_moved_o;
      got.push_back(r);
    }
  }
  m.desc_valid_i = 0;
  ASSERT_EQ(got.size(), seq.size()) << "copies done after " << cycles << " cycles";
  EXPECT_GT(next, got.size() - 1);
  for (int c = 0; c < 5; ++c) step();
  EXPECT_FALSE(m.busy_o);
  EXPECT_TRUE(hbm_.idle());
  hbm_.check_final();
  int faults = 0;
  for (size_t i = 0; i < seq.size(); ++i) {
    SCOPED_TRACE("copy " + std::to_string(i) + ": " + seq[i].describe());
    EXPECT_EQ(got[i].fault, want[i].fault);
    EXPECT_EQ(got[i].code, want[i].code);
    EXPECT_EQ(got[i].addr, want[i].addr);
    EXPECT_EQ(got[i].moved, want[i].moved);
    faults += want[i].fault;
  }
  int bad = 0;
  auto check = [&](unsigned space, uint64_t a) {
    const uint8_t w = read(space, a), g = byte_now(space, a);
    if (g != w && bad++ < 10)
      ADD_FAILURE() << space_name(space) << " byte 0x" << std::hex << a << ": got 0x" << int(g)
                    << ", want 0x" << int(w);
  };
  for (uint64_t a = 0; a < kSramBytes; ++a) check(kSram, a);
  hbm_.for_each_page([&](uint64_t base, const auto&) {
    for (uint64_t i = 0; i < hbm::HbmPortModel::kPage; ++i) check(kHbm, base + i);
  });
  for (const auto& [at, v] : now) check(at.first, at.second);
  std::cout << "[ b2b      ] " << seq.size() << " copies (" << faults << " faulting) in " << cycles
            << " cycles; " << taken_behind << " taken behind a copy in progress" << std::endl;
  EXPECT_GT(taken_behind, seq.size() / 4) << "copies hardly ever ran back to back";
}

// A copy keeps its last DMA_READ_SLOTS source words: the overlapping runs of a patch gather
// (a kernel row of 3 pixels of 32 channels at each output position, a pixel apart; the 3-element
// runs of a one-channel im2col) read a word only when it is not among them. The read count is
// checked against an element-by-element model of the slots, and the data against the reference.
TEST_F(Dma, OverlappingRunsReadAKeptWordOnce) {
  back_pressure(80, 10, true);
  dma::Descriptor rows;  // 4 output rows of 11 positions of a 13-pixel map, 64 bytes a pixel
  rows.loops[0] = {96, 2};
  rows.loops[1] = {11, 64};
  rows.loops[2] = {4, 13 * 64};
  const std::pair<const char*, dma::Descriptor> walks[] = {
      {"kernel rows of 32 channels", rows}, {"im2col 3x3 of 28x28", dma::im2col_3x3(0, 28, 28, 2, 0)}};
  for (const auto& [name, walk] : walks) {
    for (unsigned ss : {kHbm, kSram}) {
      Transfer t;
      t.src_space = ss;
      t.dst_space = kSram;
      t.elem_bytes = 2;
      t.src = walk;
      t.src.base = ss == kSram ? 0x40 : 0x12340;
      t.dst = contiguous(0x8000, walk_elems(t.src), 2);
      SCOPED_TRACE(std::string(name) + ": " + t.describe());
      // the model: an element in none of the last DMA_READ_SLOTS words read is a read
      dma::Descriptor w = t.src;
      w.elem_bytes = 2;
      w.limit = space_bytes(ss);
      std::deque<uint64_t> kept;
      uint64_t want = 0, word_changes = 0, last = ~0ull;
      for (uint64_t a : dma::reference_walk(w).addrs) {
        word_changes += a / 32 != last;
        last = a / 32;
        if (std::find(kept.begin(), kept.end(), a / 32) != kept.end()) continue;
        ++want;
        kept.push_back(a / 32);
        if (kept.size() > chip_params::DMA_READ_SLOTS) kept.pop_front();
      }
      reads_ = 0;
      run_and_check(t);
      EXPECT_EQ(reads_, want);
      std::cout << "[ reads    ] " << name << " from " << space_name(ss) << ": " << reads_
                << " word reads for " << word_changes << " word changes" << std::endl;
      if (walk.loops[0].count == 96) EXPECT_LT(2 * reads_, word_changes);  // each word once
    }
  }
}

// A long contiguous copy moves a word a cycle as far as the memories allow (no back-pressure,
// HBM latency 5..40): the SRAM gives and takes a 32-byte word a cycle, the HBM slave model a
// 32-byte burst every two cycles at best (16 B/cycle).
TEST_F(Dma, ContiguousCopyMovesAWordPerCycle) {
  const std::pair<unsigned, unsigned> dirs[] = {
      {kHbm, kSram}, {kSram, kHbm}, {kSram, kSram}, {kHbm, kHbm}};
  for (const auto& [ss, ds] : dirs) {
    for (unsigned e : {2u, 4u}) {
      Transfer t;
      t.src_space = ss;
      t.dst_space = ds;
      t.elem_bytes = e;
      const uint64_t n = 12288 / e * 2;  // 24 KiB
      t.src = contiguous(0x1000, n, e);
      t.dst = contiguous(ss == ds ? 0x8000 : 0x2000, n, e);
      SCOPED_TRACE(t.describe());
      const auto r = run_and_check(t);
      const double rate = double(n) / double(r.cycles);
      std::cout << "[ rate     ] " << space_name(ss) << "->" << space_name(ds) << " e=" << e << ": "
                << n << " elements in " << r.cycles << " cycles = " << rate << " elements/cycle"
                << std::endl;
      EXPECT_GT(rate * e, (ss == kSram && ds == kSram) ? 30.0 : 11.0) << "bytes per cycle";
    }
  }
}

}  // namespace
}  // namespace tessera
