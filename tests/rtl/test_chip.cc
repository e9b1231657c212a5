// The chip (tpu_top at N = 4) end to end, against the functional model (sw/functional): the host
// loads data and an assembled program into HBM through the host port, rings the doorbell and
// waits; HBM after the program, the fault CSRs and the exact counters (instructions, MACs) must
// equal the functional model's run of the same program on the same HBM. Programs: a matmul +
// relu through every unit (DMA in, MXU, VPU epilogue, DMA out, with SIGNAL/WAIT between them);
// faults (illegal instruction, UB range, sync deadlock, a DMA range fault) with their PC; and
// the identity CSRs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "Vtpu_top_n4.h"
#include "Vtpu_top_n4___024root.h"  // ChipSim: one evaluation a cycle
#include "harness/chip/chip_sim.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/asm.h"
#include "tessera/functional_model.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

constexpr int kN = static_cast<int>(chip_params::SMALL_N);  // the small chip (Vtpu_top_n4)
constexpr uint64_t kUbBytes = chip_params::SMALL_UB_BYTES, kAccRows = chip_params::SMALL_ACC_ROWS,
                   kHbmBytes = chip_params::HBM_PC_BYTES;
constexpr uint32_t kProg = 0x100000;

class Chip : public ::testing::Test {
 protected:
  Chip()
      : chip_(1, hbm::HbmTiming{}, test::current_test_name()),
        model_(functional::ChipConfig{kN, kUbBytes, kAccRows, kHbmBytes}),
        rng_(test::test_seed()) {}

  std::vector<uint8_t> assemble(const std::string& text) {
    const auto r = assembler::assemble(text, {static_cast<uint32_t>(kN)});
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : assembler::format_error("prog", r.errors[0]));
    return r.bytes();
  }

  // The same bytes into both HBMs.
  void load(uint64_t addr, const std::vector<uint8_t>& bytes) {
    chip_.hbm_write(addr, bytes);
    model_.hbm().write(addr, bytes.data(), bytes.size());
  }

  std::vector<uint8_t> random_bf16(size_t n) {
    std::vector<uint8_t> b(2 * n);
    for (size_t i = 0; i < n; ++i) {
      // bf16 values in [-4, 4): random sign/exponent near 1, random fraction
      const float f = (static_cast<int>(rng_() % 2001) - 1000) / 250.0f;
      const uint16_t h = fp::fp32_to_bf16(fp::bits(f));
      b[2 * i] = static_cast<uint8_t>(h);
      b[2 * i + 1] = static_cast<uint8_t>(h >> 8);
    }
    return b;
  }

  // Runs the program on both and compares everything architectural.
  void run_both(const std::string& text, uint64_t out_addr, size_t out_bytes) {
    run_both(assemble(text), out_addr, out_bytes);
  }
  void run_both(const std::vector<uint8_t>& program, uint64_t out_addr, size_t out_bytes) {
    load(kProg, program);
    const chip::ChipRun c = chip_.run(kProg, 2'000'000);
    const functional::RunResult f = model_.run(kProg);
    ASSERT_FALSE(c.timed_out) << "the chip did not finish";
    const bool f_faulted = f.status == functional::RunStatus::kFaulted;
    EXPECT_EQ(c.status, f_faulted ? uint32_t(isa::STATUS_FAULTED) : uint32_t(isa::STATUS_HALTED))
        << f.describe();
    EXPECT_EQ(c.fault_code, f.fault_code);
    EXPECT_EQ(c.fault_pc, static_cast<uint32_t>(f.fault_pc));
    EXPECT_EQ(c.fault_addr, static_cast<uint32_t>(f.fault_addr));
    EXPECT_EQ(c.fault_info, f.fault_info);
    if (!f_faulted) {
      EXPECT_EQ(chip_.perf(isa::PERF_INSTRS), f.instructions);
      EXPECT_EQ(chip_.perf(isa::PERF_MACS), f.macs);
      // HBM row counters against the commands on the device pins during the run
      EXPECT_EQ(chip_.perf(isa::PERF_ROW_MISSES), chip_.acts_seen());
      EXPECT_EQ(chip_.perf(isa::PERF_ROW_HITS), chip_.column_commands_seen() - chip_.acts_seen());
      // the pins' data-bus cycles carried at least the DMA's bytes (16 a cycle), and 16
      // single-bank refreshes every tREFI of the run: never more than the timer has asked for
      // (a set at the doorbell and one a tREFI), never more than RefUrgent (32) behind
      const chip::HbmPinCounts& pins = chip_.pin_counts();
      EXPECT_GE(pins.bus * 16, chip_.perf(isa::PERF_HBM_RD) + chip_.perf(isa::PERF_HBM_WR));
      EXPECT_LE(pins.bus, c.cycles);
      const uint64_t sets = c.cycles / hbm::HbmTiming{}.trefi;
      EXPECT_LE(pins.refs, 16 * (sets + 1));
      EXPECT_GE(pins.refs + 32, 16 * sets);
      if (chip_.perf(isa::PERF_HBM_WR)) EXPECT_GE(pins.turns, 1u) << "writes after the fetch";
      EXPECT_GT(chip_.perf(isa::PERF_CYCLES), 0u);
      EXPECT_GT(chip_.perf(isa::PERF_HBM_RD), 0u);
      EXPECT_TRUE(f.undefined_reads.empty()) << "the program reads memory it never wrote";
    }
    if (out_bytes) {
      const auto got = chip_.hbm_read(out_addr, out_bytes);
      std::vector<uint8_t> want(out_bytes);
      model_.hbm().read(out_addr, want.data(), out_bytes);
      EXPECT_EQ(got, want) << "HBM result differs from the functional model";
    }
    std::cout << "chip: " << c.cycles << " cycles; functional model: " << f.describe() << "\n";
  }

  chip::ChipSim<Vtpu_top_n4> chip_;
  functional::FunctionalModel model_;
  std::mt19937_64 rng_;
};

TEST_F(Chip, IdentityAndConfiguration) {
  EXPECT_EQ(chip_.csr_read(isa::CSR_ID), 0x7E550001u);
  EXPECT_EQ(chip_.csr_read(isa::CSR_CONFIG1), uint32_t(kUbBytes));
  EXPECT_EQ(chip_.csr_read(isa::CSR_CONFIG2), uint32_t(kAccRows));
  EXPECT_EQ(chip_.csr_read(isa::CSR_STATUS), uint32_t(isa::STATUS_IDLE));
}

// A = 6 x 4 bf16 at 0x10000, W = 4 x 4 at 0x11000; relu(A W) as bf16 to 0x12000.
std::string matmul_relu_program() {
  std::string prog = R"(
    dma.loop  src, 0, 24, 2, 1, 0
    dma.loop  dst, 0, 24, 2, 1, 0
    dma.copy  hbm, ub, 2, 0x10000, 0x0
    dma.loop  src, 0, 16, 2, 1, 0
    dma.loop  dst, 0, 16, 2, 1, 0
    dma.copy  hbm, ub, 2, 0x11000, 0x100
    signal    dma, sc0
    wait      mxu, sc0, 1
    mxu.ldw   0x100, 8
    mxu.mm    set, 0x0, 8, 6, 0
    signal    mxu, sc1
    wait      vpu, sc1, 1
  )";
  for (int r = 0; r < 6; ++r) {
    prog += "vpu.ld acc, v1, " + std::to_string(r) + "\n";
    prog += "vpu.op max, v2, v1, v0, v0\n";
    prog += "vpu.st bf16, v2, " + std::to_string(0x200 + 8 * r) + "\n";
  }
  prog += R"(
    signal    vpu, sc2
    wait      dma, sc2, 1
    dma.copy  ub, hbm, 2, 0x200, 0x12000
    halt
  )";
  return prog;
}

TEST_F(Chip, MatmulReluThroughEveryUnitMatchesTheFunctionalModel) {
  load(0x10000, random_bf16(24));
  load(0x11000, random_bf16(16));
  run_both(matmul_relu_program(), 0x12000, 48);
}

// The harness's one evaluation a cycle (SimCtrl::set_clock_prev) against the two evaluations
// (falling edge with the inputs, then rising edge) it replaces: the same program on two chips
// takes the same cycles and leaves the same counters, commands on the HBM pins and results.
TEST_F(Chip, OneEvaluationACycleMatchesTwo) {
  chip::ChipSim<Vtpu_top_n4> two(1, hbm::HbmTiming{});
  two.use_two_evals();
  ASSERT_FALSE(two.single_eval());
  if (!waves_requested()) ASSERT_TRUE(chip_.single_eval()) << "the fast path is not in use";
  const std::vector<uint8_t> a = random_bf16(24), w = random_bf16(16);
  const std::vector<uint8_t> prog = assemble(matmul_relu_program());
  for (auto* c : {&chip_, &two}) {
    c->hbm_write(0x10000, a);
    c->hbm_write(0x11000, w);
    c->hbm_write(kProg, prog);
  }
  EXPECT_EQ(chip_.cycle(), two.cycle()) << "loading took different cycles";
  const chip::ChipRun r1 = chip_.run(kProg, 200'000);
  const chip::ChipRun r2 = two.run(kProg, 200'000);
  ASSERT_FALSE(r1.timed_out);
  ASSERT_FALSE(r2.timed_out);
  EXPECT_EQ(r1.status, uint32_t(isa::STATUS_HALTED));
  EXPECT_EQ(r1.status, r2.status);
  EXPECT_EQ(r1.cycles, r2.cycles);
  EXPECT_EQ(chip_.cycle(), two.cycle());
  for (uint32_t k = 0; k < isa::PERF_COUNT; ++k) {
    EXPECT_EQ(chip_.perf(static_cast<int>(k)), two.perf(static_cast<int>(k)))
        << "performance counter " << k;
  }
  EXPECT_EQ(chip_.acts_seen(), two.acts_seen());
  EXPECT_EQ(chip_.column_commands_seen(), two.column_commands_seen());
  EXPECT_EQ(chip_.hbm_read(0x12000, 48), two.hbm_read(0x12000, 48));
}

// One program per VPU.OP funct (and the load/store kinds, LI, NOP, FENCE, IRQ around them): random
// fp32 operands (specials included) through UB loads, the op, stores of every kind, DMA out.
// Division by zero gives IEEE results and the program continues (no fault).
TEST_F(Chip, EveryInstructionMatchesTheFunctionalModel) {
  const std::vector<uint32_t> specials = test::fp32_specials();
  for (uint32_t f = 0; f < isa::VF_COUNT; ++f) {
    SCOPED_TRACE("funct " + std::to_string(f));
    std::vector<uint8_t> data(48);
    for (size_t i = 0; i < data.size(); i += 4) {
      const uint32_t v =
          (rng_() % 3 == 0) ? specials[rng_() % specials.size()] : static_cast<uint32_t>(rng_());
      std::memcpy(&data[i], &v, 4);
    }
    if (f == isa::VF_DIV) std::memset(&data[16], 0, 8);  // two divisors are +0
    load(0x30000, data);
    const bool unary = f == isa::VF_SQRT || f == isa::VF_I2F || f == isa::VF_F2I ||
                       f == isa::VF_F2BF || f == isa::VF_RSUM || f == isa::VF_RMAX;
    const bool select_imm = f == isa::VF_SELEQ || f == isa::VF_SELNE || f == isa::VF_SELLT;
    std::string op =
        std::string("vpu.op ") + isa::funct_name(static_cast<isa::Funct>(f)) + ", v4, v1, ";
    if (f == isa::VF_SEL || f == isa::VF_ADDMAX)
      op += "v2, v3";
    else if (f == isa::VF_SELEQH)
      op += "v2, v3, " + std::to_string(rng_() % 65536);
    else if (f == isa::VF_MAX4 || f == isa::VF_ARGMAX4)
      op += "v2, v3, " + std::to_string(rng_() % 4);  // the fourth: v0 (zero) .. v3
    else if (select_imm)
      op += "v2, v3, " + std::to_string(static_cast<uint32_t>(rng_()));
    else if (f == isa::VF_BCAST)
      op += "v0, v0, 2";
    else if (f == isa::VF_BFX)
      op += "v0, v0, " + std::to_string(rng_() % 1024);
    else if (f == isa::VF_SHLOR)
      op += "v2, v0, " + std::to_string(rng_() % 32);
    else if (unary)
      op += "v0, v0";
    else
      op += "v2, v0";
    const std::string prog =
        "dma.loop src, 0, 12, 4, 1, 0\ndma.loop dst, 0, 12, 4, 1, 0\n"
        "dma.copy hbm, ub, 4, 0x30000, 0x0\nsignal dma, sc0\nwait vpu, sc0, 1\nnop\n"
        "vpu.ld f32, v1, 0x0\nvpu.ld f32, v2, 0x10\nvpu.ld f32, v3, 0x20\n" +
        op +
        "\n"
        "irq 7\nvpu.st f32, v4, 0x100\nvpu.st bf16, v4, 0x110\nvpu.st bf16, v1, 0x118\n"
        "vpu.st acc, v4, 3\n"
        "vpu.li v5, 0x3f800000\nvpu.ld bf16, v6, 0x110\nvpu.ld acc, v7, 3\n"
        "vpu.op add, v8, v6, v7, v0\nvpu.op add, v8, v8, v5, v0\nvpu.st f32, v8, 0x120\n"
        "fence\ndma.loop src, 0, 12, 4, 1, 0\ndma.loop dst, 0, 12, 4, 1, 0\n"
        "dma.copy ub, hbm, 4, 0x100, 0x31000\nhalt\n";
    run_both(prog, 0x31000, 48);
    EXPECT_EQ(chip_.csr_read(isa::CSR_IRQ_CODE), 7u);
    EXPECT_EQ(chip_.csr_read(isa::CSR_IRQ_PENDING) & 5u, 5u) << "done and user interrupts";
    chip_.csr_write(isa::CSR_IRQ_PENDING, 7);
  }
}

TEST_F(Chip, FaultsMatchTheFunctionalModel) {
  {
    SCOPED_TRACE("illegal instruction (the reserved ICI.SEND opcode)");
    std::vector<uint8_t> p = assemble("nop\n");
    std::vector<uint8_t> ici(16, 0);
    ici[0] = 0x50;
    p.insert(p.end(), ici.begin(), ici.end());
    const auto h = assemble("halt\n");
    p.insert(p.end(), h.begin(), h.end());
    run_both(p, 0, 0);
  }
  {
    SCOPED_TRACE("UB range");
    run_both("nop\nvpu.ld f32, v1, 0x2000\nhalt\n", 0, 0);
  }
  {
    SCOPED_TRACE("sync deadlock");
    run_both("signal dma, sc1\nwait vpu, sc3, 1\nhalt\n", 0, 0);
  }
  {
    SCOPED_TRACE("DMA destination beyond the UB");
    load(0x20000, random_bf16(4096));
    run_both(
        "dma.loop src, 0, 4096, 2, 1, 0\ndma.loop dst, 0, 4096, 2, 1, 0\n"
        "dma.copy hbm, ub, 2, 0x20000, 0x1000\nhalt\n",
        0, 0);
  }
}

}  // namespace
}  // namespace tessera
