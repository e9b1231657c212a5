// Multi-chip: rings of verilated chips (harness/chip/ring_sim.h, tpu_top at N = 4) against the
// functional ring (sw/functional): remote DMA writes into a neighbour's unified buffer and HBM,
// remote signals and remote WAITs, the compiled ring all-reduce (sw/compiler/allreduce.cc)
// checked against the host's fp32 sums in the documented order, determinism between the
// single-threaded and the threaded lock-step, and the faults: a link that is down, a remote
// WAIT with no link, a chip that faults while its neighbours wait on it, a ring deadlock.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "Vtpu_top_n4.h"
#include "Vtpu_top_n4___024root.h"  // ChipSim: one evaluation a cycle
#include "harness/chip/ring_sim.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/allreduce.h"
#include "tessera/asm.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tessera/functional_model.h"
#include "tessera/functional_ring.h"
#include "tests/common/example_cnn.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kN = static_cast<int>(chip_params::SMALL_N);  // the small chip (Vtpu_top_n4)
constexpr uint64_t kUbBytes = chip_params::SMALL_UB_BYTES, kAccRows = chip_params::SMALL_ACC_ROWS,
                   kHbmBytes = chip_params::HBM_PC_BYTES;
constexpr uint32_t kProg = 0x100000;
const functional::ChipConfig kConfig{kN, kUbBytes, kAccRows, kHbmBytes};

std::vector<uint8_t> assemble(const std::string& text) {
  const auto r = assembler::assemble(text, {static_cast<uint32_t>(kN)});
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : assembler::format_error("prog", r.errors[0]));
  return r.bytes();
}

// A ring of P verilated chips and a functional ring, loaded alike.
class Rings {
 public:
  Rings(int chips, int threads = 1, const std::string& waves = "")
      : rtl_(chips, 1, 32, threads, hbm::HbmTiming{}, waves), fn_(chips, kConfig) {}
  void load(int r, uint64_t addr, const std::vector<uint8_t>& bytes) {
    rtl_.chip(r).hbm_write(addr, bytes);
    fn_.chip(r).hbm().write(addr, bytes.data(), bytes.size());
  }
  std::vector<uint8_t> rtl_read(int r, uint64_t addr, size_t n) {
    return rtl_.chip(r).hbm_read(addr, n);
  }
  std::vector<uint8_t> fn_read(int r, uint64_t addr, size_t n) {
    std::vector<uint8_t> b(n);
    fn_.chip(r).hbm().read(addr, b.data(), n);
    return b;
  }
  chip::RingSim<Vtpu_top_n4>& rtl() { return rtl_; }
  functional::FunctionalRing& fn() { return fn_; }

 private:
  chip::RingSim<Vtpu_top_n4> rtl_;
  functional::FunctionalRing fn_;
};

std::vector<uint8_t> random_bytes(std::mt19937_64& rng, size_t n) {
  std::vector<uint8_t> b(n);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

// ---------------------------------------------------------------------------------------------
// Remote writes and signals: every chip passes data to its neighbours, both ways, into UB and
// HBM, with gathers and partial words; the same on both models, byte for byte.

const char* kPassProgram = R"(
  # 64 fp32 from HBM 0x10000 into UB 0x0, then into next's UB 0x400
  dma.loop   src, 0, 64, 4, 1, 0
  dma.loop   dst, 0, 64, 4, 1, 0
  dma.copy   hbm, ub, 4, 0x10000, 0x0
  dma.copy   ub, ub, 4, 0x0, 0x400, next
  signal     dma, rc0, next
  # a gather (every other fp32 of 8 rows) from HBM straight into prev's HBM 0x40000
  dma.loop   src, 0, 8, 8, 8, 64
  dma.loop   dst, 0, 64, 4, 1, 0
  dma.copy   hbm, hbm, 4, 0x10000, 0x40000, prev
  signal     dma, rc1, prev
  # 37 bf16 to an odd place in next's HBM (partial words: byte strobes)
  dma.loop   src, 0, 37, 2, 1, 0
  dma.loop   dst, 0, 37, 2, 1, 0
  dma.copy   hbm, hbm, 2, 0x10100, 0x50006, next
  signal     dma, rc2, next
  # wait for the neighbours, then copy what prev sent into my UB out to HBM 0x20000
  wait       dma, rc0, 1
  dma.loop   src, 0, 64, 4, 1, 0
  dma.loop   dst, 0, 64, 4, 1, 0
  dma.copy   ub, hbm, 4, 0x400, 0x20000
  wait       vpu, rc1, 1
  wait       mxu, rc2, 1
  halt
)";

// The links' transmit queues (docs/multichip.md, "Transmit queues"): a remote copy is complete
// for the DMA once its flits are queued, so local copies after it run while the link still
// carries them; a FENCE between them waits until the queue has drained, and so does HALT.
// Chip 0 stages 4 KiB in its UB, sends it to chip 1's HBM (128 flits, 3 link cycles each: the
// UB gives a word a cycle, so the queue fills faster than the link drains it), then makes two
// local 4 KiB copies; chip 1 waits for its signal. Cycles of chip 0 against the staging alone.
TEST(RingTransmitQueue, LocalCopiesOverlapTheLinkUnlessFenced) {
  const auto program = [](bool remote, bool local, bool fence) {
    std::string p =
        "  dma.loop src, 0, 1024, 4, 1, 0\n  dma.loop dst, 0, 1024, 4, 1, 0\n"
        "  dma.copy hbm, ub, 4, 0x10000, 0x0\n";
    if (remote) p += "  dma.copy ub, hbm, 4, 0x0, 0x30000, next\n  signal dma, rc0, next\n";
    if (fence) p += "  fence\n";
    if (local)
      p += "  dma.copy hbm, ub, 4, 0x11000, 0x1000\n  dma.copy hbm, ub, 4, 0x12000, 0x1000\n";
    return p + "  halt\n";
  };
  std::mt19937_64 rng(test::test_seed());
  const auto cycles = [&](bool remote, bool local, bool fence) {
    Rings rings(2);
    const auto data = random_bytes(rng, 4096);
    rings.load(0, 0x10000, data);
    rings.load(0, kProg, assemble(program(remote, local, fence)));
    rings.load(1, kProg, assemble(remote ? "  wait dma, rc0, 1\n  halt\n" : "  halt\n"));
    const chip::RingRun run = rings.rtl().run({kProg}, 200000);
    EXPECT_TRUE(run.error.empty()) << run.error;
    if (remote) EXPECT_EQ(rings.rtl_read(1, 0x30000, 4096), data) << "the data did not arrive";
    return static_cast<int64_t>(run.chips[0].cycles);
  };
  const int64_t base = cycles(false, false, false);
  const int64_t remote = cycles(true, false, false) - base,
                local = cycles(false, true, false) - base;
  const int64_t both = cycles(true, true, false) - base, fenced = cycles(true, true, true) - base;
  std::cout << "beyond the staging: remote copy " << remote << ", two local copies " << local
            << ", both " << both << ", both with a FENCE between " << fenced << " cycles\n";
  EXPECT_GE(remote, 3 * 128) << "HALT did not wait for the link to send the queued flits";
  EXPECT_LT(both + 150, remote + local) << "the local copies did not overlap the link";
  EXPECT_GT(fenced, both + 150) << "FENCE did not wait for the transmit queue";
}

class RingPass : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(RingPass, RemoteWritesAndSignalsMatchTheFunctionalRing) {
  const int chips = std::get<0>(GetParam()), threads = std::get<1>(GetParam());
  std::mt19937_64 rng(test::test_seed());
  Rings rings(chips, threads, test::current_test_name());
  std::vector<std::vector<uint8_t>> data;
  for (int r = 0; r < chips; ++r) {
    data.push_back(random_bytes(rng, 512));
    rings.load(r, 0x10000, data.back());
    rings.load(r, 0x40000, std::vector<uint8_t>(256, 0xEE));
    rings.load(r, 0x50000, std::vector<uint8_t>(128, 0xDD));
    rings.load(r, kProg, assemble(kPassProgram));
  }
  const chip::RingRun run = rings.rtl().run({kProg}, 200000);
  const functional::RingResult f = rings.fn().run({kProg});
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_TRUE(f.all_halted()) << f.describe();
  for (int r = 0; r < chips; ++r) {
    SCOPED_TRACE("chip " + std::to_string(r));
    EXPECT_EQ(run.chips[r].status, uint32_t(isa::STATUS_HALTED));
    for (auto [addr, n] :
         {std::pair<uint64_t, size_t>{0x20000, 256}, {0x40000, 256}, {0x50000, 128}}) {
      EXPECT_EQ(rings.rtl_read(r, addr, n), rings.fn_read(r, addr, n))
          << "at 0x" << std::hex << addr;
    }
    // and against the host: prev's first 256 bytes, next's gather, prev's bf16 at 0x50006
    const int prev = (r + chips - 1) % chips, next = (r + 1) % chips;
    const auto out = rings.rtl_read(r, 0x20000, 256);
    EXPECT_TRUE(std::equal(out.begin(), out.end(), data[prev].begin()));
    const auto g = rings.rtl_read(r, 0x40000, 256);
    for (int row = 0; row < 8; ++row) {
      for (int k = 0; k < 8; ++k) {
        EXPECT_EQ(0, std::memcmp(&g[4 * (8 * row + k)], &data[next][64 * row + 8 * k], 4));
      }
    }
    const auto h = rings.rtl_read(r, 0x50000, 128);
    EXPECT_EQ(h[5], 0xDD);
    EXPECT_EQ(0, std::memcmp(&h[6], &data[prev][0x100], 74));
    EXPECT_EQ(h[80], 0xDD);
  }
  // flits per chip: 8 + 8 words of fp32, 3 words of bf16 (74 bytes from 0x50006), 3 signals
  EXPECT_EQ(run.flits, static_cast<uint64_t>(chips) * (8 + 8 + 3 + 3)) << "flits on the links";
  std::cout << chips << " chips, " << threads << " thread(s): " << run.cycles << " cycles\n";
}

INSTANTIATE_TEST_SUITE_P(Chips, RingPass,
                         ::testing::Values(std::make_tuple(2, 1), std::make_tuple(4, 1),
                                           std::make_tuple(2, 2)));

// The same ring, the same program: identical cycle counts and flit counts whether the chips
// run on one thread or two (lock-step windows make the threads' timing irrelevant).
TEST(RingLockStep, ThreadsDoNotChangeAnyCycle) {
  std::vector<chip::RingRun> runs;
  for (int threads : {1, 2}) {
    std::mt19937_64 rng(7);
    Rings rings(4, threads);
    for (int r = 0; r < 4; ++r) {
      rings.load(r, 0x10000, random_bytes(rng, 512));
      rings.load(r, kProg, assemble(kPassProgram));
    }
    runs.push_back(rings.rtl().run({kProg}, 200000));
    ASSERT_TRUE(runs.back().error.empty()) << runs.back().error;
  }
  for (int r = 0; r < 4; ++r) EXPECT_EQ(runs[0].chips[r].cycles, runs[1].chips[r].cycles);
  EXPECT_EQ(runs[0].link_flits, runs[1].link_flits);
  EXPECT_EQ(runs[0].cycles, runs[1].cycles);
}

// ---------------------------------------------------------------------------------------------
// The ring all-reduce.

// (chips, elements, piece bytes; 0: as large as the scratch allows)
// Random gradients (finite values of mixed magnitudes: inf and NaN would hide the order) at
// `addr` on chip r; returns their bits.
std::vector<uint32_t> load_gradients(Rings& rings, int r, std::mt19937_64& rng, uint32_t addr,
                                     uint32_t elems) {
  std::vector<uint32_t> g(elems);
  for (auto& x : g)
    x = fp::bits((static_cast<int>(rng() % 200001) - 100000) *
                 std::ldexp(1.0f, static_cast<int>(rng() % 40) - 30));
  std::vector<uint8_t> b(4 * elems);
  std::memcpy(b.data(), g.data(), b.size());
  rings.load(r, addr, b);
  return g;
}

compiler::AllReduceSpec allreduce_spec(int chips, int rank, uint32_t addr, uint32_t elems,
                                       uint32_t piece_bytes) {
  compiler::AllReduceSpec spec;
  spec.chips = chips;
  spec.rank = rank;
  spec.n = kN;
  spec.hbm_addr = addr;
  spec.elems = elems;
  spec.ub_base = 0;
  spec.ub_bytes = kUbBytes;
  spec.piece_bytes = piece_bytes;
  return spec;
}

class RingAllReduce : public ::testing::TestWithParam<std::tuple<int, uint32_t, uint32_t>> {};

TEST_P(RingAllReduce, EveryChipEndsWithTheSumInRingOrder) {
  const int chips = std::get<0>(GetParam());
  const uint32_t piece_bytes = std::get<2>(GetParam());
  std::mt19937_64 rng(test::test_seed());
  const uint32_t elems = compiler::allreduce_padded_elems(std::get<1>(GetParam()), chips, kN);
  const uint32_t addr = 0x200000;
  Rings rings(chips, 1, test::current_test_name());
  std::vector<std::vector<uint32_t>> g;
  for (int r = 0; r < chips; ++r) {
    g.push_back(load_gradients(rings, r, rng, addr, elems));
    const compiler::AllReduceSpec spec = allreduce_spec(chips, r, addr, elems, piece_bytes);
    rings.load(r, kProg, isa::encode_program(compiler::ring_allreduce_program(spec)));
  }
  const chip::RingRun run = rings.rtl().run({kProg}, 2'000'000);
  const functional::RingResult f = rings.fn().run({kProg});
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_TRUE(f.all_halted()) << f.describe();
  // The documented order: chunk c summed along the ring from chip c.
  const uint32_t chunk = elems / chips;
  std::vector<uint32_t> want(elems);
  for (uint32_t i = 0; i < elems; ++i) {
    const int c = static_cast<int>(i / chunk);
    uint32_t s = g[c][i];
    for (int k = 1; k < chips; ++k) s = fp::add(s, g[(c + k) % chips][i]);
    want[i] = s;
  }
  for (int r = 0; r < chips; ++r) {
    SCOPED_TRACE("chip " + std::to_string(r));
    const auto got = rings.rtl_read(r, addr, 4 * elems);
    EXPECT_EQ(got, rings.fn_read(r, addr, 4 * elems));
    std::vector<uint32_t> v(elems);
    std::memcpy(v.data(), got.data(), got.size());
    for (uint32_t i = 0; i < elems; ++i) {
      ASSERT_EQ(v[i], want[i]) << "element " << i;
    }
  }
  const uint64_t payload = 2ull * (chips - 1) * chunk * 4;
  std::cout << chips << " chips, " << elems << " fp32, pieces of " << piece_bytes
            << " bytes: " << run.cycles << " cycles, " << payload
            << " bytes per link: " << double(payload) / run.cycles
            << " bytes/cycle (link payload peak 32/3 = 10.67)\n";
}

// Several pieces per chunk and one piece per chunk; 16 slots of 512 bytes (8 receive, 4 own,
// 4 sums; skew 3) and 8 slots of 1 KiB (4 receive, 2 own, 2 sums; skew 3 with 2 and 3 chips, 2
// with 4, 1 with 6), so both buffer layouts and every skew run on both rings.
INSTANTIATE_TEST_SUITE_P(
    Chips, RingAllReduce,
    ::testing::Values(std::make_tuple(2, 1000u, 512u), std::make_tuple(3, 1000u, 512u),
                      std::make_tuple(4, 1000u, 512u), std::make_tuple(5, 2000u, 512u),
                      std::make_tuple(2, 4000u, 1024u), std::make_tuple(3, 4000u, 1024u),
                      std::make_tuple(4, 4000u, 1024u), std::make_tuple(6, 6000u, 1024u),
                      std::make_tuple(3, 48u, 0u), std::make_tuple(2, 200u, 0u)));

TEST(RingAllReduceSpec, ImpossibleSpecsAreRefusedByName) {
  compiler::AllReduceSpec s;
  s.chips = 2;
  s.n = kN;
  s.elems = 1004;  // not a multiple of chips x n
  s.ub_bytes = kUbBytes;
  EXPECT_THROW(compiler::ring_allreduce_program(s), std::invalid_argument);
  s.elems = 1024;
  s.ub_bytes = 64;  // too small for six pieces
  EXPECT_THROW(compiler::ring_allreduce_program(s), std::invalid_argument);
  s.ub_bytes = kUbBytes;
  s.chips = 9;  // eight 1 KiB pieces: a sum would wait longer than its buffer can (needs 10)
  s.elems = 9 * 1024;
  s.piece_bytes = 1024;
  EXPECT_THROW(compiler::ring_allreduce_program(s), std::invalid_argument);
  s.chips = 2;
  s.elems = 1024;
  s.piece_bytes = 0;
  s.rank = 2;
  EXPECT_THROW(compiler::ring_allreduce_program(s), std::invalid_argument);
  s.rank = 0;
  s.hbm_addr = 4;
  EXPECT_THROW(compiler::ring_allreduce_program(s), std::invalid_argument);
  EXPECT_EQ(compiler::allreduce_padded_elems(1000, 3, 4), 1008u);
}

// The reduce-scatter alone (the data-parallel step's first half): chip r ends with chunk
// (r + 1) mod P summed in the documented ring order; rtl and functional rings agree on every byte.
class RingReduceScatter : public ::testing::TestWithParam<int> {};

TEST_P(RingReduceScatter, EachChipEndsWithItsChunkSummedInRingOrder) {
  const int chips = GetParam();
  std::mt19937_64 rng(test::test_seed());
  const uint32_t elems = compiler::allreduce_padded_elems(700, chips, kN);
  const uint32_t addr = 0x200000, chunk = elems / static_cast<uint32_t>(chips);
  Rings rings(chips, 1, test::current_test_name());
  std::vector<std::vector<uint32_t>> g;
  for (int r = 0; r < chips; ++r) {
    g.push_back(load_gradients(rings, r, rng, addr, elems));
    compiler::AllReduceSpec spec = allreduce_spec(chips, r, addr, elems, 256);
    spec.reduce_scatter_only = true;
    EXPECT_EQ(compiler::allreduce_link_bytes(spec), uint64_t{chips - 1u} * chunk * 4);
    rings.load(r, kProg, isa::encode_program(compiler::ring_allreduce_program(spec)));
  }
  const chip::RingRun run = rings.rtl().run({kProg}, 2'000'000);
  const functional::RingResult f = rings.fn().run({kProg});
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_TRUE(f.all_halted()) << f.describe();
  for (int r = 0; r < chips; ++r) {
    SCOPED_TRACE("chip " + std::to_string(r));
    const auto got = rings.rtl_read(r, addr, 4 * elems);
    EXPECT_EQ(got, rings.fn_read(r, addr, 4 * elems));
    const int c = (r + 1) % chips;
    for (uint32_t i = c * chunk; i < (c + 1) * chunk; ++i) {
      uint32_t want = g[c][i];
      for (int k = 1; k < chips; ++k) want = fp::add(want, g[(c + k) % chips][i]);
      uint32_t v;
      std::memcpy(&v, got.data() + 4 * i, 4);
      ASSERT_EQ(v, want) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, RingReduceScatter, ::testing::Values(2, 3, 4));

// The all-gather of region lists (the sharded update's second half): chunk k's regions — a
// strided bf16 block, a contiguous bf16 run, fp32 words — go from its owner, chip (k − 1)
// mod P, to every chip; bytes outside the regions stay each chip's own.
class RingAllGather : public ::testing::TestWithParam<int> {};

TEST_P(RingAllGather, EveryChipEndsWithEveryChunkFromItsOwner) {
  const int P = GetParam();
  std::mt19937_64 rng(test::test_seed());
  const uint32_t base = 0x200000, span = 0x3000;
  // chunk k: 3 rows of 24 bf16 at pitch 80 bf16 (columns 24k .. 24k + 23 of a [3][80] block),
  // 40 bf16 at 0x1000 + 128k, and for chunk 0 also 12 fp32 at 0x2000
  std::vector<std::vector<compiler::GatherRegion>> chunks(static_cast<size_t>(P));
  for (int k = 0; k < P; ++k) {
    compiler::GatherRegion a;
    a.addr = base + 48 * k;
    a.elem_bytes = 2;
    a.loops = {{24, 2}, {3, 160}};
    compiler::GatherRegion b;
    b.addr = base + 0x1000 + 128 * k;
    b.elem_bytes = 2;
    b.loops = {{40, 2}};
    chunks[k] = {a, b};
    if (k == 0) {
      compiler::GatherRegion c;
      c.addr = base + 0x2000;
      c.elem_bytes = 4;
      c.loops = {{2, 4}, {2, 8}, {3, 16}};  // loops 2 and 3 too
      chunks[k].push_back(c);
    }
  }
  Rings rings(P, 1, test::current_test_name());
  std::vector<std::vector<uint8_t>> before;
  for (int r = 0; r < P; ++r) {
    before.push_back(random_bytes(rng, span));
    rings.load(r, base, before.back());
    rings.load(r, kProg, isa::encode_program(compiler::ring_allgather_program(P, r, chunks)));
  }
  const chip::RingRun run = rings.rtl().run({kProg}, 2'000'000);
  const functional::RingResult f = rings.fn().run({kProg});
  ASSERT_TRUE(run.error.empty()) << run.error;
  ASSERT_TRUE(f.all_halted()) << f.describe();
  // expected: each chip's own bytes, with every region's bytes from the chunk's owner
  std::vector<uint8_t> owner_of(span, 0xff);  // which chip's bytes each offset must hold
  for (int k = 0; k < P; ++k)
    for (const compiler::GatherRegion& g : chunks[k]) {
      const auto l = [&](size_t i) {
        return i < g.loops.size() ? g.loops[i] : std::pair<uint32_t, int32_t>{1, 0};
      };
      for (uint32_t i3 = 0; i3 < l(3).first; ++i3)
        for (uint32_t i2 = 0; i2 < l(2).first; ++i2)
          for (uint32_t i1 = 0; i1 < l(1).first; ++i1)
            for (uint32_t i0 = 0; i0 < l(0).first; ++i0) {
              const uint32_t at = g.addr - base + i3 * l(3).second + i2 * l(2).second +
                                  i1 * l(1).second + i0 * l(0).second;
              for (int e = 0; e < g.elem_bytes; ++e)
                owner_of[at + e] = static_cast<uint8_t>((k + P - 1) % P);
            }
    }
  for (int r = 0; r < P; ++r) {
    SCOPED_TRACE("chip " + std::to_string(r));
    const auto got = rings.rtl_read(r, base, span);
    EXPECT_EQ(got, rings.fn_read(r, base, span));
    for (uint32_t i = 0; i < span; ++i) {
      const int from = owner_of[i] == 0xff ? r : owner_of[i];
      ASSERT_EQ(got[i], before[from][i]) << "offset 0x" << std::hex << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, RingAllGather, ::testing::Values(2, 3));

TEST(RingAllGatherSpec, ImpossibleSpecsAreRefusedByName) {
  std::vector<std::vector<compiler::GatherRegion>> chunks(2);
  compiler::GatherRegion g;
  g.addr = 0x1000;
  g.elem_bytes = 4;
  g.loops = {{8, 4}};
  chunks[0] = {g};
  EXPECT_NO_THROW(compiler::ring_allgather_program(2, 1, chunks));
  EXPECT_THROW(compiler::ring_allgather_program(2, 2, chunks), std::invalid_argument);
  EXPECT_THROW(compiler::ring_allgather_program(3, 0, chunks), std::invalid_argument);
  chunks[1] = {g};
  chunks[1][0].loops = {{0, 4}};
  EXPECT_THROW(compiler::ring_allgather_program(2, 0, chunks), std::invalid_argument);
  chunks[1][0].loops = {{8, 4}};
  chunks[1][0].elem_bytes = 3;
  EXPECT_THROW(compiler::ring_allgather_program(2, 0, chunks), std::invalid_argument);
  chunks[1][0].elem_bytes = 4;
  chunks[1][0].addr = 0x1002;
  EXPECT_THROW(compiler::ring_allgather_program(2, 0, chunks), std::invalid_argument);
  chunks[1][0].addr = 0x1000;
  chunks[1][0].loops = {{65536, 4}};  // the DMA's counts are 16 bits
  EXPECT_THROW(compiler::ring_allgather_program(2, 0, chunks), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Faults.

// On one chip (links down) remote operations fault at decode, on both models alike.
TEST(RingFaults, RemoteOperationsOnALinkThatIsDownFault) {
  struct Case {
    const char* text;
    uint32_t code, info;
  } cases[] = {
      {"dma.copy ub, ub, 4, 0x0, 0x100, next\nhalt\n", isa::FAULT_LINK_DOWN, 1},
      {"signal dma, rc3, prev\nhalt\n", isa::FAULT_LINK_DOWN, 2},
      {"wait vpu, rc0, 1\nhalt\n", isa::FAULT_SYNC_DEADLOCK, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    Rings rings(1);
    rings.load(0, kProg, assemble(c.text));
    const chip::RingRun run = rings.rtl().run({kProg}, 10000);
    const functional::RingResult f = rings.fn().run({kProg});
    ASSERT_EQ(run.chips.size(), 1u);
    EXPECT_EQ(run.chips[0].status, uint32_t(isa::STATUS_FAULTED));
    EXPECT_EQ(run.chips[0].fault_code, c.code);
    EXPECT_EQ(run.chips[0].fault_info, c.info);
    EXPECT_EQ(run.chips[0].fault_pc, kProg);
    EXPECT_EQ(f.chips[0].fault_code, c.code);
    EXPECT_EQ(f.chips[0].fault_info, c.info);
    EXPECT_NE(run.error.find("chip 0: fault"), std::string::npos) << run.error;
  }
}

// Chip 1 faults at once; chip 0 waits for a signal chip 1 will never send. The ring stops
// within a window of the fault and names both.
TEST(RingFaults, AFaultingChipStopsTheRingWithoutAHang) {
  Rings rings(2);
  rings.load(0, kProg, assemble("wait dma, rc0, 1\nhalt\n"));
  rings.load(1, kProg, assemble("vpu.st f32, v1, 0x3\nhalt\n"));  // misaligned: UB_RANGE
  const chip::RingRun run = rings.rtl().run({kProg}, 1'000'000);
  EXPECT_FALSE(run.timed_out);
  // the others stop in the window after the fault (32-cycle windows)
  EXPECT_LE(run.cycles, run.chips[1].cycles + 2 * 32) << run.chips[1].cycles;
  EXPECT_EQ(run.chips[1].fault_code, uint32_t(isa::FAULT_UB_RANGE));
  EXPECT_EQ(run.chips[0].status, uint32_t(isa::STATUS_RUNNING));
  EXPECT_NE(run.error.find("chip 1: fault 2 at pc 0x100000"), std::string::npos) << run.error;
  EXPECT_NE(run.error.find("chip 0: stopped while running"), std::string::npos) << run.error;
  EXPECT_THROW(rings.rtl().run({kProg}), std::runtime_error) << "a failed ring refuses runs";
  const functional::RingResult f = rings.fn().run({kProg});
  EXPECT_EQ(f.chips[1].status, functional::RunStatus::kFaulted);
  EXPECT_TRUE(f.deadlock) << f.describe();
}

// Both chips wait for each other: the functional ring reports the deadlock, the RTL ring its
// watchdog with each chip's PC.
TEST(RingFaults, ARingDeadlockIsReportedNotHung) {
  Rings rings(2);
  for (int r = 0; r < 2; ++r) rings.load(r, kProg, assemble("nop\nwait dma, rc0, 1\nhalt\n"));
  const chip::RingRun run = rings.rtl().run({kProg}, 5000);
  EXPECT_TRUE(run.timed_out);
  EXPECT_NE(run.error.find("watchdog"), std::string::npos);
  // the WAIT sits in the DMA queue; decode waits at the HALT after it
  EXPECT_NE(run.error.find("chip 1: stopped while running at pc 0x100020 (unit state 0x5)"),
            std::string::npos)
      << run.error;
  const functional::RingResult f = rings.fn().run({kProg});
  EXPECT_TRUE(f.deadlock);
  EXPECT_EQ(f.chips[0].status, functional::RunStatus::kBlocked);
}

}  // namespace
}  // namespace tessera

namespace tessera {
namespace {

// ---------------------------------------------------------------------------------------------
// The data-parallel training step (compiler Replication) of the example CNN on a ring of two
// verilated chips, two threads: every replica's weights, moments, bf16 copies and metrics
// bit-identical to the functional ring's, and the replicated part (bf16 copies, fp32 biases)
// identical on both chips.
TEST(RingTrainStep, DataParallelStepBitIdenticalToTheFunctionalRing) {
  const int P = 2;
  const uint32_t b = 2;
  const compiler::DenseStackSpec spec = test::example_cnn_spec();
  const tessera::ChipShape shape{kN, kUbBytes, static_cast<uint32_t>(kAccRows)};
  std::vector<compiler::DenseStackStep> steps;
  for (int r = 0; r < P; ++r) {
    compiler::Replication rep;
    rep.replicas = P;
    rep.rank = r;
    steps.emplace_back(spec, compiler::OptimizerSpec{}, shape, b, 0x100000,
                       compiler::StepKind::kTrain, nullptr, compiler::DenseLoweringChoices{}, rep);
  }
  Rings rings(P, 2, test::current_test_name());
  const compiler::DenseParams p0 = compiler::glorot_init(spec, 9);
  std::mt19937_64 rng(test::test_seed());
  std::vector<uint32_t> progs;
  const uint64_t prog_at = (0x100000 + steps[0].layout().bytes + 4095) / 4096 * 4096;
  for (int r = 0; r < P; ++r) {
    for (const auto& w : steps[r].state_image(p0, compiler::zero_opt_state(spec)))
      rings.load(r, w.first, w.second);
    rings.load(r, prog_at, steps[r].program_bytes());
    progs.push_back(static_cast<uint32_t>(prog_at));
  }
  const std::vector<uint64_t> fprogs(progs.begin(), progs.end());
  // two steps: the second one computes with the weights the first one's all-gather spread
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    for (int r = 0; r < P; ++r) {
      std::vector<uint16_t> img(b * 784);
      std::vector<uint8_t> lbl(b);
      for (auto& v : img) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
      for (auto& v : lbl) v = static_cast<uint8_t>(rng() % 10);
      for (const auto& w : steps[r].batch_image(img, lbl)) rings.load(r, w.first, w.second);
    }
    const chip::RingRun run = rings.rtl().run(progs, 40'000'000);
    const functional::RingResult f = rings.fn().run(fprogs);
    ASSERT_TRUE(run.error.empty()) << run.error;
    ASSERT_TRUE(f.all_halted()) << f.describe();
    const auto [lo, state_bytes] = steps[0].state_range();
    const uint64_t metrics = steps[0].layout().metrics;
    for (int r = 0; r < P; ++r) {
      SCOPED_TRACE("chip " + std::to_string(r));
      const auto got = rings.rtl_read(r, lo, state_bytes);
      EXPECT_EQ(got, rings.fn_read(r, lo, state_bytes)) << "state vs the functional ring";
      EXPECT_EQ(rings.rtl_read(r, metrics, 2 * kN * 4), rings.fn_read(r, metrics, 2 * kN * 4));
      for (const auto& range : steps[r].replicated_ranges())
        EXPECT_EQ(rings.rtl_read(r, range.first, range.second),
                  rings.rtl_read(0, range.first, range.second))
            << "replicas differ at 0x" << std::hex << range.first;
    }
    std::cout << "data-parallel step " << step << ", 2 chips x batch " << b << ": "
              << run.chips[0].cycles << " / " << run.chips[1].cycles << " cycles, " << run.flits
              << " flits\n";
  }
}

}  // namespace
// An RTL assertion on one chip of a ring (chip 1 reads accumulator rows never written: the
// SRAM model's check) ends the run with an error that names the chip, the cycle and the decode
// PC, as a single chip's does, instead of aborting the process; the other chip is stopped.
TEST(RingAssertion, AChipsAssertionNamesTheChipTheCycleAndThePc) {
  auto cluster =
      driver::Cluster::open(driver::DeviceConfig(kSmallChip, driver::Backend::kRtl), 2, 1);
  const uint64_t p0 = cluster->chip(0).load_program(assemble("nop\nnop\nhalt\n"));
  const uint64_t p1 = cluster->chip(1).load_program(assemble("vpu.ld acc, v1, 5\nhalt\n"));
  try {
    cluster->run_all({p0, p1}, 100000);
    FAIL() << "the ring ran to its end";
  } catch (const driver::DeviceAssertion& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("chip 1: RTL assertion failed at cycle "), std::string::npos) << what;
    EXPECT_NE(what.find("decode at pc 0x"), std::string::npos) << what;
    EXPECT_GT(e.cycle, 0u) << what;
  }
}

}  // namespace tessera
