// The DMA address generator (tpu_dma_agen) against the reference walk (sw/numerics/dma_ref.h):
// the training step's patterns (im2col for a 3x3 valid convolution of a 28x28 image, 2x2
// pooling windows, a transpose, a batch slice) checked also against direct formulas; random
// descriptors with negative strides under random back-pressure; out-of-range addresses fault
// with the address and index instead of wrapping, and the generator starts again afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "Vtpu_dma_agen.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "sw/numerics/dma_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kAddrW = 34, kCountW = 16;

class DmaAgen : public ::testing::Test {
 protected:
  DmaAgen() : sim_(test::current_test_name()), rng_(test::test_seed()) {
    auto& m = sim_.top();
    m.start_i = 0;
    m.abort_i = 0;
    m.addr_ready_i = 0;
    m.take_i = 1;
    sim_.reset();
  }

  // Puts a descriptor on the inputs (start_i not touched).
  void load(const dma::Descriptor& d) {
    auto& m = sim_.top();
    m.base_i = d.base;
    m.count_i = 0;
    m.stride_i = {};
    for (int k = 0; k < 4; ++k) {
      put_bits(m.count_i, kCountW * k, kCountW, d.loops[k].count);
      put_bits(m.stride_i, (kAddrW + 1) * k, kAddrW + 1, static_cast<uint64_t>(d.loops[k].stride));
    }
    m.limit_i = d.limit;
    m.elem_bytes_i = d.elem_bytes;
  }

  // Runs one descriptor; `ready_pct` is the chance the consumer takes an address each cycle.
  // Each take is a random 1 .. run_o elements (all of the run when `whole_runs`): the addresses
  // of a run are addr_o, addr_o + elem_bytes, ...; every run is checked to stay in one 32-byte
  // word. `runs` (if given) counts the takes of more than one element.
  dma::Walk run(const dma::Descriptor& d, int ready_pct = 100, bool* last_ok = nullptr,
                bool whole_runs = false, uint64_t* runs = nullptr) {
    auto& m = sim_.top();
    load(d);
    sim_.eval();
    EXPECT_TRUE(m.idle_o);
    m.start_i = 1;
    sim_.tick();
    m.start_i = 0;
    dma::Walk w;
    bool saw_last = false;
    for (uint64_t guard = 0; guard < 10'000'000; ++guard) {
      m.addr_ready_i = static_cast<int>(rng_() % 100) < ready_pct;
      sim_.eval();
      if (m.fault_o) {
        w.fault = true;
        // sign-extend the (AddrW + 1)-bit address
        const uint64_t raw = m.fault_addr_o;
        w.fault_addr = static_cast<int64_t>(raw << (63 - kAddrW)) >> (63 - kAddrW);
        EXPECT_EQ(m.fault_index_o, w.addrs.size());
        EXPECT_FALSE(m.addr_valid_o);
        break;
      }
      if (m.idle_o) break;
      const uint32_t run = m.run_o;
      EXPECT_GE(run, 1u);
      const uint32_t take =
          whole_runs ? run : 1 + static_cast<uint32_t>(rng_() % std::max<uint32_t>(run, 1));
      m.take_i = take;
      sim_.eval();
      if (m.addr_valid_o && m.addr_ready_i) {
        const uint64_t a = m.addr_o;
        EXPECT_EQ(a / 32, (a + uint64_t{run} * d.elem_bytes - 1) / 32)
            << "a run of " << run << " at 0x" << std::hex << a << " crosses a word";
        for (uint32_t i = 0; i < take; ++i) w.addrs.push_back(a + uint64_t{i} * d.elem_bytes);
        if (runs && take > 1) ++*runs;
        saw_last = m.addr_last_o;
      }
      sim_.tick();
    }
    if (last_ok) *last_ok = saw_last;
    return w;
  }

  void expect_same(const dma::Walk& want, const dma::Walk& got) {
    ASSERT_EQ(want.addrs.size(), got.addrs.size());
    for (size_t i = 0; i < want.addrs.size(); ++i) {
      ASSERT_EQ(want.addrs[i], got.addrs[i]) << "address " << i;
    }
    EXPECT_EQ(want.fault, got.fault);
    if (want.fault) {
      EXPECT_EQ(want.fault_addr, got.fault_addr);
    }
  }

  SimCtrl<Vtpu_dma_agen> sim_;
  std::mt19937_64 rng_;
};

TEST_F(DmaAgen, Im2colOf28x28For3x3ValidConvolution) {
  const auto d = dma::im2col_3x3(0x1000, 28, 28, 2, 1ull << 32);
  bool last_ok = false;
  const auto got = run(d, 70, &last_ok);
  expect_same(dma::reference_walk(d), got);
  ASSERT_EQ(got.addrs.size(), 26u * 26 * 9);
  size_t i = 0;  // independent formula: pixel (oy + ky, ox + kx)
  for (int oy = 0; oy < 26; ++oy)
    for (int ox = 0; ox < 26; ++ox)
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx, ++i)
          ASSERT_EQ(got.addrs[i], 0x1000u + 2u * ((oy + ky) * 28 + ox + kx)) << i;
  EXPECT_TRUE(last_ok);
}

TEST_F(DmaAgen, PoolingWindows2x2) {
  const auto d = dma::pool_2x2(0x40000, 26, 26, 4, 1ull << 32);
  const auto got = run(d, 50);
  expect_same(dma::reference_walk(d), got);
  size_t i = 0;
  for (int py = 0; py < 13; ++py)
    for (int px = 0; px < 13; ++px)
      for (int wy = 0; wy < 2; ++wy)
        for (int wx = 0; wx < 2; ++wx, ++i)
          ASSERT_EQ(got.addrs[i], 0x40000u + 4u * ((2 * py + wy) * 26 + 2 * px + wx)) << i;
}

TEST_F(DmaAgen, TransposeAndBatchSlice) {
  const auto t = dma::transpose(0x800, 10, 32, 4, 1ull << 20);
  const auto got = run(t);
  expect_same(dma::reference_walk(t), got);
  for (int c = 0; c < 32; ++c)
    for (int r = 0; r < 10; ++r) ASSERT_EQ(got.addrs[c * 10 + r], 0x800u + 4u * (r * 32 + c));
  const auto b = dma::batch_slice(0, 128, 64, 784, 2, 1ull << 32);
  const auto gb = run(b, 80);
  expect_same(dma::reference_walk(b), gb);
  EXPECT_EQ(gb.addrs.front(), 128u * 784 * 2);
  EXPECT_EQ(gb.addrs.back(), (128u + 63) * 784 * 2 + 783 * 2);
}

TEST_F(DmaAgen, RandomDescriptorsWithNegativeStrides) {
  for (int n = 0; n < 300; ++n) {
    dma::Descriptor d;
    d.elem_bytes = (rng_() & 1) ? 4 : 2;
    d.limit = 1ull << 24;
    d.base = (1ull << 23) + (rng_() % 4096) * d.elem_bytes;
    for (auto& l : d.loops) {
      l.count = 1 + static_cast<uint32_t>(rng_() % 6);
      l.stride = (static_cast<int64_t>(rng_() % 2001) - 1000) * d.elem_bytes;
    }
    SCOPED_TRACE("descriptor " + std::to_string(n));
    expect_same(dma::reference_walk(d), run(d, 60));
  }
}

TEST_F(DmaAgen, OutOfRangeFaultsInsteadOfWrapping) {
  // Past the limit: the 5th element of a row ends beyond it.
  dma::Descriptor d;
  d.base = 1000;
  d.elem_bytes = 4;
  d.limit = 1016;
  d.loops[0] = {8, 4};
  auto w = run(d);
  EXPECT_TRUE(w.fault);
  EXPECT_EQ(w.addrs.size(), 4u);
  EXPECT_EQ(w.fault_addr, 1016);
  // Below zero: a negative stride walks off the bottom of memory.
  dma::Descriptor n;
  n.base = 8;
  n.elem_bytes = 2;
  n.limit = 1u << 20;
  n.loops[1] = {4, -4};
  n.loops[0] = {2, 2};
  expect_same(dma::reference_walk(n), run(n));
  // A fault does not wedge the generator: the next descriptor runs normally.
  const auto ok = dma::transpose(0, 4, 4, 2, 1024);
  expect_same(dma::reference_walk(ok), run(ok));
}

// A contiguous innermost loop comes out in runs of up to a word (16 bf16 / 8 fp32 elements),
// whatever the alignment, and the walk is the reference walk element for element; a word that
// reaches past the limit gives single elements up to the fault.
TEST_F(DmaAgen, ContiguousLoopsComeOutInWordRuns) {
  for (unsigned e : {2u, 4u}) {
    dma::Descriptor d;
    d.base = 0x1000 + 6 * e;  // not word-aligned
    d.elem_bytes = e;
    d.limit = 1u << 20;
    d.loops[0] = {100, static_cast<int64_t>(e)};
    d.loops[1] = {3, 1000};
    uint64_t runs = 0;
    expect_same(dma::reference_walk(d), run(d, 100, nullptr, true, &runs));
    // Each row of 100 elements spans 100 e / 32 or more words, nearly all taken as runs.
    EXPECT_GT(runs, 3 * (100 * e / 32 - 1)) << "e=" << e;
  }
  dma::Descriptor f;
  f.base = 0;
  f.elem_bytes = 2;
  f.limit = 40;  // the second word reaches past the limit
  f.loops[0] = {32, 2};
  const auto w = run(f, 100, nullptr, true);
  EXPECT_TRUE(w.fault);
  EXPECT_EQ(w.addrs.size(), 20u);
  EXPECT_EQ(w.fault_addr, 40);
}

// abort_i (used by the DMA when the other walk faults) abandons a walk: idle the next cycle,
// no fault, and the next walk starts from its own base.
TEST_F(DmaAgen, AbortAbandonsAWalkWithoutAFault) {
  auto& m = sim_.top();
  load(dma::transpose(0x100, 64, 64, 2, 1ull << 20));
  m.start_i = 1;
  sim_.tick();
  m.start_i = 0;
  m.addr_ready_i = 1;
  for (int i = 0; i < 100; ++i) sim_.tick();
  sim_.eval();
  ASSERT_FALSE(m.idle_o);
  ASSERT_TRUE(m.addr_valid_o);
  m.abort_i = 1;
  sim_.tick();
  m.abort_i = 0;
  sim_.eval();
  EXPECT_TRUE(m.idle_o);
  EXPECT_FALSE(m.addr_valid_o);
  EXPECT_FALSE(m.fault_o);
  const auto t = dma::transpose(0, 4, 4, 2, 1024);
  expect_same(dma::reference_walk(t), run(t));
}

// The block invariants are live in the verilated model (rtl/pkg/tpu_assert.svh): taking more
// elements than the run offers breaks TakeWithinRun, which reports an $error at that clock
// edge; a take within the run does not.
TEST_F(DmaAgen, InvariantAssertionCatchesATakeBeyondTheRun) {
  auto& m = sim_.top();
  sim_.context().fatalOnError(false);
  load(dma::transpose(0x100, 64, 64, 2, 1ull << 20));
  m.start_i = 1;
  sim_.tick();
  m.start_i = 0;
  m.addr_ready_i = 1;
  for (int i = 0; i < 10; ++i) {
    sim_.eval();
    ASSERT_TRUE(m.addr_valid_o);
    m.take_i = m.run_o;
    sim_.tick();
  }
  EXPECT_FALSE(sim_.context().gotError());
  sim_.eval();
  ASSERT_TRUE(m.addr_valid_o);
  m.take_i = m.run_o + 1;
  sim_.tick();
  EXPECT_TRUE(sim_.context().gotError());
}

}  // namespace
}  // namespace tessera
