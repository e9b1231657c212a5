// The SRAM macro models (tpu_sram_sp, tpu_sram_dp) against a C++ memory: random reads and
// element-masked writes with the registered read latency, read-before-write on the two-port
// macro, contents kept across reset, and the simulation check that reports a read of
// never-written data instead of returning it silently.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

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

}  // namespace
}  // namespace tessera
