// The host port's register slice (tpu_reg_slice, 16 bits wide): random valid and ready on both
// sides against a C++ queue of the accepted words — every word comes out once, in order, and
// held while stalled; full throughput when never stalled (one word a cycle after one cycle of
// latency); and every output a register: changing the inputs between clock edges changes no
// output (no combinational path through the slice, the reason it sits at the host pins).
#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <random>

#include "Vtpu_reg_slice.h"
#include "harness/sim_ctrl.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

struct Outputs {
  bool in_ready, out_valid;
  uint16_t out_data;
  bool operator==(const Outputs& o) const {
    return in_ready == o.in_ready && out_valid == o.out_valid &&
           (!out_valid || out_data == o.out_data);
  }
};

Outputs outputs(const Vtpu_reg_slice& m) {
  return {m.in_ready_o != 0, m.out_valid_o != 0, static_cast<uint16_t>(m.out_data_o)};
}

TEST(RegSlice, RandomHandshakesKeepOrderWithNoLossOrDuplicate) {
  SimCtrl<Vtpu_reg_slice> sim(test::current_test_name());
  std::mt19937_64 rng(test::test_seed());
  auto& m = sim.top();
  m.in_valid_i = 0;
  m.in_data_i = 0;
  m.out_ready_i = 0;
  sim.reset();
  std::deque<uint16_t> expected;
  uint16_t next = 0;
  int received = 0;
  bool stalled = false;
  uint16_t stalled_word = 0;
  for (int cycle = 0; cycle < 20000; ++cycle) {
    // Phases of heavy and light traffic on both sides, so the skid entry fills and drains.
    const int in_pct = (cycle / 500) % 2 ? 90 : 40, out_pct = (cycle / 700) % 2 ? 90 : 30;
    const Outputs before = outputs(m);
    m.in_valid_i = rng() % 100 < static_cast<uint64_t>(in_pct);
    m.in_data_i = next;
    m.out_ready_i = rng() % 100 < static_cast<uint64_t>(out_pct);
    sim.eval();
    ASSERT_EQ(outputs(m), before) << "an output followed an input within the cycle " << cycle;
    if (stalled) {
      ASSERT_TRUE(m.out_valid_o) << "valid dropped while stalled, cycle " << cycle;
      ASSERT_EQ(m.out_data_o, stalled_word) << "data changed while stalled, cycle " << cycle;
    }
    if (m.out_valid_o) {
      ASSERT_FALSE(expected.empty()) << "a word nobody sent, cycle " << cycle;
      if (m.out_ready_i) {
        ASSERT_EQ(m.out_data_o, expected.front()) << "cycle " << cycle;
        expected.pop_front();
        ++received;
      }
    }
    stalled = m.out_valid_o && !m.out_ready_i;
    stalled_word = static_cast<uint16_t>(m.out_data_o);
    if (m.in_valid_i && m.in_ready_o) expected.push_back(next++);
    ASSERT_LE(expected.size(), 2u) << "more than two words held, cycle " << cycle;
    sim.tick();
  }
  EXPECT_GT(received, 5000);
}

TEST(RegSlice, OneWordACycleWhenNeverStalled) {
  SimCtrl<Vtpu_reg_slice> sim(test::current_test_name());
  auto& m = sim.top();
  m.in_valid_i = 0;
  m.in_data_i = 0;
  m.out_ready_i = 1;
  sim.reset();
  for (int cycle = 0; cycle < 100; ++cycle) {
    m.in_valid_i = 1;
    m.in_data_i = static_cast<uint16_t>(1000 + cycle);
    sim.eval();
    ASSERT_TRUE(m.in_ready_o) << "cycle " << cycle;
    if (cycle == 0) {
      EXPECT_FALSE(m.out_valid_o);
    } else {
      ASSERT_TRUE(m.out_valid_o) << "cycle " << cycle;
      ASSERT_EQ(m.out_data_o, 1000 + cycle - 1) << "one cycle of latency";
    }
    sim.tick();
  }
}

}  // namespace
}  // namespace tessera
