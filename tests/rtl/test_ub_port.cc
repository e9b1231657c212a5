// The unified buffer's wide-access adapter (tpu_ub_port) on a C++ model of its two buffer ports
// (32-byte words, byte enables, read data the cycle after a grant, random grants per port):
// random reads and writes of 4N and 2N bytes at aligned addresses, for N = 4 (sub-word
// accesses), N = 16 (one or two words) and N = 64 (four or eight words, two a cycle), against a
// C++ byte array: every read returns the bytes last written, and a write changes only its own
// bytes; with every request granted at once an access takes ceil(words / 2) cycles.
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <vector>

#include "Vtpu_ub_port_n16.h"
#include "Vtpu_ub_port_n4.h"
#include "Vtpu_ub_port_n64.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kUbBytes = 4096;

// grant_pct: each port's request is granted with this probability a cycle.
template <class Model, int N>
void random_accesses(int count, int grant_pct) {
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
  std::array<bool, 2> read_due{};
  std::array<std::vector<uint8_t>, 2> read_word{std::vector<uint8_t>(32),
                                                 std::vector<uint8_t>(32)};
  int reads = 0;
  for (int i = 0; i < count; ++i) {
    const bool wide = rng() % 2, we = rng() % 2;
    const int bytes = wide ? 4 * N : 2 * N;
    const int words = bytes > 32 ? bytes / 32 : 1;
    const uint32_t addr = static_cast<uint32_t>(rng() % (kUbBytes / bytes)) * bytes;
    std::vector<uint8_t> data(bytes);
    for (auto& b : data) b = static_cast<uint8_t>(rng());
    m.req_i = 1;
    m.we_i = we;
    m.wide_i = wide;
    m.addr_i = addr;
    for (int b = 0; b < bytes; ++b) put_elem<8>(m.wdata_i, b, data[b]);
    bool done = false, got_data = false;
    int cycles = 0;
    std::vector<int> words_done(words, 0);
    for (int guard = 0; guard < 1000 && !(done && (we || got_data)); ++guard) {
      m.ub_gnt_i = 0;
      m.ub_rvalid_i = 0;
      for (int q = 0; q < 2; ++q) {
        if (static_cast<int>(rng() % 100) < grant_pct) m.ub_gnt_i |= 1u << q;
        if (read_due[q]) m.ub_rvalid_i |= 1u << q;
        for (int b = 0; b < 32; ++b) put_elem<8>(m.ub_rdata_i, 32 * q + b, read_word[q][b]);
      }
      sim.eval();
      if (!done) ++cycles;
      if (m.rvalid_o) {
        ASSERT_FALSE(we);
        for (int b = 0; b < bytes; ++b) {
          ASSERT_EQ(get_elem<8>(m.rdata_o, b), ref[addr + b]) << "read of " << addr << " byte " << b;
        }
        got_data = true;
        ++reads;
      }
      read_due = {false, false};
      for (int q = 0; q < 2; ++q) {
        if (!((m.ub_req_o >> q) & 1) || !((m.ub_gnt_i >> q) & 1)) continue;
        ASSERT_TRUE(q == 0 || words > 1) << "port 1 asked for a one-word access";
        const uint32_t w = static_cast<uint32_t>(m.ub_addr_o >> (7 * q)) & 0x7F;  // 7-bit words
        ASSERT_LT(w * 32, uint32_t(kUbBytes));
        const int k = static_cast<int>(w - addr / 32);
        ASSERT_TRUE(k >= 0 && k < words && k % 2 == q) << "port " << q << " word " << w;
        ++words_done[k];
        if ((m.ub_we_o >> q) & 1) {
          for (int b = 0; b < 32; ++b) {
            const bool en = (get_elem<32>(m.ub_wmask_o, q) >> b) & 1;
            if (en) mem[w * 32 + b] = static_cast<uint8_t>(get_elem<8>(m.ub_wdata_o, 32 * q + b));
          }
        } else {
          for (int b = 0; b < 32; ++b) read_word[q][b] = mem[w * 32 + b];
          read_due[q] = true;
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
    for (int k = 0; k < words; ++k) ASSERT_EQ(words_done[k], 1) << "word " << k << " of " << words;
    if (grant_pct == 100) ASSERT_EQ(cycles, (words + 1) / 2) << bytes << "-byte access";
    if (we) {
      for (int b = 0; b < bytes; ++b) ref[addr + b] = data[b];
      ASSERT_EQ(mem, ref) << "write of " << bytes << " bytes at " << addr;
    }
  }
  EXPECT_GT(reads, count / 4);
}

TEST(UbPort, SubWordAccessesAtN4) { random_accesses<Vtpu_ub_port_n4, 4>(3000, 60); }
TEST(UbPort, OneAndTwoWordAccessesAtN16) { random_accesses<Vtpu_ub_port_n16, 16>(3000, 60); }
TEST(UbPort, UpToEightWordsTwoACycleAtN64) { random_accesses<Vtpu_ub_port_n64, 64>(2000, 60); }
TEST(UbPort, TwoWordsACycleWhenEveryRequestIsGranted) {
  random_accesses<Vtpu_ub_port_n16, 16>(500, 100);
  random_accesses<Vtpu_ub_port_n64, 64>(500, 100);
}

}  // namespace
}  // namespace tessera
