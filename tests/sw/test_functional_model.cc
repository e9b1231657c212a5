// The functional model (sw/functional): one directed test per instruction and per fault, the
// MXU against float64 and sw/numerics/mxu_ref, DMA.COPY's im2col against a direct formula, every
// VPU funct against the host's float arithmetic on special and random values, the reduction
// tree's order, and a small end-to-end program. No Verilator models.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "sw/functional/mxu_tile.h"
#include "sw/numerics/dma_ref.h"
#include "sw/numerics/fp_ref.h"
#include "sw/numerics/mxu_ref.h"
#include "tessera/asm.h"
#include "tessera/functional_model.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using functional::ChipConfig;
using functional::FunctionalModel;
using functional::RunResult;
using functional::RunStatus;
using functional::UndefinedRead;

constexpr uint64_t kProg = 0x100000;  // programs live at 1 MiB in HBM

std::vector<uint32_t> assemble(const std::string& text, uint32_t n = 16) {
  const auto r = assembler::assemble(text, {n});
  if (!r.ok()) {
    ADD_FAILURE() << assembler::format_error("test.s", r.errors[0]);
    return {};
  }
  return r.words();
}

RunResult run(FunctionalModel& m, const std::string& text, uint64_t at = kProg) {
  m.load_program(at, assemble(text, static_cast<uint32_t>(m.config().n)));
  return m.run(at);
}

RunResult run_words(FunctionalModel& m, const std::vector<uint32_t>& words) {
  m.load_program(kProg, words);
  return m.run(kProg);
}

void expect_fault(const RunResult& r, uint32_t code, uint64_t pc, uint64_t addr, uint32_t info) {
  EXPECT_EQ(r.status, RunStatus::kFaulted) << r.describe();
  EXPECT_EQ(r.fault_code, code) << r.describe();
  EXPECT_EQ(r.fault_pc, pc) << r.describe();
  EXPECT_EQ(r.fault_addr, addr) << r.describe();
  EXPECT_EQ(r.fault_info, info) << r.describe();
}

void write_f32(FunctionalModel& m, uint64_t addr, const std::vector<uint32_t>& v) {
  for (size_t k = 0; k < v.size(); ++k) m.hbm().write32(addr + 4 * k, v[k]);
}

void write_bf16(FunctionalModel& m, uint64_t addr, const std::vector<uint16_t>& v) {
  for (size_t k = 0; k < v.size(); ++k) {
    m.hbm().write8(addr + 2 * k, static_cast<uint8_t>(v[k]));
    m.hbm().write8(addr + 2 * k + 1, static_cast<uint8_t>(v[k] >> 8));
  }
}

uint16_t read_bf16(const FunctionalModel& m, uint64_t addr) {
  return static_cast<uint16_t>(m.hbm().read8(addr) | m.hbm().read8(addr + 1) << 8);
}

uint16_t bf16_of(float f) { return fp::fp32_to_bf16(fp::bits(f)); }

// ---------------------------------------------------------------------------------------------
// Control, CSRs, contract 4

TEST(FunctionalModel, ControlInstructionsAndCsrs) {
  FunctionalModel m;
  EXPECT_EQ(m.csr_read(isa::CSR_STATUS), isa::STATUS_IDLE);
  EXPECT_EQ(m.csr_read(isa::CSR_ID), 0x7E550001u);
  EXPECT_EQ(m.csr_read(isa::CSR_CONFIG0), 4u | 5u << 8 | 0u << 16);  // N 16, QDEPTH 32
  EXPECT_EQ(m.csr_read(isa::CSR_CONFIG1), 256u * 1024);
  EXPECT_EQ(m.csr_read(isa::CSR_CONFIG2), 1024u);
  const RunResult r = run(m, "nop\nfence\nirq 9\nhalt\nirq 5\n");
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_EQ(r.instructions, 4u);
  EXPECT_EQ(m.csr_read(isa::CSR_STATUS), isa::STATUS_HALTED);
  EXPECT_EQ(m.csr_read(isa::CSR_PROG_ADDR), kProg);
  EXPECT_EQ(m.csr_read(isa::CSR_IRQ_PENDING), 1u | 4u);  // done, user
  EXPECT_EQ(m.csr_read(isa::CSR_IRQ_CODE), 9u);          // nothing after HALT runs
  EXPECT_EQ(m.csr_read(isa::CSR_FAULT_CODE), isa::FAULT_NONE);
  EXPECT_EQ(m.csr_read(isa::CSR_PERF_BASE + 8 * isa::PERF_INSTRS), 4u);
  EXPECT_EQ(m.csr_read(isa::CSR_PERF_BASE + 8 * isa::PERF_CYCLES), 0u);
  m.csr_write(isa::CSR_IRQ_PENDING, 4u);
  EXPECT_EQ(m.csr_read(isa::CSR_IRQ_PENDING), 1u);
  m.csr_write(isa::CSR_IRQ_ENABLE, 0xFFu);
  EXPECT_EQ(m.csr_read(isa::CSR_IRQ_ENABLE), 7u);

  ChipConfig big;
  big.n = 32;
  big.hbm_bytes = 1ull << 30;  // 4 pseudo-channels
  big.ub_bytes = 512 * 1024;
  big.acc_rows = 2048;
  FunctionalModel m2(big);
  EXPECT_EQ(m2.csr_read(isa::CSR_CONFIG0), 5u | 5u << 8 | 2u << 16);
  EXPECT_EQ(m2.csr_read(isa::CSR_CONFIG1), 512u * 1024);
  EXPECT_EQ(m2.csr_read(isa::CSR_CONFIG2), 2048u);
  EXPECT_THROW(FunctionalModel(ChipConfig{12}), std::invalid_argument);
}

TEST(FunctionalModel, NothingButHbmCarriesOverBetweenPrograms) {
  FunctionalModel m;
  RunResult r = run(m,
                    "vpu.li v1, 0x3f800000\nsignal dma, sc4\n"
                    "dma.loop src, 0, 4, 2, 1, 0\nmxu.ldw 0x0, 32\nhalt\n");
  // mxu.ldw above reads undefined UB: recorded, not a fault.
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
  ASSERT_EQ(r.undefined_reads.size(), 1u);
  EXPECT_EQ(m.loaded_tiles(), 1u);
  EXPECT_EQ(m.sync_counter(4), 1u);
  EXPECT_EQ(m.vreg(1)[0], 0x3f800000u);
  // The next program starts with registers, counters, loops and tiles reset.
  r = run(m, "wait vpu, sc4, 1\nhalt\n", kProg + 0x1000);
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg + 0x1000, 0, 4);
  r = run(m, "mxu.mm set, 0x0, 32, 1, 0\nhalt\n", kProg + 0x2000);
  expect_fault(r, isa::FAULT_MXU_NO_WEIGHTS, kProg + 0x2000, 0, 0);
  r = run(m, "halt\n");
  EXPECT_EQ(m.vreg(1)[0], 0u);
  EXPECT_EQ(m.sync_counter(4), 0u);
  EXPECT_EQ(m.loaded_tiles(), 0u);
}

TEST(FunctionalModel, WatchdogIsNotAChipFault) {
  FunctionalModel m;
  m.load_program(kProg, assemble("nop\nnop\nnop\nnop\nhalt\n"));
  RunResult r = m.run(kProg, 3);
  EXPECT_EQ(r.status, RunStatus::kWatchdog);
  EXPECT_EQ(r.instructions, 3u);
  EXPECT_EQ(r.fault_code, isa::FAULT_NONE);
  EXPECT_EQ(m.csr_read(isa::CSR_STATUS), isa::STATUS_RUNNING);
  r = m.run(kProg, 5);
  EXPECT_EQ(r.status, RunStatus::kHalted);
}

TEST(FunctionalModel, TraceHookSeesEveryInstructionInOrder) {
  FunctionalModel m;
  std::vector<std::pair<uint64_t, isa::Opcode>> seen;
  m.set_trace_hook([&](uint64_t pc, const isa::Instruction& i) { seen.push_back({pc, i.op}); });
  write_f32(m, 0x0, std::vector<uint32_t>(16, 0x40000000u));
  run(m,
      "dma.loop src, 0, 16, 4, 1, 0\ndma.loop dst, 0, 16, 4, 1, 0\n"
      "dma.copy hbm, ub, 4, 0x0, 0x40\nsignal dma, sc0\nwait vpu, sc0, 1\n"
      "vpu.ld f32, v1, 0x40\nvpu.st f32, v1, 0x80\nhalt\n");
  ASSERT_EQ(seen.size(), 8u);
  for (size_t k = 0; k < seen.size(); ++k) EXPECT_EQ(seen[k].first, kProg + 16 * k);
  // The last instruction that wrote UB 0x80: found by the differential tester's way.
  uint64_t last_writer = 0;
  m.set_trace_hook([&](uint64_t pc, const isa::Instruction& i) {
    if (i.op == isa::Opcode::kVpuSt && i.addr <= 0x80 && 0x80 < i.addr + 64) last_writer = pc;
  });
  m.run(kProg);
  EXPECT_EQ(last_writer, kProg + 16 * 6);
}

// ---------------------------------------------------------------------------------------------
// Faults

TEST(FunctionalModel, IllegalInstructionsFault) {
  FunctionalModel m;
  // unknown opcode, ICI (reserved), reserved bit, field out of range, unused operand
  const std::vector<std::array<uint32_t, 4>> bad = {
      {0x05, 0, 0, 0},
      {isa::OP_ICI_SEND, 0, 0, 0},
      {isa::OP_ICI_RECV, 0, 0, 0},
      {isa::OP_HALT | 0x100, 0, 0, 0},
      {isa::OP_SIGNAL | 0x300, 0, 0, 0},
      {isa::OP_VPU_OP | 4u << 8 | 1u << 24, 0, 0, 0},      // sqrt with vb
      {isa::OP_VPU_OP | 23u << 8 | 1u << 16, 16, 0, 0},    // bcast lane 16 at N = 16
      {isa::OP_VPU_OP | 27u << 8 | 1u << 16, 1024, 0, 0},  // bfx imm bit 10
      {isa::OP_VPU_OP | 28u << 8 | 1u << 16, 32, 0, 0},    // shlor shift 32
      {isa::OP_VPU_OP | 33u << 8 | 1u << 16, 0, 0, 0},     // funct 33
      {isa::OP_VPU_OP | 32u << 8 | 1u << 16, 16, 0, 0},    // argmax4 imm 16
      {isa::OP_VPU_OP | 29u << 8 | 1u << 16, 65536, 0, 0}, // seleqh imm bit 16
      {isa::OP_VPU_OP | 30u << 8 | 1u << 16, 1, 0, 0},     // addmax with an imm
      {isa::OP_DMA_LOOP, 0, 1, 0},                         // count 0
  };
  for (const auto& w : bad) {
    std::vector<uint32_t> words = {isa::OP_NOP,  0, 0, 0, w[0], w[1], w[2], w[3],
                                   isa::OP_HALT, 0, 0, 0};
    const RunResult r = run_words(m, words);
    expect_fault(r, isa::FAULT_ILLEGAL_INSTRUCTION, kProg + 16, 0, w[0]);
    EXPECT_EQ(r.instructions, 1u);
    EXPECT_EQ(m.csr_read(isa::CSR_STATUS), isa::STATUS_FAULTED);
    EXPECT_EQ(m.csr_read(isa::CSR_FAULT_CODE), isa::FAULT_ILLEGAL_INSTRUCTION);
    EXPECT_EQ(m.csr_read(isa::CSR_FAULT_PC), kProg + 16);
    EXPECT_EQ(m.csr_read(isa::CSR_FAULT_INFO), w[0]);
    EXPECT_EQ(m.csr_read(isa::CSR_IRQ_PENDING) & 2u, 2u);
  }
  // The bcast lane limit is the configuration's N.
  ChipConfig c;
  c.n = 32;
  FunctionalModel m32(c);
  const RunResult r =
      run_words(m32, {isa::OP_VPU_OP | 23u << 8 | 1u << 16, 16, 0, 0, isa::OP_HALT, 0, 0, 0});
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
}

TEST(FunctionalModel, FetchBeyondHbmFaults) {
  ChipConfig c;
  c.hbm_bytes = 1 << 20;
  FunctionalModel m(c);
  m.load_program(c.hbm_bytes - 32, assemble("nop\nnop\n"));
  RunResult r = m.run(c.hbm_bytes - 32);
  expect_fault(r, isa::FAULT_FETCH_RANGE, c.hbm_bytes, 0, 0);
  EXPECT_EQ(r.instructions, 2u);
  r = m.run(c.hbm_bytes + 0x1000);
  expect_fault(r, isa::FAULT_FETCH_RANGE, c.hbm_bytes + 0x1000, 0, 0);
  r = m.run(8);  // not a multiple of 16
  expect_fault(r, isa::FAULT_FETCH_RANGE, 8, 0, 0);
}

TEST(FunctionalModel, UbRangeFaults) {
  FunctionalModel m;  // N = 16: fp32 rows 64 bytes, bf16 rows 32 bytes, UB 256 KiB
  struct Case {
    std::string line;
    uint64_t addr;
  };
  const std::vector<Case> cases = {
      {"vpu.ld f32, v1, 0x20", 0x20},         // misaligned (needs 64)
      {"vpu.st f32, v1, 0x40000", 0x40000},   // beyond
      {"vpu.ld bf16, v1, 0x10", 0x10},        // misaligned (needs 32)
      {"vpu.st bf16, v1, 0x3ffe0", 0x3ffe0},  // last row: fine? no: see below
      {"mxu.ldw 0x3fe20, 32", 0x3fe20},       // row 15 leaves the UB: FAULT_ADDR = addr
      {"mxu.ldw 0x8, 32", 0x8},               // misaligned
      {"mxu.ldw 0x200, -32", 0},              // rows go down: all inside
      {"mxu.ldw 0x40, -32", 0x40},            // row 3 at -32: FAULT_ADDR = the instruction's addr
      {"mxu.ldw 0x0, 48", 0},                 // row 1 misaligned
  };
  for (const auto& c : cases) {
    const RunResult r = run(m, "nop\n" + c.line + "\nhalt\n");
    if (c.line == "vpu.st bf16, v1, 0x3ffe0" || c.line == "mxu.ldw 0x200, -32") {
      EXPECT_EQ(r.status, RunStatus::kHalted) << c.line << ": " << r.describe();
      continue;
    }
    expect_fault(r, isa::FAULT_UB_RANGE, kProg + 16, c.addr, 0);
  }
  // MXU.MM: UB rows checked first, nothing executes (no tile is consumed).
  RunResult r = run(m,
                    "vpu.st bf16, v0, 0x0\nvpu.st bf16, v0, 0x20\nmxu.ldw 0x0, 0\n"
                    "mxu.mm set, 0x0, 0x20, 9000, 0\nhalt\n");
  expect_fault(r, isa::FAULT_UB_RANGE, kProg + 48, 0x0, 0);
  EXPECT_EQ(m.loaded_tiles(), 1u);
  EXPECT_EQ(m.csr_read(isa::CSR_FAULT_ADDR), 0x0u);
}

TEST(FunctionalModel, AccRangeFaults) {
  FunctionalModel m;
  RunResult r = run(m, "vpu.ld acc, v1, 1024\nhalt\n");
  expect_fault(r, isa::FAULT_ACC_RANGE, kProg, 1024, 0);
  r = run(m, "nop\nvpu.st acc, v1, 70000\nhalt\n");
  expect_fault(r, isa::FAULT_ACC_RANGE, kProg + 16, 70000, 0);
  r = run(m, "vpu.st acc, v1, 1023\nhalt\n");
  EXPECT_EQ(r.status, RunStatus::kHalted);
  // MXU.MM rows 1020..1027: the first row out is 1024; checked before the tile is looked at.
  r = run(m, "mxu.mm acc, 0x0, 32, 8, 1020\nhalt\n");
  expect_fault(r, isa::FAULT_ACC_RANGE, kProg, 1024, 0);
  r = run(m, "mxu.mm set, 0x0, 32, 1, 2000\nhalt\n");
  expect_fault(r, isa::FAULT_ACC_RANGE, kProg, 2000, 0);
}

TEST(FunctionalModel, MxuWithoutWeightsFaults) {
  FunctionalModel m;
  RunResult r = run(m, "mxu.mm set, 0x0, 32, 1, 0\nhalt\n");
  expect_fault(r, isa::FAULT_MXU_NO_WEIGHTS, kProg, 0, 0);
  r = run(m,
          "vpu.st bf16, v0, 0x0\nmxu.ldw 0x0, 0\nmxu.mm set, 0x0, 32, 1, 0\n"
          "mxu.mm acc, 0x0, 32, 1, 0\nhalt\n");
  expect_fault(r, isa::FAULT_MXU_NO_WEIGHTS, kProg + 48, 0, 0);
  EXPECT_EQ(r.macs, 256u);
}

TEST(FunctionalModel, SyncDeadlockByTheWaitRule) {
  FunctionalModel m;
  RunResult r = run(m, "wait dma, sc3, 1\nhalt\n");
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg, 0, 3);
  // A signal to another counter does not help; one signal does not meet a wait for two.
  r = run(m, "signal dma, sc2\nwait mxu, sc3, 1\nhalt\n");
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg + 16, 0, 3);
  r = run(m, "signal vpu, sc7\nwait mxu, sc7, 1\nwait dma, sc7, 2\nhalt\n");
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg + 32, 0, 7);
  // A signal after the wait in program order cannot satisfy it (it would deadlock the chip).
  r = run(m, "wait vpu, sc1, 1\nsignal dma, sc1\nhalt\n");
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg, 0, 1);
  // Satisfied waits, on any unit; a wait for 0 always passes.
  r = run(m,
          "wait dma, sc0, 0\nsignal mxu, sc5\nsignal mxu, sc5\nwait vpu, sc5, 2\n"
          "wait dma, sc5, 1\nhalt\n");
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_EQ(m.sync_counter(5), 2u);
  // One signalling unit per counter: a second unit's SIGNAL faults (docs/isa.md, Sync).
  r = run(m, "signal dma, sc5\nsignal mxu, sc5\nhalt\n");
  expect_fault(r, isa::FAULT_SYNC_DEADLOCK, kProg + 16, 0, 5);
}

TEST(FunctionalModel, DmaFaultsWithCodeAndAddress) {
  ChipConfig c;
  c.hbm_bytes = 1 << 24;  // 16 MiB
  struct Case {
    std::string prog;
    uint32_t info;
    uint64_t addr;
    int moved_elems;  // UB elements written (bf16 from UB 0x0), -1: not checked
  };
  const std::string loops16 = "dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n";
  const std::vector<Case> cases = {
      {loops16 + "dma.copy hbm, ub, 3, 0x1000, 0x0\n", 4, 0, 0},  // element size
      {loops16 + "dma.copy hbm, ub, 8, 0x1000, 0x0\n", 4, 0, 0},
      {"dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 8, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0x1000, 0x0\n",
       3, 0, 0},                                                       // count mismatch
      {loops16 + "dma.copy hbm, ub, 2, 0x1001, 0x0\n", 5, 0x1001, 0},  // source base
      {"dma.loop src, 0, 4, 2, 4, 9\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0x1000, 0x0\n",
       5, 0x1009, 0},  // source stride of loop 1
      {"dma.loop src, 0, 1, 3, 16, 2\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0x1000, 0x0\n",
       0, 0, 16},  // count-1 loop's stride ignored
      {loops16 + "dma.copy hbm, ub, 2, 0x1001, 0x3\n", 5, 0x1001, 0},  // source walk first
      {"dma.loop src, 0, 16, 4, 1, 0\ndma.loop dst, 0, 16, 4, 1, 0\n"
       "dma.copy hbm, ub, 4, 0x1000, 0x2\n",
       5, 0x2, 0},  // destination base
      {"dma.loop src, 0, 16, 4, 1, 0\ndma.loop dst, 0, 8, 4, 2, 34\n"
       "dma.copy hbm, ub, 4, 0x1000, 0x0\n",
       5, 34, 0},  // destination stride
      {"dma.loop src, 0, 16, 2, 1, 0\ndma.loop src, 1, 1, 0, 1, 0\n"
       "dma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0xfffff8, 0x0\n",
       1, 0x1000000, 4},  // source range at element 4
      {"dma.loop src, 0, 16, -2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0x6, 0x0\n",
       1, static_cast<uint64_t>(int64_t{-2}), 4},  // below 0
      {"dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0x1000, 0x3fff6\n",
       2, 0x40000, 5},  // destination range
      {"dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0xfffffa, 0x3fffa\n",
       1, 0x1000000, 3},  // tie: the source's
      {"dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
       "dma.copy hbm, ub, 2, 0xfffff8, 0x3fffa\n",
       2, 0x40000, 3},  // destination first
  };
  for (const auto& cs : cases) {
    // A fresh model per case: the UB starts as zeros, so moved elements are visible.
    FunctionalModel fresh(c);
    for (int k = 0; k < 64; ++k) fresh.hbm().write8(0x1000 + k, static_cast<uint8_t>(k + 1));
    for (int k = 0; k < 8; ++k) fresh.hbm().write8(0xfffff8 + k, static_cast<uint8_t>(0xA0 + k));
    std::vector<uint8_t> before = fresh.ub();
    const RunResult r = run(fresh, cs.prog + "halt\n");
    const int lines = static_cast<int>(std::count(cs.prog.begin(), cs.prog.end(), '\n'));
    if (cs.info == 0) {
      EXPECT_EQ(r.status, RunStatus::kHalted) << cs.prog << r.describe();
    } else {
      expect_fault(r, isa::FAULT_DMA, kProg + 16 * (lines - 1), cs.addr, cs.info);
      EXPECT_EQ(fresh.csr_read(isa::CSR_FAULT_INFO), cs.info);
      EXPECT_EQ(fresh.csr_read(isa::CSR_FAULT_ADDR), static_cast<uint32_t>(cs.addr));
    }
    if (cs.moved_elems >= 0 && cs.prog.find("0x1000, 0x0") != std::string::npos) {
      int changed = 0;
      for (size_t k = 0; k < 64; ++k) changed += fresh.ub()[k] != before[k];
      EXPECT_EQ(changed, 2 * cs.moved_elems) << cs.prog;
    }
    if (cs.prog.find("0xfffff8, 0x0") != std::string::npos) {
      // Source range fault at element 4: UB 0x0..0x7 hold HBM 0xfffff8..0xffffff, nothing after.
      for (int k = 0; k < 8; ++k) EXPECT_EQ(fresh.ub()[k], 0xA0 + k) << k;
      for (int k = 8; k < 32; ++k) EXPECT_EQ(fresh.ub()[k], 0) << k;
    }
  }
  // Elements before a range fault are moved, later ones are not (destination at UB end).
  FunctionalModel f(c);
  for (int k = 0; k < 64; ++k) f.hbm().write8(0x1000 + k, static_cast<uint8_t>(k + 1));
  const RunResult r = run(f,
                          "dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
                          "dma.copy hbm, ub, 2, 0x1000, 0x3fff6\nhalt\n");
  expect_fault(r, isa::FAULT_DMA, kProg + 32, 0x40000, 2);
  for (int k = 0; k < 10; ++k) EXPECT_EQ(f.ub()[0x3fff6 + k], k + 1) << k;
}

TEST(FunctionalModel, DivideByZeroGivesIeeeResultsWithoutAFault) {
  FunctionalModel m;
  const RunResult r = run(m,
                          "vpu.li v1, 0x3f800000\nvpu.li v2, 0xbf800000\nvpu.li v3, 0x0\n"
                          "vpu.li v4, 0x80000000\n"
                          "vpu.op div, v5, v1, v3, v0\nvpu.op div, v6, v2, v3, v0\n"
                          "vpu.op div, v7, v3, v3, v0\nvpu.op div, v8, v1, v4, v0\n"
                          "vpu.op sqrt, v9, v2, v0, v0\nvpu.op sqrt, v10, v4, v0, v0\nhalt\n");
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_EQ(m.vreg(5)[0], 0x7F800000u);             // 1 / +0 = +inf
  EXPECT_EQ(m.vreg(6)[3], 0xFF800000u);             // -1 / +0 = -inf
  EXPECT_EQ(m.vreg(7)[15], fp::kFp32CanonicalNan);  // 0 / 0
  EXPECT_EQ(m.vreg(8)[0], 0xFF800000u);             // 1 / -0 = -inf
  EXPECT_EQ(m.vreg(9)[0], fp::kFp32CanonicalNan);   // sqrt(-1)
  EXPECT_EQ(m.vreg(10)[0], 0x80000000u);            // sqrt(-0) = -0
}

// ---------------------------------------------------------------------------------------------
// DMA

TEST(FunctionalModel, DmaIm2col3x3Of28x28MatchesDirectFormula) {
  for (const unsigned eb : {2u, 4u}) {
    FunctionalModel m;
    const uint64_t img = 0x20000;
    std::mt19937_64 g(test::test_seed());
    std::vector<uint8_t> pix(28 * 28 * eb);
    for (auto& b : pix) b = static_cast<uint8_t>(g());
    m.hbm().write(img, pix.data(), pix.size());
    const int row = 28 * eb;
    const std::string e = std::to_string(eb);
    const std::string prog =
        "dma.loop src, 0, 3, " + e + ", 3, " + std::to_string(row) + "\n" +    // kx, ky
        "dma.loop src, 1, 26, " + e + ", 26, " + std::to_string(row) + "\n" +  // ox, oy
        "dma.loop dst, 0, 6084, " + e + ", 1, 0\n" +                           // contiguous
        "dma.copy hbm, ub, " + e + ", 0x20000, 0x100\nhalt\n";
    const RunResult r = run(m, prog);
    ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
    // Cross-check against the harness's descriptor for the same pattern.
    const dma::Walk ref =
        dma::reference_walk(dma::im2col_3x3(img, 28, 28, eb, chip_params::HBM_PC_BYTES));
    ASSERT_EQ(ref.addrs.size(), 6084u);
    for (int oy = 0; oy < 26; ++oy) {
      for (int ox = 0; ox < 26; ++ox) {
        for (int ky = 0; ky < 3; ++ky) {
          for (int kx = 0; kx < 3; ++kx) {
            const size_t idx = ((static_cast<size_t>(oy) * 26 + ox) * 3 + ky) * 3 + kx;
            const size_t src = (static_cast<size_t>(oy + ky) * 28 + (ox + kx)) * eb;
            ASSERT_EQ(ref.addrs[idx], img + src);
            for (unsigned b = 0; b < eb; ++b) {
              ASSERT_EQ(m.ub()[0x100 + idx * eb + b], pix[src + b])
                  << "e " << eb << " oy " << oy << " ox " << ox << " ky " << ky << " kx " << kx;
            }
          }
        }
      }
    }
  }
}

TEST(FunctionalModel, DmaLoopRegistersPersistAcrossCopiesAndAllDirectionsWork) {
  FunctionalModel m;
  std::vector<uint32_t> v(32);
  for (int k = 0; k < 32; ++k) v[k] = 0x1000u + k;
  write_f32(m, 0x4000, v);
  // Transpose a 4 x 8 fp32 matrix HBM -> UB, then UB -> UB, UB -> HBM, HBM -> HBM with the same
  // contiguous loops (loop registers keep their values).
  const RunResult r = run(m,
                          "dma.loop src, 0, 4, 32, 8, 4\n"  // column-major walk
                          "dma.loop dst, 0, 32, 4, 1, 0\n"
                          "dma.copy hbm, ub, 4, 0x4000, 0x0\n"
                          "dma.loop src, 0, 32, 4, 1, 0\n"
                          "dma.copy ub, ub, 4, 0x0, 0x200\n"
                          "dma.copy ub, hbm, 4, 0x200, 0x8000\n"
                          "dma.copy hbm, hbm, 4, 0x8000, 0x9000\n"
                          "halt\n");
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_TRUE(r.undefined_reads.empty());
  for (int c = 0; c < 8; ++c) {
    for (int rr = 0; rr < 4; ++rr) {
      EXPECT_EQ(m.hbm().read32(0x9000 + 4 * (c * 4 + rr)), 0x1000u + rr * 8 + c);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// MXU

// Loads A (rows x N bf16) at UB 0x0 and W (N x N) at UB 0x8000 through HBM, then runs `mm`.
RunResult mxu_program(FunctionalModel& m, const std::vector<uint16_t>& a,
                      const std::vector<uint16_t>& w, int rows, const std::string& mm) {
  const int n = m.config().n;
  write_bf16(m, 0x10000, a);
  write_bf16(m, 0x20000, w);
  const std::string prog =
      "dma.loop src, 0, " + std::to_string(rows * n) + ", 2, 1, 0\n" + "dma.loop dst, 0, " +
      std::to_string(rows * n) + ", 2, 1, 0\n" + "dma.copy hbm, ub, 2, 0x10000, 0x0\n" +
      "dma.loop src, 0, " + std::to_string(n * n) + ", 2, 1, 0\n" + "dma.loop dst, 0, " +
      std::to_string(n * n) + ", 2, 1, 0\n" + "dma.copy hbm, ub, 2, 0x20000, 0x8000\n" +
      "signal dma, sc0\nwait mxu, sc0, 1\n" + "mxu.ldw 0x8000, " + std::to_string(2 * n) + "\n" +
      mm + "halt\n";
  return run(m, prog);
}

TEST(FunctionalModel, SecondTileBeforeItsMatmulFaults) {
  FunctionalModel m;
  std::vector<uint16_t> a(16 * 16, 0x3F80), w(16 * 16, 0x3F80);
  const RunResult r = mxu_program(m, a, w, 16, "mxu.ldw 0x8000, 32\nmxu.mm set, 0x0, 32, 16, 0\n");
  EXPECT_EQ(r.status, RunStatus::kFaulted);
  EXPECT_EQ(r.fault_code, uint32_t(isa::FAULT_MXU_TILES));
}

TEST(FunctionalModel, MxuMatmulMatchesFloat64OnExactInputs) {
  FunctionalModel m;
  const int n = 16, rows = 5;
  std::mt19937_64 g(test::test_seed());
  std::vector<uint16_t> a(rows * n), w(n * n);
  std::vector<double> ad(a.size()), wd(w.size());
  // Small integers times powers of two: every product and partial sum is exact in fp32.
  for (size_t k = 0; k < a.size(); ++k) {
    ad[k] = static_cast<double>(static_cast<int>(g() % 15) - 7) * std::ldexp(1.0, -(int)(g() % 3));
    a[k] = bf16_of(static_cast<float>(ad[k]));
  }
  for (size_t k = 0; k < w.size(); ++k) {
    wd[k] = static_cast<double>(static_cast<int>(g() % 9) - 4);
    w[k] = bf16_of(static_cast<float>(wd[k]));
  }
  const RunResult r = mxu_program(m, a, w, rows, "mxu.mm set, 0x0, 32, 5, 100\n");
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_EQ(r.macs, static_cast<uint64_t>(rows) * n * n);
  EXPECT_EQ(m.csr_read(isa::CSR_PERF_BASE + 8 * isa::PERF_MACS), 5u * 256);
  for (int t = 0; t < rows; ++t) {
    for (int c = 0; c < n; ++c) {
      double s = 0;
      for (int k = 0; k < n; ++k) s += ad[t * n + k] * wd[k * n + c];
      EXPECT_EQ(m.acc(100 + t, c), fp::bits(static_cast<float>(s))) << "row " << t << " col " << c;
    }
  }
}

// Random bf16 activations (rows x n) and two weight tiles, with the oracle's products; the
// second tile is written to HBM 0x30000 (the programs below load it after the first MM).
struct MmOperands {
  std::vector<uint16_t> a, w, w2;
  std::vector<uint32_t> ref, ref2;  // a x w, a x w2
};
MmOperands mm_operands(FunctionalModel& m, int n, int rows, uint64_t seed) {
  test::Bf16Gen gen(seed);
  MmOperands o{std::vector<uint16_t>(rows * n),
               std::vector<uint16_t>(n * n),
               std::vector<uint16_t>(n * n),
               {},
               {}};
  for (auto* v : {&o.a, &o.w, &o.w2})
    for (auto& x : *v) x = gen();
  o.ref = mxu::reference_matmul(n, rows, n, n, o.a, o.w);
  o.ref2 = mxu::reference_matmul(n, rows, n, n, o.a, o.w2);
  write_bf16(m, 0x30000, o.w2);
  return o;
}

TEST(FunctionalModel, MxuMatmulMatchesMxuRefOnRandomBf16AndAccumulates) {
  for (const int n : {4, 16}) {
    ChipConfig c;
    c.n = n;
    FunctionalModel m(c);
    const int rows = 37;
    const MmOperands o = mm_operands(m, n, rows, test::test_seed() + n);
    const std::vector<uint16_t>&a = o.a, &w = o.w;
    const std::vector<uint32_t>&ref = o.ref, &ref2 = o.ref2;
    // The first MM uses w; the second tile (w2) is loaded after it (one tile may wait for its
    // MM: docs/isa.md, MXU_TILES) and the second MM accumulates with it.
    const std::string ld2 =
        "dma.copy hbm, ub, 2, 0x30000, 0x9000\nsignal dma, sc1\nwait mxu, sc1, 1\nmxu.ldw "
        "0x9000, " +
        std::to_string(2 * n) + "\n";
    const std::string mm = "mxu.mm set, 0x0, " + std::to_string(2 * n) + ", 37, 3\n" + ld2 +
                           "mxu.mm acc, 0x0, " + std::to_string(2 * n) + ", 37, 3\n";
    const RunResult r = mxu_program(m, a, w, rows, mm);
    ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
    EXPECT_EQ(r.macs, 2ull * rows * n * n);
    EXPECT_TRUE(r.undefined_reads.empty());
    for (int t = 0; t < rows; ++t) {
      for (int col = 0; col < n; ++col) {
        const size_t k = static_cast<size_t>(t) * n + col;
        const uint32_t want = fp::add(ref[k], ref2[k]);
        ASSERT_EQ(m.acc(3 + t, col), want) << "n " << n << " row " << t << " col " << col;
      }
    }
  }
}

// MXU.MM's acc_stride: output row t goes to ACC row acc_row + t acc_stride, the rows between
// untouched; accumulating onto strided rows adds to exactly those (the oracle's sums).
TEST(FunctionalModel, MxuMatmulWithAccStrideWritesEveryStrideRow) {
  const int n = 16, rows = 7, s = 3;
  FunctionalModel m;
  const MmOperands o = mm_operands(m, n, rows, test::test_seed());
  const std::string mm =
      "vpu.li v1, 0x7f7f7f7f\nvpu.st acc, v1, 41\nmxu.mm set, 0x0, 32, 7, 40, 3\n"
      "dma.copy hbm, ub, 2, 0x30000, 0x9000\nsignal dma, sc1\nwait mxu, sc1, 1\n"
      "mxu.ldw 0x9000, 32\nmxu.mm acc, 0x0, 32, 7, 40, 3\n";
  const RunResult r = mxu_program(m, o.a, o.w, rows, mm);
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_TRUE(r.undefined_reads.empty());
  for (int t = 0; t < rows; ++t)
    for (int col = 0; col < n; ++col) {
      const size_t k = static_cast<size_t>(t) * n + col;
      ASSERT_EQ(m.acc(40 + s * t, col), fp::add(o.ref[k], o.ref2[k]))
          << "row " << t << " col " << col;
    }
  for (int col = 0; col < n; ++col) EXPECT_EQ(m.acc(41, col), 0x7f7f7f7fu);  // between: as set
  // The last row, 40 + 6 x 3 = 58, must be inside the ACC: 1000 + 6 x 4 = 1024 is not.
  const RunResult bad = run(m, "mxu.mm set, 0x0, 32, 7, 1000, 4\nhalt\n");
  expect_fault(bad, isa::FAULT_ACC_RANGE, kProg, 1024, 0);
}

// The functional model's host-float MXU kernel against the oracle (sw/numerics/mxu_ref, which
// rebuilds bf16 values with ldexp and rounds through fp::mac), bit for bit: mostly ordinary
// values (sums that round at every step, cancellations to +-0), tiny and huge magnitudes
// (subnormal products, overflow to inf) and the special values (NaN, inf, +-0, subnormals).
TEST(FunctionalModel, MxuTileKernelIsBitIdenticalToTheOracle) {
  for (const int n : {4, 16, 32}) {
    std::mt19937_64 rng(test::test_seed() + 7 * n);
    test::Bf16Gen gen(test::test_seed() + n);
    const std::vector<uint16_t> specials = test::bf16_specials();
    for (int mix = 0; mix < 4; ++mix) {
      const uint32_t rows = 200;
      auto draw = [&]() -> uint16_t {
        const uint16_t r = static_cast<uint16_t>(rng());
        switch (mix) {
          case 0:  // ordinary: exponents 2^-9 .. 2^8, either sign
            return static_cast<uint16_t>((r & 0x807F) | ((118 + rng() % 18) << 7));
          case 1:  // ordinary with exact cancellations: +-1, +-2 and their negations
            return static_cast<uint16_t>((rng() % 2 ? 0x8000 : 0) | (rng() % 2 ? 0x3F80 : 0x4000));
          case 2:  // a special value one time in 64
            return rng() % 64 == 0
                       ? specials[rng() % specials.size()]
                       : static_cast<uint16_t>((r & 0x807F) | ((100 + rng() % 60) << 7));
          default:  // Bf16Gen: tiny, huge, specials one time in eight
            return gen();
        }
      };
      std::vector<uint16_t> a(rows * n), w(static_cast<size_t>(n) * n);
      for (auto& x : a) x = draw();
      for (auto& x : w) x = draw();
      const std::vector<uint32_t> want = mxu::reference_matmul(n, rows, n, n, a, w);
      std::vector<uint32_t> got(want.size());
      functional::mxu_tile_matmul(n, rows, a.data(), w.data(), got.data());
      size_t nan = 0, zero = 0;
      for (size_t k = 0; k < want.size(); ++k) {
        ASSERT_EQ(got[k], want[k]) << "n " << n << " mix " << mix << " element " << k;
        nan += fp::is_nan32(want[k]);
        zero += (want[k] & 0x7FFFFFFFu) == 0;
      }
      if (mix == 1) {
        EXPECT_GT(zero, 0u) << "n " << n;  // the cancellations happened
      } else if (mix == 3) {
        EXPECT_GT(nan, 0u) << "n " << n;
      } else if (mix == 0) {
        EXPECT_EQ(nan, 0u) << "n " << n;
      }
    }
  }
}

TEST(FunctionalModel, MxuAccumulateIntoUnwrittenRowIsAnUndefinedRead) {
  FunctionalModel m;
  std::vector<uint16_t> a(16, bf16_of(1.0f)), w(256, bf16_of(0.5f));
  const RunResult r = mxu_program(m, a, w, 1, "mxu.mm acc, 0x0, 32, 1, 7\n");
  ASSERT_EQ(r.status, RunStatus::kHalted);
  ASSERT_EQ(r.undefined_reads.size(), 1u);
  EXPECT_EQ(r.undefined_reads[0].space, UndefinedRead::Space::kAcc);
  EXPECT_EQ(r.undefined_reads[0].addr, 7u);
  EXPECT_EQ(r.undefined_reads[0].pc, kProg + 16 * 9);
}

// ---------------------------------------------------------------------------------------------
// VPU

// Runs `vpu.op funct, v4, v1|v0, v2|v0, v3|v0 [, imm]` on lanes a, b, c (N = 16) and returns v4.
// d goes to v5 (max4 / argmax4 with imm 5 read it; a when omitted).
std::vector<uint32_t> vpu_op(isa::Funct f, const std::vector<uint32_t>& a,
                             const std::vector<uint32_t>& b, const std::vector<uint32_t>& c,
                             uint32_t imm = 0, const std::vector<uint32_t>& d = {}) {
  FunctionalModel m;
  write_f32(m, 0x0, a);
  write_f32(m, 0x40, b);
  write_f32(m, 0x80, c);
  write_f32(m, 0xC0, d.empty() ? a : d);
  const isa::FunctOperands u = isa::funct_operands(f);
  const std::string op = std::string("vpu.op ") + isa::funct_name(f) + ", v4, " +
                         (u.va ? "v1" : "v0") + ", " + (u.vb ? "v2" : "v0") + ", " +
                         (u.vc ? "v3" : "v0") + (u.imm ? ", " + std::to_string(imm) : "");
  const RunResult r = run(m,
                          "dma.loop src, 0, 64, 4, 1, 0\ndma.loop dst, 0, 64, 4, 1, 0\n"
                          "dma.copy hbm, ub, 4, 0x0, 0x0\nsignal dma, sc0\nwait vpu, sc0, 1\n"
                          "vpu.ld f32, v1, 0x0\nvpu.ld f32, v2, 0x40\nvpu.ld f32, v3, 0x80\n"
                          "vpu.ld f32, v5, 0xc0\n" +
                              op + "\nhalt\n");
  EXPECT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_TRUE(r.undefined_reads.empty());
  return m.vreg(4);
}

uint32_t canon(float x) { return std::isnan(x) ? fp::kFp32CanonicalNan : fp::bits(x); }
float F(uint32_t b) { return fp::f32(b); }

// The expected lane results, from the host's float unit (written independently of the model).
// d: the lane of the register imm names (max4, argmax4).
uint32_t expected_lane(isa::Funct f, uint32_t a, uint32_t b, uint32_t c, uint32_t imm,
                       uint32_t d = 0) {
  using isa::Funct;
  const bool nan = std::isnan(F(a)) || std::isnan(F(b));
  switch (f) {
    case Funct::kAdd:
      return canon(F(a) + F(b));
    case Funct::kSub:
      return canon(F(a) - F(b));
    case Funct::kMul:
      return canon(F(a) * F(b));
    case Funct::kDiv:
      return canon(F(a) / F(b));
    case Funct::kSqrt:
      return canon(std::sqrt(F(a)));
    case Funct::kMin:
      if (nan) return fp::kFp32CanonicalNan;
      if (F(a) == 0 && F(b) == 0)
        return (std::signbit(F(a)) || std::signbit(F(b))) ? 0x80000000u : 0;
      return fp::bits(std::fmin(F(a), F(b)));
    case Funct::kMax:
      if (nan) return fp::kFp32CanonicalNan;
      if (F(a) == 0 && F(b) == 0)
        return (!std::signbit(F(a)) || !std::signbit(F(b))) ? 0 : 0x80000000u;
      return fp::bits(std::fmax(F(a), F(b)));
    case Funct::kCmpEq:
      return F(a) == F(b) ? ~0u : 0u;
    case Funct::kCmpLt:
      return F(a) < F(b) ? ~0u : 0u;
    case Funct::kCmpLe:
      return F(a) <= F(b) ? ~0u : 0u;
    case Funct::kSel:
      return c ? a : b;
    case Funct::kI2F:
      return fp::bits(static_cast<float>(static_cast<int32_t>(a)));
    case Funct::kF2I: {
      if (std::isnan(F(a))) return 0;
      const double t = std::trunc(static_cast<double>(F(a)));
      if (t > 2147483647.0) return 0x7FFFFFFFu;
      if (t < -2147483648.0) return 0x80000000u;
      return static_cast<uint32_t>(static_cast<int32_t>(t));
    }
    case Funct::kF2Bf:
      return static_cast<uint32_t>(fp::fp32_to_bf16(a)) << 16;
    case Funct::kIAdd:
      return static_cast<uint32_t>(static_cast<uint64_t>(a) + b);
    case Funct::kIAnd:
      return a & b;
    case Funct::kIOr:
      return a | b;
    case Funct::kIXor:
      return a ^ b;
    case Funct::kShl:
      return a << (b % 32);
    case Funct::kShr:
      return a >> (b % 32);
    case Funct::kSra:
      return static_cast<uint32_t>(static_cast<int32_t>(a) >> (b % 32));
    case Funct::kSelEq:
      return F(a) == F(b) ? c : imm;
    case Funct::kSelNe:
      return F(a) == F(b) ? imm : c;
    case Funct::kSelLt:
      return F(a) < F(b) ? c : imm;
    case Funct::kBfx: {  // imm[9:5] + 1 bits from bit imm[4:0]
      const uint32_t shift = imm % 32, width = (imm / 32) % 32 + 1;
      uint32_t r = 0;
      for (uint32_t k = 0; k < width && shift + k < 32; ++k) r |= ((a >> (shift + k)) & 1u) << k;
      return r;
    }
    case Funct::kShlOr:
      return a | static_cast<uint32_t>(static_cast<uint64_t>(b) << (imm % 32));
    case Funct::kSelEqH: {  // two bf16 bit patterns a lane
      const uint32_t hi = (a >> 16) == (b >> 16) ? c >> 16 : imm;
      const uint32_t lo = (a & 0xFFFF) == (b & 0xFFFF) ? c & 0xFFFF : imm;
      return hi << 16 | lo;
    }
    case Funct::kAddMax:
      return expected_lane(Funct::kMax, expected_lane(Funct::kAdd, a, b, 0, 0), c, 0, 0);
    case Funct::kMax4:
    case Funct::kArgMax4: {
      const uint32_t m = expected_lane(
          Funct::kMax, expected_lane(Funct::kMax, expected_lane(Funct::kMax, a, b, 0, 0), c, 0, 0),
          d, 0, 0);
      if (f == Funct::kMax4) return m;
      return fp::bits(F(a) == F(m) ? 0.0f : F(b) == F(m) ? 1.0f : F(c) == F(m) ? 2.0f : 3.0f);
    }
    default:
      return 0;
  }
}

const std::vector<isa::Funct> kLaneFuncts = {
    isa::Funct::kAdd,   isa::Funct::kSub,   isa::Funct::kMul,   isa::Funct::kDiv,
    isa::Funct::kSqrt,  isa::Funct::kMin,   isa::Funct::kMax,   isa::Funct::kCmpEq,
    isa::Funct::kCmpLt, isa::Funct::kCmpLe, isa::Funct::kSel,   isa::Funct::kI2F,
    isa::Funct::kF2I,   isa::Funct::kF2Bf,  isa::Funct::kIAdd,  isa::Funct::kIAnd,
    isa::Funct::kIOr,   isa::Funct::kIXor,  isa::Funct::kShl,   isa::Funct::kShr,
    isa::Funct::kSra,   isa::Funct::kSelEq, isa::Funct::kSelNe, isa::Funct::kSelLt,
    isa::Funct::kBfx,   isa::Funct::kShlOr, isa::Funct::kSelEqH, isa::Funct::kAddMax,
    isa::Funct::kMax4,  isa::Funct::kArgMax4};

// One instruction on 16 lanes; its imm (for the functs that read one) is drawn from the
// operands, within the funct's legal range.
void check_lanes(isa::Funct f, const std::vector<uint32_t>& a, const std::vector<uint32_t>& b,
                 const std::vector<uint32_t>& c) {
  uint32_t imm = 0;
  if (f == isa::Funct::kSelEq || f == isa::Funct::kSelNe || f == isa::Funct::kSelLt)
    imm = a[3] ^ 0x9E3779B9u;
  if (f == isa::Funct::kBfx) imm = (a[0] ^ b[1]) % 1024;
  if (f == isa::Funct::kShlOr) imm = (a[1] + b[2]) % 32;
  if (f == isa::Funct::kSelEqH) imm = (a[2] ^ c[3]) % 65536;
  // max4 / argmax4: the fourth operand v5, lane l of c's lanes rotated (ties with a, b or c
  // where the inputs repeat)
  std::vector<uint32_t> d(16);
  for (int l = 0; l < 16; ++l) d[l] = c[(l + 5) % 16];
  if (f == isa::Funct::kMax4 || f == isa::Funct::kArgMax4) imm = 5;
  const std::vector<uint32_t> got = vpu_op(f, a, b, c, imm, d);
  for (int l = 0; l < 16; ++l) {
    const uint32_t want = expected_lane(f, a[l], b[l], c[l], imm, d[l]);
    ASSERT_EQ(got[l], want) << isa::funct_name(f) << " a " << fp::hex32(a[l]) << " b "
                            << fp::hex32(b[l]) << " c " << fp::hex32(c[l]) << " imm "
                            << fp::hex32(imm) << ": got " << fp::hex32(got[l]) << " want "
                            << fp::hex32(want);
  }
}

TEST(FunctionalModel, VpuLaneFunctsOnSpecialValues) {
  ASSERT_TRUE(fp::host_keeps_subnormals());
  std::vector<uint32_t> s = test::fp32_specials();
  // Integer-ish patterns for i2f / shifts / f2i saturation.
  for (uint32_t x : {0x4F000000u, 0xCF000000u, 0xCF000001u, 0x4EFFFFFFu, 0x7FFFFFFFu, 0x80000000u,
                     0x01000001u, 0x00FFFFFFu, 31u, 32u, 33u, 0xFFFFFFFFu}) {
    s.push_back(x);
  }
  for (isa::Funct f : kLaneFuncts) {
    std::vector<uint32_t> a, b, c;
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t j = 0; j < s.size(); ++j) {
        a.push_back(s[i]);
        b.push_back(s[j]);
        c.push_back((i + j) % 3 == 0 ? 0 : s[(i * 7 + j) % s.size()]);
        if (a.size() == 16) {
          check_lanes(f, a, b, c);
          if (::testing::Test::HasFatalFailure()) return;
          a.clear();
          b.clear();
          c.clear();
        }
      }
    }
  }
}

TEST(FunctionalModel, VpuLaneFunctsOnRandomValues) {
  test::Fp32Gen gen(test::test_seed());
  for (isa::Funct f : kLaneFuncts) {
    for (int run = 0; run < 40; ++run) {
      std::vector<uint32_t> a(16), b(16), c(16);
      for (int l = 0; l < 16; ++l) {
        a[l] = gen();
        b[l] = gen();
        c[l] = gen.rng()() % 2 ? 0 : gen();
        if (f == isa::Funct::kSelEqH) {  // equal halves: none, either or both
          const uint32_t same[] = {0, 0xFFFFu, 0xFFFF0000u, 0xFFFFFFFFu};
          const uint32_t m = same[gen.rng()() % 4];
          b[l] = (b[l] & ~m) | (a[l] & m);
        }
      }
      check_lanes(f, a, b, c);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

TEST(FunctionalModel, VpuSpecificSemantics) {
  const uint32_t nan_pay = 0x7FA00001u, neg_nan = 0xFFC00000u;
  std::vector<uint32_t> a(16, 0), b(16, 0), c(16, 0);
  a[0] = 0x80000000u;
  b[0] = 0;  // min(-0,+0) = -0, max = +0
  a[1] = 0;
  b[1] = 0x80000000u;  // either order
  a[2] = nan_pay;
  b[2] = 0x3F800000u;  // NaN in -> canonical NaN out
  a[3] = 0x3F800000u;
  b[3] = neg_nan;
  a[4] = 0x4F000000u;  // 2^31 -> saturates
  a[5] = 0xFF800000u;  // -inf -> INT32_MIN
  a[6] = 0xC0600000u;  // -3.5 -> -3 (toward zero)
  a[7] = nan_pay;      // f2i(NaN) = 0
  std::vector<uint32_t> mn = vpu_op(isa::Funct::kMin, a, b, c);
  std::vector<uint32_t> mx = vpu_op(isa::Funct::kMax, a, b, c);
  EXPECT_EQ(mn[0], 0x80000000u);
  EXPECT_EQ(mn[1], 0x80000000u);
  EXPECT_EQ(mx[0], 0u);
  EXPECT_EQ(mx[1], 0u);
  EXPECT_EQ(mn[2], fp::kFp32CanonicalNan);
  EXPECT_EQ(mx[3], fp::kFp32CanonicalNan);
  const std::vector<uint32_t> add = vpu_op(isa::Funct::kAdd, a, b, c);
  EXPECT_EQ(add[2], fp::kFp32CanonicalNan);
  EXPECT_EQ(add[3], fp::kFp32CanonicalNan);
  const std::vector<uint32_t> eq = vpu_op(isa::Funct::kCmpEq, a, b, c);
  EXPECT_EQ(eq[0], ~0u);  // -0 == +0
  EXPECT_EQ(eq[2], 0u);   // NaN != anything
  const std::vector<uint32_t> fi = vpu_op(isa::Funct::kF2I, a, b, c);
  EXPECT_EQ(fi[4], 0x7FFFFFFFu);
  EXPECT_EQ(fi[5], 0x80000000u);
  EXPECT_EQ(fi[6], static_cast<uint32_t>(-3));
  EXPECT_EQ(fi[7], 0u);
  // i2f rounds to nearest even: 2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4.
  std::vector<uint32_t> ints(16, 0);
  ints[0] = (1u << 24) + 1;
  ints[1] = (1u << 24) + 3;
  ints[2] = 0x80000000u;
  const std::vector<uint32_t> fl = vpu_op(isa::Funct::kI2F, ints, b, c);
  EXPECT_EQ(fl[0], fp::bits(16777216.0f));
  EXPECT_EQ(fl[1], fp::bits(16777220.0f));
  EXPECT_EQ(fl[2], fp::bits(-2147483648.0f));
  // f2bf: RNE, low 16 bits zero.
  std::vector<uint32_t> bf(16, 0);
  bf[0] = 0x3F808000u;  // tie -> even (0x3F80)
  bf[1] = 0x3F818000u;  // tie -> even (0x3F82)
  bf[2] = 0x7F7FFFFFu;  // rounds to inf
  bf[3] = nan_pay;
  const std::vector<uint32_t> r = vpu_op(isa::Funct::kF2Bf, bf, b, c);
  EXPECT_EQ(r[0], 0x3F800000u);
  EXPECT_EQ(r[1], 0x3F820000u);
  EXPECT_EQ(r[2], 0x7F800000u);
  EXPECT_EQ(r[3], fp::kFp32CanonicalNan);
  // Shifts use the low 5 bits of vb; sra keeps the sign.
  std::vector<uint32_t> sa(16, 0x80000010u), sb(16, 0);
  sb[0] = 4;
  sb[1] = 36;
  EXPECT_EQ(vpu_op(isa::Funct::kShl, sa, sb, c)[1], 0x00000100u);
  EXPECT_EQ(vpu_op(isa::Funct::kSra, sa, sb, c)[0], 0xF8000001u);
  EXPECT_EQ(vpu_op(isa::Funct::kShr, sa, sb, c)[0], 0x08000001u);
  // sel on bit patterns: any nonzero vc selects va (even a NaN pattern moves unchanged).
  std::vector<uint32_t> sc(16, 0);
  sc[0] = 0x80000000u;  // -0 is nonzero as a pattern
  std::vector<uint32_t> va(16, nan_pay), vb(16, 7);
  const std::vector<uint32_t> s = vpu_op(isa::Funct::kSel, va, vb, sc);
  EXPECT_EQ(s[0], nan_pay);
  EXPECT_EQ(s[1], 7u);
}

// The pairwise tree of docs/isa.md written recursively: (lanes lo half) + (lanes hi half).
uint32_t tree(const std::vector<uint32_t>& v, size_t lo, size_t n, bool is_max) {
  if (n == 1) return v[lo];
  const uint32_t x = tree(v, lo, n / 2, is_max), y = tree(v, lo + n / 2, n / 2, is_max);
  if (!is_max) return canon(F(x) + F(y));
  return expected_lane(isa::Funct::kMax, x, y, 0, 0);
}

TEST(FunctionalModel, VpuReductionsUseThePairwiseTree) {
  // Crafted: lanes [2^24, 0, 1, 1, 0, ...]. Pairwise: (2^24 + 0) + (1 + 1) = 2^24 + 2.
  // Sequential: ((2^24 + 0) + 1) + 1 = 2^24 (each + 1 is a tie that rounds to even).
  std::vector<uint32_t> a(16, 0), z(16, 0);
  a[0] = fp::bits(16777216.0f);
  a[2] = a[3] = fp::bits(1.0f);
  float seq = 0;
  for (uint32_t x : a) seq += F(x);
  ASSERT_EQ(fp::bits(seq), fp::bits(16777216.0f));
  std::vector<uint32_t> got = vpu_op(isa::Funct::kRSum, a, z, z);
  for (int l = 0; l < 16; ++l) EXPECT_EQ(got[l], fp::bits(16777218.0f)) << l;
  // Random values against the recursive tree; rmax with NaN and signed zeros.
  test::Fp32Gen gen(test::test_seed());
  for (int k = 0; k < 200; ++k) {
    std::vector<uint32_t> v(16);
    for (auto& x : v) x = gen();
    ASSERT_EQ(vpu_op(isa::Funct::kRSum, v, z, z)[5], tree(v, 0, 16, false));
    ASSERT_EQ(vpu_op(isa::Funct::kRMax, v, z, z)[9], tree(v, 0, 16, true));
  }
  std::vector<uint32_t> zs(16, 0x80000000u);
  EXPECT_EQ(vpu_op(isa::Funct::kRMax, zs, z, z)[0], 0x80000000u);
  zs[11] = 0;
  EXPECT_EQ(vpu_op(isa::Funct::kRMax, zs, z, z)[0], 0u);
  zs[4] = 0xFF800001u;  // a NaN anywhere -> canonical NaN
  EXPECT_EQ(vpu_op(isa::Funct::kRMax, zs, z, z)[0], fp::kFp32CanonicalNan);
  std::vector<uint32_t> lanes(16);
  for (int l = 0; l < 16; ++l) lanes[l] = 100 + l;
  const std::vector<uint32_t> bc = vpu_op(isa::Funct::kBcast, lanes, z, z, 13);
  for (int l = 0; l < 16; ++l) EXPECT_EQ(bc[l], 113u);
}

TEST(FunctionalModel, VpuAtOtherArraySizes) {
  test::Fp32Gen gen(test::test_seed());
  for (const int n : {4, 32, 128}) {
    ChipConfig c;
    c.n = n;
    FunctionalModel m(c);
    std::vector<uint32_t> v(n);
    for (auto& x : v) x = gen();
    write_f32(m, 0x0, v);
    const std::string cnt = std::to_string(n);
    const RunResult r = run(
        m, "dma.loop src, 0, " + cnt + ", 4, 1, 0\ndma.loop dst, 0, " + cnt +
               ", 4, 1, 0\ndma.copy hbm, ub, 4, 0x0, 0x0\n"
               "signal dma, sc0\nwait vpu, sc0, 1\nvpu.ld f32, v1, 0x0\n"
               "vpu.op rsum, v2, v1, v0, v0\nvpu.op rmax, v3, v1, v0, v0\n"
               "vpu.op bcast, v4, v1, v0, v0, " +
               std::to_string(n - 1) + "\nvpu.st f32, v1, 0x" +
               [&] {
                 char b[16];
                 std::snprintf(b, sizeof b, "%x", 4 * n);  // next aligned
                 return std::string(b);
               }() +
               "\nhalt\n");
    ASSERT_EQ(r.status, RunStatus::kHalted) << n << ": " << r.describe();
    for (int l = 0; l < n; ++l) {
      ASSERT_EQ(m.vreg(2)[l], tree(v, 0, n, false)) << n;
      ASSERT_EQ(m.vreg(3)[l], tree(v, 0, n, true)) << n;
      ASSERT_EQ(m.vreg(4)[l], v[n - 1]) << n;
    }
    // fp32 accesses need a multiple of 4N: 2N is misaligned.
    const RunResult bad = run(m, "vpu.ld f32, v1, " + std::to_string(2 * n) + "\nhalt\n");
    expect_fault(bad, isa::FAULT_UB_RANGE, kProg, 2 * n, 0);
  }
}

TEST(FunctionalModel, VpuLoadsAndStoresOfEveryKind) {
  FunctionalModel m;
  std::vector<uint16_t> h(16);
  for (int l = 0; l < 16; ++l) h[l] = static_cast<uint16_t>(0x3F80 + l);
  h[15] = 0x7F81;  // a bf16 NaN widens to the canonical NaN
  write_bf16(m, 0x0, h);
  const RunResult r = run(m,
                          "dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
                          "dma.copy hbm, ub, 2, 0x0, 0x20\nsignal dma, sc0\nwait vpu, sc0, 1\n"
                          "vpu.ld bf16, v1, 0x20\n"
                          "vpu.st f32, v1, 0x40\n"  // fp32 lanes
                          "vpu.st acc, v1, 5\n"
                          "vpu.ld acc, v2, 5\n"
                          "vpu.li v3, 0x3f808000\n"  // a bf16 tie: rounds to even 0x3f80
                          "vpu.st bf16, v3, 0x80\n"
                          "vpu.ld f32, v4, 0x40\n"
                          "halt\n");
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_TRUE(r.undefined_reads.empty());
  for (int l = 0; l < 15; ++l) {
    EXPECT_EQ(m.vreg(1)[l], static_cast<uint32_t>(h[l]) << 16);
    EXPECT_EQ(m.vreg(2)[l], m.vreg(1)[l]);
    EXPECT_EQ(m.acc(5, l), m.vreg(1)[l]);
    EXPECT_EQ(m.vreg(4)[l], m.vreg(1)[l]);
    uint32_t f;
    std::memcpy(&f, &m.ub()[0x40 + 4 * l], 4);
    EXPECT_EQ(f, m.vreg(1)[l]);
    EXPECT_EQ(m.ub()[0x80 + 2 * l] | m.ub()[0x81 + 2 * l] << 8, 0x3F80);
  }
  EXPECT_EQ(m.vreg(1)[15], fp::kFp32CanonicalNan);
}

// REPEAT (docs/isa.md, "Loops"): a loop leaves exactly the state of its expansion written out
// instruction by instruction (isa::expand_repeats), counts its executed instructions, and its
// faults name the body instruction's PC and the faulting iteration's address.
TEST(FunctionalModel, RepeatRunsItsBodyCountTimesLikeItsExpansion) {
  // a running sum over 12 UB vectors: v1 += ub[0x100 + 64 i], each partial stored at 0x800 +
  // 64 i; v2 counts the iterations through a stepped VPU.LI; SC1 counts by a stepped WAIT
  const std::string loop =
      "vpu.li v1, 0x0\n"
      "repeat 12, 6\n"
      "vpu.li v3, 0x3f800000, 0x800000\n"  // 2^i: the exponent field moves by one a time
      "vpu.st f32, v3, 0x100, 64\n"
      "vpu.ld f32, v4, 0x100, 64\n"
      "vpu.op add, v1, v1, v4, v0\n"
      "vpu.st f32, v1, 0x800, 64\n"
      "signal vpu, sc1\n"
      "wait dma, sc1, 12\n"
      "repeat 3, 1\n"
      "wait dma, sc1, 10, 1\n"
      "halt\n";
  const auto looped = assembler::assemble(loop);
  ASSERT_TRUE(looped.ok()) << assembler::format_error("t.s", looped.errors[0]);
  const std::vector<isa::Instruction> flat = isa::expand_repeats(looped.instructions);
  // the expansion: 12 x 6 + 3 body instructions, the REPEATs left out
  EXPECT_EQ(flat.size(), 1u + 72 + 1 + 3 + 1);
  FunctionalModel a, b;
  a.load_program(kProg, looped.words());
  std::vector<uint32_t> flat_words;
  for (const auto& i : flat) {
    for (uint32_t w : isa::encode(i)) flat_words.push_back(w);
  }
  b.load_program(kProg, flat_words);
  const RunResult ra = a.run(kProg), rb = b.run(kProg);
  ASSERT_EQ(ra.status, RunStatus::kHalted) << ra.describe();
  ASSERT_EQ(rb.status, RunStatus::kHalted) << rb.describe();
  EXPECT_EQ(ra.instructions, rb.instructions + 2);  // the two REPEATs count once each
  EXPECT_EQ(rb.instructions, flat.size());
  EXPECT_EQ(a.ub(), b.ub());
  for (int r = 0; r < 16; ++r) EXPECT_EQ(a.vreg(r), b.vreg(r)) << "v" << r;
  // and against the host's float sums of 2^i
  float sum = 0;
  for (int i = 0; i < 12; ++i) {
    sum += fp::f32(0x3F800000u + 0x800000u * i);
    uint32_t got;
    std::memcpy(&got, &a.ub()[0x800 + 64 * i], 4);
    EXPECT_EQ(got, fp::bits(sum)) << "iteration " << i;
  }
  // faults: HALT or REPEAT inside a body; a stepped address leaving the UB at iteration 4
  expect_fault(run(a, "repeat 3, 2\nnop\nhalt\nhalt\n"), isa::FAULT_ILLEGAL_INSTRUCTION, kProg + 32,
               0, isa::OP_HALT);
  expect_fault(run(a, "repeat 3, 2\nrepeat 2, 1\nnop\nhalt\n"), isa::FAULT_ILLEGAL_INSTRUCTION,
               kProg + 16, 0, isa::OP_REPEAT | 0u);
  const uint32_t top = static_cast<uint32_t>(a.config().ub_bytes) - 4 * 64;
  char text[128];
  std::snprintf(text, sizeof text, "repeat 10, 2\nnop\nvpu.st f32, v1, 0x%x, 64\nhalt\n", top);
  expect_fault(run(a, text), isa::FAULT_UB_RANGE, kProg + 32, top + 4 * 64, 0);
  // a WAIT whose stepped value outruns the SIGNALs before it: the wait rule, iteration 1
  expect_fault(run(a, "repeat 5, 2\nsignal dma, sc1\nwait vpu, sc1, 1, 2\nhalt\n"),
               isa::FAULT_SYNC_DEADLOCK, kProg + 32, 0, 1);
}

TEST(FunctionalModel, UndefinedReadsAreRecordedNotFaulted) {
  FunctionalModel m;
  RunResult r = run(m,
                    "vpu.ld f32, v1, 0x100\n"  // unwritten UB
                    "vpu.ld acc, v1, 3\n"      // unwritten ACC row
                    "vpu.st f32, v1, 0x100\n"
                    "vpu.ld f32, v2, 0x100\n"  // now written: fine
                    "vpu.st bf16, v1, 0x200\n"
                    "vpu.ld f32, v2, 0x200\n"  // half written: first unwritten byte 0x220
                    "halt\n");
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  ASSERT_EQ(r.undefined_reads.size(), 3u);
  EXPECT_EQ(r.undefined_reads[0].pc, kProg);
  EXPECT_EQ(r.undefined_reads[0].space, UndefinedRead::Space::kUb);
  EXPECT_EQ(r.undefined_reads[0].addr, 0x100u);
  EXPECT_EQ(r.undefined_reads[1].pc, kProg + 16);
  EXPECT_EQ(r.undefined_reads[1].space, UndefinedRead::Space::kAcc);
  EXPECT_EQ(r.undefined_reads[1].addr, 3u);
  EXPECT_EQ(r.undefined_reads[2].pc, kProg + 80);
  EXPECT_EQ(r.undefined_reads[2].addr, 0x220u);
  // A new program forgets what the previous one wrote (UB is undefined at program start).
  r = run(m, "vpu.ld f32, v2, 0x100\nhalt\n", kProg + 0x1000);
  ASSERT_EQ(r.undefined_reads.size(), 1u);
  EXPECT_EQ(r.undefined_reads[0].pc, kProg + 0x1000);
}

// ---------------------------------------------------------------------------------------------
// End to end

TEST(FunctionalModel, EndToEndMatmulReluMatchesHost) {
  FunctionalModel m;
  const int n = 16, rows = 4;
  std::mt19937_64 g(test::test_seed());
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<uint16_t> x(rows * n), w(n * n);
  for (auto& v : x) v = bf16_of(u(g));
  for (auto& v : w) v = bf16_of(u(g));
  write_bf16(m, 0x10000, x);  // activations
  write_bf16(m, 0x20000, w);  // weights
  std::string prog =
      "# HBM -> UB: activations at UB 0x0, weights at UB 0x1000\n"
      "dma.loop src, 0, 64, 2, 1, 0\ndma.loop dst, 0, 64, 2, 1, 0\n"
      "dma.copy hbm, ub, 2, 0x10000, 0x0\n"
      "dma.loop src, 0, 256, 2, 1, 0\ndma.loop dst, 0, 256, 2, 1, 0\n"
      "dma.copy hbm, ub, 2, 0x20000, 0x1000\n"
      "signal dma, sc0\n"
      "wait mxu, sc0, 1\n"
      "mxu.ldw 0x1000, 32\n"
      "mxu.mm set, 0x0, 32, 4, 0\n"
      "signal mxu, sc1\n"
      "wait vpu, sc1, 1\n"
      "vpu.li v0, 0\n";
  for (int t = 0; t < rows; ++t) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "vpu.ld acc, v1, %d\nvpu.op max, v2, v1, v0, v0\nvpu.st bf16, v2, 0x%x\n", t,
                  0x2000 + 32 * t);
    prog += buf;
  }
  prog +=
      "signal vpu, sc2\n"
      "wait dma, sc2, 1\n"
      "dma.loop src, 0, 64, 2, 1, 0\ndma.loop dst, 0, 64, 2, 1, 0\n"
      "dma.copy ub, hbm, 2, 0x2000, 0x30000\n"
      "halt\n";
  const RunResult r = run(m, prog);
  ASSERT_EQ(r.status, RunStatus::kHalted) << r.describe();
  EXPECT_TRUE(r.undefined_reads.empty());
  EXPECT_EQ(r.macs, static_cast<uint64_t>(rows) * n * n);
  // Host: products exact, sums in fp32 in k order from +0 (double is exact for each product and
  // the float sum is rounded at each step), relu, round to bf16.
  for (int t = 0; t < rows; ++t) {
    for (int c = 0; c < n; ++c) {
      float s = 0.0f;
      for (int k = 0; k < n; ++k) {
        const float p = F(fp::bf16_to_fp32(x[t * n + k])) * F(fp::bf16_to_fp32(w[k * n + c]));
        s = s + p;
      }
      const float relu = s > 0.0f ? s : 0.0f;
      EXPECT_EQ(read_bf16(m, 0x30000 + 2 * (t * n + c)), bf16_of(relu)) << t << "," << c;
    }
  }
}

}  // namespace
}  // namespace tessera
