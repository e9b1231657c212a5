// The unified buffer's wide-access adapter (tpu_ub_port) on a C++ model of one buffer port
// (32-byte words, byte enables, read data the cycle after a grant, random grants): random
// reads and writes of 4N and 2N bytes at aligned addresses, for N = 4 (sub-word accesses) and
// N = 16 (one or two words), against a C++ byte array: every read returns the bytes last
// written, and a write changes only its own bytes.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "Vtpu_ub_port_n16.h"
#include "Vtpu_ub_port_n4.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kUbBytes = 4096;

template <class Model, int N>
void random_accesses(int count) {
  SimCtrl<Model> sim(test::current_test_name());
  std::mt19937_64 rng(test::test_seed());
  auto& m = sim.top();
  std::vector<uint8_t> mem(kUbBytes), ref(kUbBytes);
  for (int i = 0; i < kUbBytes; ++i) mem[i] = ref[i] = static_cast<uint8_t>(rng());
  m.req_i = 0;
  m.we_i = 0;
  m.wide_i = 0;
  m.addr_i = 0;
  m.ub_gnt_i = 0;
  m.ub_rvalid_i = 0;
  sim.reset();
  bool read_due = false;
  std::vector<uint8_t> read_word(32);
  int reads = 0;
  for (int i = 0; i < count; ++i) {
    const bool wide = rng() % 2, we = rng() % 2;
    const int bytes = wide ? 4 * N : 2 * N;
    const uint32_t addr = static_cast<uint32_t>(rng() % (kUbBytes / bytes)) * bytes;
    std::vector<uint8_t> data(bytes);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    m.req_i = 1;
    m.we_i = we;
    m.wide_i = wide;
    m.addr_i = addr;
    for (int b = 0; b < bytes; ++b) put_elem<8>(m.wdata_i, b, data[b]);
    bool done = false, got_data = false;
    for (int guard = 0; guard < 1000 && !(done && (we || got_data)); ++guard) {
      m.ub_gnt_i = rng() % 100 < 60;
      m.ub_rvalid_i = read_due;
      for (int b = 0; b < 32; ++b) put_elem<8>(m.ub_rdata_i, b, read_word[b]);
      sim.eval();
      if (m.rvalid_o) {
        ASSERT_FALSE(we);
        for (int b = 0; b < bytes; ++b) {
          ASSERT_EQ(get_elem<8>(m.rdata_o, b), ref[addr + b]) << "read of " << addr << " byte " << b;
        }
        got_data = true;
        ++reads;
      }
      read_due = false;
      if (m.ub_req_o && m.ub_gnt_i) {
        const uint32_t w = m.ub_addr_o;
        ASSERT_LT(w * 32, uint32_t(kUbBytes));
        if (m.ub_we_o) {
          for (int b = 0; b < 32; ++b) {
            const bool en = (m.ub_wmask_o >> b) & 1;
            if (en) mem[w * 32 + b] = static_cast<uint8_t>(get_elem<8>(m.ub_wdata_o, b));
          }
        } else {
          for (int b = 0; b < 32; ++b) read_word[b] = mem[w * 32 + b];
          read_due = true;
        }
      }
      const bool granted = m.gnt_o;
      sim.tick();
      if (granted) {  // the request drops after the edge that took it
        done = true;
        m.req_i = 0;
      }
    }
    ASSERT_TRUE(done) << "access never granted";
    if (we) {
      for (int b = 0; b < bytes; ++b) ref[addr + b] = data[b];
      ASSERT_EQ(mem, ref) << "write of " << bytes << " bytes at " << addr;
    }
  }
  EXPECT_GT(reads, count / 4);
}

TEST(UbPort, SubWordAccessesAtN4) { random_accesses<Vtpu_ub_port_n4, 4>(3000); }
TEST(UbPort, OneAndTwoWordAccessesAtN16) { random_accesses<Vtpu_ub_port_n16, 16>(3000); }

}  // namespace
}  // namespace tessera
