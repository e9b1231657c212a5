// The SRAM macro models (tpu_sram_sp, tpu_sram_dp) and the banked buffer (tpu_sram_banked)
// against a C++ memory: random reads and
// element-masked writes with the registered read latency, read-before-write on the two-port
// macro, contents kept across reset, and the simulation check that reports a read of
// never-written data instead of returning it silently; for the banked buffer, random traffic
// from three ports with every read checked, round-robin grants (no port waits more than
// Ports - 1 cycles), and ports on different banks served in the same cycle.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "Vtpu_sram_banked.h"
#include "Vtpu_sram_banked_first.h"
#include "Vtpu_sram_dp.h"
#include "Vtpu_sram_sp.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

template <int Elems>
struct MemModel {
  std::vector<std::array<uint16_t, Elems>> words;
  explicit MemModel(int n) : words(n) {}
  void write(int addr, uint32_t mask, const std::array<uint16_t, Elems>& data) {
    for (int e = 0; e < Elems; ++e) {
      if (mask >> e & 1) words[addr][e] = data[e];
    }
  }
};

TEST(SramSinglePort, RandomMaskedWritesAndReads) {
  constexpr int kWords = 64, kElems = 4;
  SimCtrl<Vtpu_sram_sp> sim(test::current_test_name());
  auto& m = sim.top();
  MemModel<kElems> ref(kWords);
  std::mt19937_64 rng(test::test_seed());
  auto random_word = [&] {
    std::array<uint16_t, kElems> d;
    for (auto& x : d) x = static_cast<uint16_t>(rng());
    return d;
  };
  auto drive_write = [&](int addr, uint32_t mask, const std::array<uint16_t, kElems>& d) {
    m.req_i = 1;
    m.we_i = 1;
    m.addr_i = addr;
    m.wmask_i = mask;
    for (int e = 0; e < kElems; ++e) put_elem<16>(m.wdata_i, e, d[e]);
    sim.tick();
    ref.write(addr, mask, d);
  };
  for (int a = 0; a < kWords; ++a) drive_write(a, 0xF, random_word());  // initialise all
  int pending = -1;                                                     // address read last cycle
  for (int i = 0; i < 20000; ++i) {
    const int addr = static_cast<int>(rng() % kWords);
    if (rng() % 2) {
      drive_write(addr, static_cast<uint32_t>(rng() % 16), random_word());
      pending = -1;
    } else {
      m.req_i = 1;
      m.we_i = 0;
      m.addr_i = addr;
      sim.tick();
      for (int e = 0; e < kElems; ++e) {
        ASSERT_EQ(get_elem<16>(m.rdata_o, e), ref.words[addr][e]) << "addr " << addr << " e " << e;
      }
      pending = addr;
    }
    // With no access the read data holds.
    if (pending >= 0 && rng() % 4 == 0) {
      m.req_i = 0;
      sim.tick();
      ASSERT_EQ(get_elem<16>(m.rdata_o, 0), ref.words[pending][0]);
    }
  }
}

TEST(SramTwoPort, ReadBeforeWriteAndRandomTraffic) {
  constexpr int kWords = 32, kElems = 8;
  SimCtrl<Vtpu_sram_dp> sim(test::current_test_name());
  auto& m = sim.top();
  MemModel<kElems> ref(kWords);
  std::mt19937_64 rng(test::test_seed());
  m.re_i = 0;
  for (int a = 0; a < kWords; ++a) {
    m.we_i = 1;
    m.waddr_i = a;
    m.wmask_i = 0xFF;
    std::array<uint16_t, kElems> d;
    for (int e = 0; e < kElems; ++e) put_elem<16>(m.wdata_i, e, d[e] = uint16_t(rng()));
    sim.tick();
    ref.write(a, 0xFF, d);
  }
  for (int i = 0; i < 20000; ++i) {
    const int wa = static_cast<int>(rng() % kWords);
    // Half the reads hit the word written in the same cycle: they must see the old data.
    const int ra = (rng() % 2) ? wa : static_cast<int>(rng() % kWords);
    const auto before = ref.words[ra];
    m.we_i = 1;
    m.waddr_i = wa;
    m.wmask_i = static_cast<uint32_t>(rng() % 256);
    std::array<uint16_t, kElems> d;
    for (int e = 0; e < kElems; ++e) put_elem<16>(m.wdata_i, e, d[e] = uint16_t(rng()));
    m.re_i = 1;
    m.raddr_i = ra;
    sim.tick();
    ref.write(wa, m.wmask_i, d);
    for (int e = 0; e < kElems; ++e) {
      ASSERT_EQ(get_elem<16>(m.rdata_o, e), before[e]) << "read " << ra << " write " << wa;
    }
  }
}

TEST(SramTwoPort, ReadOfNeverWrittenDataIsReported) {
  SimCtrl<Vtpu_sram_dp> sim(test::current_test_name());
  sim.context().fatalOnError(false);
  auto& m = sim.top();
  m.re_i = 0;  // inputs start random in simulation
  // A fully written word reads cleanly.
  m.we_i = 1;
  m.waddr_i = 3;
  m.wmask_i = 0xFF;
  sim.tick();
  m.we_i = 0;
  m.re_i = 1;
  m.raddr_i = 3;
  sim.tick();
  EXPECT_FALSE(sim.context().gotError());
  // A partly written word does not.
  m.we_i = 1;
  m.waddr_i = 4;
  m.wmask_i = 0x0F;
  m.re_i = 0;
  sim.tick();
  m.we_i = 0;
  m.re_i = 1;
  m.raddr_i = 4;
  sim.tick();
  EXPECT_TRUE(sim.context().gotError());
}

TEST(SramSinglePort, ReadOfNeverWrittenWordIsReported) {
  SimCtrl<Vtpu_sram_sp> sim(test::current_test_name());
  sim.context().fatalOnError(false);
  auto& m = sim.top();
  m.req_i = 1;
  m.we_i = 0;
  m.addr_i = 17;
  sim.tick();
  EXPECT_TRUE(sim.context().gotError());
}

// tpu_sram_banked as built in sim/CMakeLists.txt: 4 banks, 64 words of 4 x 16 bits, 3 ports.
constexpr int kBanks = 4, kBWords = 64, kBElems = 4, kBPorts = 3, kBAddrW = 6;
// The bank of word a: its 2-bit fields XORed (a power-of-two stride of words still visits
// every bank), at row a / kBanks.
int bank_of(int a) { return (a ^ a >> 2 ^ a >> 4) & (kBanks - 1); }

struct BankedReq {
  bool valid = false, we = false;
  int addr = 0;
  uint32_t mask = 0;
  std::array<uint16_t, kBElems> data{};
  int waited = 0;
};

template <class Model>
void drive_banked(Model& m, const std::array<BankedReq, kBPorts>& rq) {
  m.req_i = 0;
  m.we_i = 0;
  m.addr_i = 0;
  m.wmask_i = 0;
  for (int p = 0; p < kBPorts; ++p) {
    put_bits(m.req_i, p, 1, rq[p].valid);
    put_bits(m.we_i, p, 1, rq[p].we);
    put_bits(m.addr_i, kBAddrW * p, kBAddrW, static_cast<uint64_t>(rq[p].addr));
    put_bits(m.wmask_i, kBElems * p, kBElems, rq[p].mask);
    for (int e = 0; e < kBElems; ++e) put_elem<16>(m.wdata_i, kBElems * p + e, rq[p].data[e]);
  }
}

// Random traffic from three ports; `first`: the build that grants port 2 before round-robin
// (FirstPort = 2, as the chip's MXU port): port 2 then never waits, and the others still get
// every bank it does not want.
template <class Model>
void banked_random_traffic(bool first) {
  SimCtrl<Model> sim(test::current_test_name());
  auto& m = sim.top();
  std::mt19937_64 rng(test::test_seed());
  MemModel<kBElems> ref(kBWords);
  std::array<BankedReq, kBPorts> rq{};
  drive_banked(m, rq);
  sim.reset();
  auto random_word = [&] {
    std::array<uint16_t, kBElems> d;
    for (auto& x : d) x = static_cast<uint16_t>(rng());
    return d;
  };
  // Fill every word through port 1 first (reads of never-written words are errors).
  for (int a = 0; a < kBWords; ++a) {
    rq[1] = {true, true, a, 0xF, random_word(), 0};
    drive_banked(m, rq);
    sim.eval();
    ASSERT_TRUE(m.gnt_o & 2);
    ref.write(a, 0xF, rq[1].data);
    sim.tick();
  }
  rq[1].valid = false;
  std::array<std::array<uint16_t, kBElems>, kBPorts> expect{};
  std::array<bool, kBPorts> read_due{};
  int max_wait = 0, parallel_cycles = 0, reads = 0;
  std::array<int, kBPorts> granted{};
  for (int c = 0; c < 20000; ++c) {
    for (int p = 0; p < kBPorts; ++p) {
      if (!rq[p].valid && rng() % 100 < 80) {
        // Hot spot: port traffic crowds bank 0 half the time, so the arbiter is exercised.
        const int row = static_cast<int>(rng() % (kBWords / kBanks)) * kBanks;
        const int a = (rng() % 2) ? row | bank_of(row) : static_cast<int>(rng() % kBWords);
        rq[p] = {true, rng() % 3 == 0, a, static_cast<uint32_t>(rng() % 16), random_word(), 0};
      }
    }
    drive_banked(m, rq);
    sim.eval();
    // Read data of last cycle's granted reads.
    for (int p = 0; p < kBPorts; ++p) {
      ASSERT_EQ(bool(m.rvalid_o >> p & 1), read_due[p]) << "port " << p << " cycle " << c;
      if (read_due[p]) {
        for (int e = 0; e < kBElems; ++e) {
          ASSERT_EQ(get_elem<16>(m.rdata_o, kBElems * p + e), expect[p][e])
              << "port " << p << " element " << e << " cycle " << c;
        }
        ++reads;
      }
    }
    // Grants: one per bank, only to requesting ports; reads see the memory before this
    // cycle's writes (different banks, so no overlap within a cycle anyway).
    std::array<int, kBanks> per_bank{};
    int grants = 0;
    for (int p = 0; p < kBPorts; ++p) {
      const bool g = m.gnt_o >> p & 1;
      read_due[p] = false;
      if (!rq[p].valid) {
        ASSERT_FALSE(g) << "grant without request";
        continue;
      }
      if (!g) {
        ASSERT_FALSE(first && p == 2) << "the first port waited, cycle " << c;
        ++rq[p].waited;
        continue;
      }
      ++per_bank[bank_of(rq[p].addr)];
      ++grants;
      ++granted[p];
      max_wait = std::max(max_wait, rq[p].waited);
      if (rq[p].we) {
        ref.write(rq[p].addr, rq[p].mask, rq[p].data);
      } else {
        expect[p] = ref.words[rq[p].addr];
        read_due[p] = true;
      }
      rq[p].valid = false;
    }
    for (int b = 0; b < kBanks; ++b) ASSERT_LE(per_bank[b], 1) << "bank " << b << " twice";
    // A bank with a requester must grant one.
    for (int b = 0; b < kBanks; ++b) {
      bool wanted = false;
      for (int p = 0; p < kBPorts; ++p) wanted |= rq[p].valid && bank_of(rq[p].addr) == b;
      if (wanted) ASSERT_EQ(per_bank[b], 1) << "bank " << b << " idle while requested";
    }
    if (grants >= 2) ++parallel_cycles;
    sim.tick();
  }
  std::cout << reads << " reads checked; longest wait " << max_wait << " cycles; "
            << parallel_cycles << " cycles served two or more ports; grants " << granted[0] << " / "
            << granted[1] << " / " << granted[2] << "\n";
  if (!first) EXPECT_LE(max_wait, kBPorts - 1) << "round-robin bound";
  // the ports that are not first share the rest fairly (a grant to the first port does not
  // move their round-robin pointer)
  EXPECT_GT(granted[1], granted[0] * 8 / 10) << "port 1 starved";
  EXPECT_GT(granted[0], granted[1] * 8 / 10) << "port 0 starved";
  EXPECT_GT(reads, 5000);
  EXPECT_GT(parallel_cycles, 2000);
}

TEST(SramBanked, RandomTrafficFromThreePortsRoundRobin) {
  banked_random_traffic<Vtpu_sram_banked>(false);
}

TEST(SramBanked, TheFirstPortNeverWaits) { banked_random_traffic<Vtpu_sram_banked_first>(true); }

}  // namespace
}  // namespace tessera
