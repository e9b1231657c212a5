// The CSR block (tpu_csr) against docs/isa.md's register table: identity and configuration,
// PROG_ADDR (16-byte aligned), the doorbell (a start pulse only while no program runs; it
// clears the counters), STATUS and FAULT_* mirrored from the sequencer, IRQ_PENDING set by
// events and cleared by writing 1s with irq_o = pending & enable, and every performance
// counter against a C++ count of random activity over many cycles (64-bit, two reads).
#include <gtest/gtest.h>

#include <array>
#include <random>

#include "Vtpu_csr.h"
#include "harness/sim_ctrl.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kN = 4;  // the Vtpu_csr build: N 4, UbBytes 4096, AccRows 64, QDepth 4, 2 channels

class Csr : public ::testing::Test {
 protected:
  Csr() : sim_(test::current_test_name()), rng_(test::test_seed()) {
    auto& m = sim_.top();
    m.csr_valid_i = 0;
    m.csr_write_i = 0;
    m.csr_addr_i = 0;
    m.csr_wdata_i = 0;
    m.status_i = isa::STATUS_IDLE;
    m.fault_code_i = 0;
    m.fault_pc_i = 0;
    m.fault_addr_i = 0;
    m.fault_info_i = 0;
    m.done_i = 0;
    m.fault_event_i = 0;
    m.irq_user_i = 0;
    m.irq_code_i = 0;
    m.running_i = 0;
    m.unit_busy_i = 0;
    m.unit_stall_i = 0;
    m.mxu_row_i = 0;
    m.hbm_rd_bursts_i = 0;
    m.hbm_wr_bursts_i = 0;
    m.col_cmds_i = 0;
    m.acts_i = 0;
    m.instr_retired_i = 0;
    m.unit_state_i = 0;
    m.pc_i = 0;
    sim_.reset();
  }
  uint32_t read(uint32_t addr) {
    auto& m = sim_.top();
    m.csr_valid_i = 1;
    m.csr_write_i = 0;
    m.csr_addr_i = addr;
    sim_.eval();
    const uint32_t v = m.csr_rdata_o;
    sim_.tick();
    m.csr_valid_i = 0;
    return v;
  }
  // Returns whether start_o pulsed.
  bool write(uint32_t addr, uint32_t v) {
    auto& m = sim_.top();
    m.csr_valid_i = 1;
    m.csr_write_i = 1;
    m.csr_addr_i = addr;
    m.csr_wdata_i = v;
    sim_.eval();
    const bool start = m.start_o;
    sim_.tick();
    m.csr_valid_i = 0;
    m.csr_write_i = 0;
    return start;
  }
  uint64_t perf(int i) {
    const uint64_t lo = read(isa::CSR_PERF_BASE + 8 * i);
    const uint64_t hi = read(isa::CSR_PERF_BASE + 8 * i + 4);
    return lo | hi << 32;
  }
  SimCtrl<Vtpu_csr> sim_;
  std::mt19937_64 rng_;
};

TEST_F(Csr, IdentityConfigAndProgramAddress) {
  EXPECT_EQ(read(isa::CSR_ID), 0x7E550001u);
  EXPECT_EQ(read(isa::CSR_CONFIG0), 2u | 2u << 8 | 1u << 16);  // log2 N, log2 QDepth, log2 ch
  EXPECT_EQ(read(isa::CSR_CONFIG1), 4096u);
  EXPECT_EQ(read(isa::CSR_CONFIG2), 64u);
  write(isa::CSR_PROG_ADDR, 0x12345678);
  EXPECT_EQ(read(isa::CSR_PROG_ADDR), 0x12345678u) << "kept as written (the sequencer faults "
                                                      "on a misaligned start)";
  EXPECT_EQ(sim_.top().prog_addr_o, 0x12345678u);
  EXPECT_EQ(read(0xFFC), 0u) << "unmapped offsets read 0";
}

TEST_F(Csr, DoorbellStartsOnlyWhenNotRunning) {
  EXPECT_TRUE(write(isa::CSR_DOORBELL, 1));
  EXPECT_FALSE(write(isa::CSR_DOORBELL, 0)) << "writing 0 does nothing";
  sim_.top().status_i = isa::STATUS_RUNNING;
  EXPECT_FALSE(write(isa::CSR_DOORBELL, 1)) << "ignored while running";
  sim_.top().status_i = isa::STATUS_HALTED;
  EXPECT_TRUE(write(isa::CSR_DOORBELL, 1));
}

TEST_F(Csr, StatusAndFaultMirrorTheSequencer) {
  auto& m = sim_.top();
  m.status_i = isa::STATUS_FAULTED;
  m.fault_code_i = isa::FAULT_UB_RANGE;
  m.fault_pc_i = 0x1230;
  m.fault_addr_i = 0xBEEF;
  m.fault_info_i = 7;
  EXPECT_EQ(read(isa::CSR_STATUS), uint32_t(isa::STATUS_FAULTED));
  EXPECT_EQ(read(isa::CSR_FAULT_CODE), uint32_t(isa::FAULT_UB_RANGE));
  EXPECT_EQ(read(isa::CSR_FAULT_PC), 0x1230u);
  EXPECT_EQ(read(isa::CSR_FAULT_ADDR), 0xBEEFu);
  EXPECT_EQ(read(isa::CSR_FAULT_INFO), 7u);
  m.unit_state_i = 0xA53;
  EXPECT_EQ(read(isa::CSR_UNIT_STATE), 0xA53u);
  m.pc_i = 0x1230;
  EXPECT_EQ(read(isa::CSR_PC), 0x1230u);
}

TEST_F(Csr, InterruptsPendingEnableAndClear) {
  auto& m = sim_.top();
  m.done_i = 1;
  sim_.tick();
  m.done_i = 0;
  EXPECT_EQ(read(isa::CSR_IRQ_PENDING), 1u);
  sim_.eval();
  EXPECT_FALSE(m.irq_o) << "not enabled";
  write(isa::CSR_IRQ_ENABLE, 5);
  sim_.eval();
  EXPECT_TRUE(m.irq_o);
  m.irq_user_i = 1;
  m.irq_code_i = 42;
  sim_.tick();
  m.irq_user_i = 0;
  EXPECT_EQ(read(isa::CSR_IRQ_PENDING), 5u);
  EXPECT_EQ(read(isa::CSR_IRQ_CODE), 42u);
  write(isa::CSR_IRQ_PENDING, 1);  // clear done only
  EXPECT_EQ(read(isa::CSR_IRQ_PENDING), 4u);
  m.fault_event_i = 1;
  sim_.tick();
  m.fault_event_i = 0;
  EXPECT_EQ(read(isa::CSR_IRQ_PENDING), 6u);
  write(isa::CSR_IRQ_PENDING, 6);
  EXPECT_EQ(read(isa::CSR_IRQ_PENDING), 0u);
  sim_.eval();
  EXPECT_FALSE(m.irq_o);
}

TEST_F(Csr, PerformanceCountersCountActivityAndClearOnDoorbell) {
  auto& m = sim_.top();
  std::array<uint64_t, 13> want{};
  for (int round = 0; round < 2; ++round) {
    EXPECT_TRUE(write(isa::CSR_DOORBELL, 1));
    want.fill(0);
    for (int c = 0; c < 50000; ++c) {
      const bool run = rng_() % 10 != 0;
      m.running_i = run;
      m.unit_busy_i = rng_() % 8;
      m.unit_stall_i = rng_() % 8;
      m.mxu_row_i = rng_() % 2;
      m.hbm_rd_bursts_i = rng_() % 5;
      m.hbm_wr_bursts_i = rng_() % 3;
      m.col_cmds_i = rng_() % 4;
      m.acts_i = rng_() % 2;
      m.instr_retired_i = rng_() % 2;
      if (run) {
        ++want[0];
        for (int u = 0; u < 3; ++u) {
          want[1 + u] += m.unit_busy_i >> u & 1;
          want[4 + u] += m.unit_stall_i >> u & 1;
        }
      }
      want[7] += m.mxu_row_i ? kN * kN : 0;
      want[8] += 32u * m.hbm_rd_bursts_i;
      want[9] += 32u * m.hbm_wr_bursts_i;
      want[10] += m.col_cmds_i;
      want[11] += m.acts_i;
      want[12] += m.instr_retired_i;
      sim_.tick();
    }
    m.running_i = 0;
    m.unit_busy_i = m.unit_stall_i = 0;
    m.mxu_row_i = m.instr_retired_i = 0;
    m.hbm_rd_bursts_i = m.hbm_wr_bursts_i = m.col_cmds_i = m.acts_i = 0;
    want[10] = want[10] > want[11] ? want[10] - want[11] : 0;  // hits = column cmds - ACTs
    for (int i = 0; i < 13; ++i) EXPECT_EQ(perf(i), want[i]) << "counter " << i;
  }
  // A count above 2^32 carries into the high word.
  m.running_i = 1;
  m.hbm_rd_bursts_i = 255;
  for (int c = 0; c < 600000; ++c) sim_.tick();
  m.running_i = 0;
  m.hbm_rd_bursts_i = 0;
  EXPECT_EQ(perf(8), want[8] + 600000ull * 255 * 32);
}

}  // namespace
}  // namespace tessera
