// The vector unit (tpu_vpu) against the host's IEEE arithmetic, lane by lane, for every VPU.OP
// funct of docs/isa.md: operands are loaded from a C++ unified buffer (random bit patterns,
// every special class, values near rounding and conversion boundaries), the op runs, the result
// is stored back and compared bit for bit with a reference written here from host float / int
// arithmetic (add, sub, mul, div, sqrt through sw/numerics/fp_ref; compare, min, max, conversions,
// integer and shift ops from their definitions; rsum as the pairwise tree; rmax; bcast; sel).
// Loads and stores of every kind (UB fp32, UB bf16 with RNE narrowing, ACC rows) under random
// grants; VPU.LI; the fixed divide latency; clear_i zeroing the registers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "Vtpu_vpu_n4.h"
#include "harness/sim_ctrl.h"
#include "harness/vl_bits.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/chip_params.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"
#include "tests/common/vpu_ref.h"

namespace tessera {
namespace {

constexpr int kN = 4, kUbBytes = 4096,
              kAccRows = chip_params::SMALL_ACC_ROWS;  // the Vtpu_vpu_n4 build
using Vec = std::array<uint32_t, kN>;

// d: the register imm names, for max4 / argmax4.
Vec reference(uint32_t funct, const Vec& a, const Vec& b, const Vec& c, uint32_t imm,
              const Vec& d = {}) {
  Vec r{};
  if (funct == isa::VF_RSUM || funct == isa::VF_RMAX) {
    std::vector<uint32_t> level(a.begin(), a.end());
    while (level.size() > 1) {  // pairwise: (0,1), (2,3), ... then the next level
      std::vector<uint32_t> next;
      for (size_t i = 0; i < level.size(); i += 2) {
        next.push_back(funct == isa::VF_RSUM ? fp::add(level[i], level[i + 1])
                                             : test::fmax_ref(level[i], level[i + 1]));
      }
      level = next;
    }
    r.fill(level[0]);
    return r;
  }
  for (int l = 0; l < kN; ++l) {
    r[l] = funct == isa::VF_BCAST ? a[imm]
                                  : test::vpu_lane_ref(funct, a[l], b[l], c[l], d[l], imm);
  }
  return r;
}

// ---- the bench: the VPU with a C++ unified buffer and accumulator memory behind random grants
class Vpu : public ::testing::Test {
 protected:
  Vpu() : sim_(test::current_test_name()), rng_(test::test_seed()), ub_(kUbBytes), acc_(kAccRows) {
    auto& m = sim_.top();
    m.clear_i = 0;
    m.instr_valid_i = 0;
    m.instr_i = {};
    m.ub_gnt_i = 0;
    m.ub_rvalid_i = 0;
    m.ub_rdata_i = {};
    m.acc_rd_ready_i = 0;
    m.acc_rd_data_valid_i = 0;
    m.acc_rd_data_i = {};
    m.acc_wr_ready_i = 0;
    sim_.reset();
  }

  // One cycle: memories answer, then the edge.
  void cycle() {
    auto& m = sim_.top();
    m.ub_gnt_i = rng_() % 100 < grant_pct_;
    m.acc_rd_ready_i = rng_() % 100 < grant_pct_;
    m.acc_wr_ready_i = rng_() % 100 < grant_pct_;
    // read data of last cycle's granted reads
    m.ub_rvalid_i = ub_read_due_;
    m.acc_rd_data_valid_i = acc_read_due_;
    for (int w = 0; w < kN; ++w) {
      m.ub_rdata_i[w] = ub_read_word_[w];
      m.acc_rd_data_i[w] = acc_read_row_[w];
    }
    sim_.eval();
    taken_ = m.instr_valid_i && m.instr_ready_o;  // the unit takes the instruction at this edge
    ub_read_due_ = false;
    acc_read_due_ = false;
    if (m.ub_req_o && m.ub_gnt_i) {
      const uint32_t a = m.ub_addr_o, bytes = m.ub_wide_o ? 4 * kN : 2 * kN;
      EXPECT_EQ(a % bytes, 0u);
      EXPECT_LE(a + bytes, uint32_t(kUbBytes));
      if (m.ub_we_o) {
        for (uint32_t k = 0; k < bytes; ++k)
          ub_[a + k] = uint8_t(m.ub_wdata_o[k / 4] >> (8 * (k % 4)));
      } else {
        ub_read_word_.fill(0);
        for (uint32_t k = 0; k < bytes; ++k)
          ub_read_word_[k / 4] |= uint32_t(ub_[a + k]) << (8 * (k % 4));
        ub_read_due_ = true;
      }
    }
    if (m.acc_rd_valid_o && m.acc_rd_ready_i) {
      acc_read_row_ = acc_[m.acc_rd_addr_o];
      acc_read_due_ = true;
    }
    if (m.acc_wr_valid_o && m.acc_wr_ready_i) {
      for (int w = 0; w < kN; ++w) acc_[m.acc_wr_addr_o][w] = m.acc_wr_data_o[w];
    }
    sim_.tick();
  }

  // Offers the instructions back to back (each as soon as the one before is taken: the unit
  // takes it at the edge where taken_ is set) and runs until the unit is idle again; returns
  // the cycles taken.
  uint64_t stream(const std::vector<std::pair<uint32_t, uint32_t>>& prog) {
    auto& m = sim_.top();
    const uint64_t start = sim_.cycle();
    for (const auto& [w0, w1] : prog) {
      m.instr_valid_i = 1;
      m.instr_i = {};
      m.instr_i[0] = w0;
      m.instr_i[1] = w1;
      for (int guard = 0;; ++guard) {
        cycle();
        if (taken_) break;
        if (guard > 1000) {
          ADD_FAILURE() << "instruction never taken";
          m.instr_valid_i = 0;
          return 0;
        }
      }
    }
    m.instr_valid_i = 0;
    for (int guard = 0; guard < 10000; ++guard) {
      sim_.eval();
      if (m.idle_o) break;
      cycle();
    }
    return sim_.cycle() - start;
  }
  // One instruction, run until the unit is idle again; returns the cycles taken.
  uint64_t exec(uint32_t w0, uint32_t w1 = 0) { return stream({{w0, w1}}); }
  void put_vec(uint32_t addr, const Vec& v) { std::memcpy(&ub_[addr], v.data(), 4 * kN); }
  Vec get_vec(uint32_t addr) const {
    Vec v;
    std::memcpy(v.data(), &ub_[addr], 4 * kN);
    return v;
  }
  static uint32_t ld(int kind, int vd) { return isa::OP_VPU_LD | kind << 8 | vd << 16; }
  static uint32_t st(int kind, int vs) { return isa::OP_VPU_ST | kind << 8 | vs << 20; }
  static uint32_t vop(uint32_t f, int vd, int va, int vb, int vc) {
    return isa::OP_VPU_OP | f << 8 | vd << 16 | va << 20 | vb << 24 | uint32_t(vc) << 28;
  }

  // Runs funct on a, b, c through UB and registers; returns vd.
  // d goes to v5 (max4 / argmax4 with imm 5 read it).
  Vec run_op(uint32_t funct, const Vec& a, const Vec& b, const Vec& c, uint32_t imm = 0,
             const Vec& d = {}) {
    put_vec(0, a);
    put_vec(64, b);
    put_vec(128, c);
    put_vec(256, d);
    exec(ld(0, 1), 0);
    exec(ld(0, 2), 64);
    exec(ld(0, 3), 128);
    exec(ld(0, 5), 256);
    exec(vop(funct, 4, 1, 2, 3), imm);
    exec(st(0, 4), 192);
    return get_vec(192);
  }

  uint32_t random_operand() {
    static const std::vector<uint32_t> specials = test::fp32_specials();
    switch (rng_() % 4) {
      case 0:
        return specials[rng_() % specials.size()];
      case 1:
        return static_cast<uint32_t>(rng_());
      case 2:
        return fp::bits(static_cast<float>(static_cast<int32_t>(rng_() % 2001) - 1000) / 8);
      default:
        return static_cast<uint32_t>(static_cast<int32_t>(rng_() % 200001) - 100000);
    }
  }

  SimCtrl<Vtpu_vpu_n4> sim_;
  std::mt19937_64 rng_;
  std::vector<uint8_t> ub_;
  std::vector<std::array<uint32_t, kN>> acc_;
  int grant_pct_ = 60;
  bool ub_read_due_ = false, acc_read_due_ = false, taken_ = false;
  Vec ub_read_word_{}, acc_read_row_{};
};

// Every funct through the whole unit (loads, the op, a store). The element-wise functs also
// meet 10^6 random vectors each through tpu_vpu_lane (test_vpu_lane) and div/sqrt through
// tpu_fp_divsqrt (test_fp_divsqrt); the cross-lane functs (rsum, rmax, bcast) exist only here,
// so they get 10^6 random vectors each (TESSERA_FP_VECTORS scales both counts).
TEST_F(Vpu, EveryFunctMatchesTheHostLaneByLane) {
  grant_pct_ = 100;  // back-pressure is the subject of the load/store tests
  for (uint32_t f = 0; f < isa::VF_COUNT; ++f) {
    const bool cross_lane = f == isa::VF_RSUM || f == isa::VF_RMAX || f == isa::VF_BCAST;
    const uint64_t per_funct =
        cross_lane ? test::vector_count(1000000) : test::vector_count(1000000) / 50 / kN;
    uint64_t bad = 0;
    for (uint64_t i = 0; i < per_funct && bad < 5; ++i) {
      Vec a, b, c;
      for (int l = 0; l < kN; ++l) {
        a[l] = random_operand();
        b[l] = random_operand();
        c[l] = rng_() % 2 ? 0 : static_cast<uint32_t>(rng_());
      }
      uint32_t imm = 0;  // the funct's legal range (docs/isa.md)
      if (f == isa::VF_BCAST) imm = static_cast<uint32_t>(rng_() % kN);
      if (f == isa::VF_SELEQ || f == isa::VF_SELNE || f == isa::VF_SELLT)
        imm = static_cast<uint32_t>(rng_());
      if (f == isa::VF_BFX) imm = static_cast<uint32_t>(rng_() % 1024);
      if (f == isa::VF_SHLOR) imm = static_cast<uint32_t>(rng_() % 32);
      if (f == isa::VF_SELEQH) {  // a bf16 imm; equal halves in some lanes
        imm = static_cast<uint32_t>(rng_() % 65536);
        for (int l = 0; l < kN; ++l) {
          const uint32_t same[] = {0, 0xFFFFu, 0xFFFF0000u, 0xFFFFFFFFu};
          const uint32_t m = same[rng_() % 4];
          b[l] = (b[l] & ~m) | (a[l] & m);
        }
      }
      Vec d{}, x{};  // v5, and the register max4 / argmax4 read as their fourth operand
      for (int l = 0; l < kN; ++l) d[l] = rng_() % 2 ? a[l] : random_operand();
      if (f == isa::VF_MAX4 || f == isa::VF_ARGMAX4) {
        const uint32_t regs[] = {1, 2, 3, 5};
        imm = regs[rng_() % 4];
        x = imm == 1 ? a : imm == 2 ? b : imm == 3 ? c : d;
      }
      const Vec got = run_op(f, a, b, c, imm, d);
      const Vec want = reference(f, a, b, c, imm, x);
      for (int l = 0; l < kN; ++l) {
        if (got[l] != want[l] && bad++ < 5) {
          ADD_FAILURE() << "funct " << f << " lane " << l << ": a " << std::hex << a[l] << " b "
                        << b[l] << " c " << c[l] << " -> got " << got[l] << ", expected "
                        << want[l];
        }
      }
    }
  }
}

// The tree order is architectural: a sum whose value depends on the order.
TEST_F(Vpu, RsumUsesThePairwiseTree) {
  const Vec a = {fp::bits(1e8f), fp::bits(1.0f), fp::bits(-1e8f), fp::bits(1.0f)};
  const Vec got = run_op(isa::VF_RSUM, a, {}, {});
  // (1e8 + 1) + (-1e8 + 1) = 1e8 + (-1e8) = 0 in fp32; a sequential sum gives 1.
  EXPECT_EQ(got[0], fp::add(fp::add(a[0], a[1]), fp::add(a[2], a[3])));
  EXPECT_EQ(fp::f32(got[0]), 0.0f);
}

TEST_F(Vpu, LoadsAndStoresOfEveryKind) {
  Vec a;
  for (auto& x : a) x = random_operand();
  put_vec(256, a);
  exec(ld(0, 5), 256);
  exec(st(1, 5), 512);  // bf16, RNE narrowing, 2N bytes
  for (int l = 0; l < kN; ++l) {
    uint16_t h;
    std::memcpy(&h, &ub_[512 + 2 * l], 2);
    EXPECT_EQ(h, fp::fp32_to_bf16(a[l])) << "lane " << l;
  }
  exec(ld(1, 6), 512);  // widen back
  exec(st(2, 6), 7);    // to ACC row 7
  for (int l = 0; l < kN; ++l) {
    EXPECT_EQ(acc_[7][l], uint32_t(fp::fp32_to_bf16(a[l])) << 16) << "lane " << l;
  }
  acc_[9] = a;
  exec(ld(2, 7), 9);
  exec(st(0, 7), 1024);
  EXPECT_EQ(get_vec(1024), a);
  exec(isa::OP_VPU_LI | 8 << 16, 0xDEADBEEF);
  exec(st(0, 8), 2048);
  EXPECT_EQ(get_vec(2048), (Vec{0xDEADBEEF, 0xDEADBEEF, 0xDEADBEEF, 0xDEADBEEF}));
}

TEST_F(Vpu, DivideTakesItsFixedLatencyAndClearZeroes) {
  grant_pct_ = 100;
  exec(isa::OP_VPU_LI | 1 << 16, fp::bits(1.0f));
  exec(isa::OP_VPU_LI | 2 << 16, fp::bits(3.0f));
  const uint64_t t = exec(vop(isa::VF_DIV, 3, 1, 2, 0));
  exec(vop(isa::VF_SQRT, 4, 2, 0, 0));
  const uint64_t t2 = exec(vop(isa::VF_SQRT, 4, 2, 0, 0));
  EXPECT_EQ(t, t2) << "div and sqrt take the same fixed time";
  std::cout << "VPU div/sqrt: " << t << " cycles from issue to idle\n";
  exec(st(0, 3), 0);
  EXPECT_EQ(get_vec(0)[2], fp::div(fp::bits(1.0f), fp::bits(3.0f)));
  auto& m = sim_.top();
  m.clear_i = 1;
  sim_.tick();
  m.clear_i = 0;
  exec(st(0, 3), 0);
  EXPECT_EQ(get_vec(0), (Vec{0, 0, 0, 0})) << "clear_i zeroes every register";
}

// Div and sqrt run in the background: instructions are streamed back to back (each offered as
// soon as the one before is taken), so whatever follows a divide and does not touch its
// destination register goes ahead, and a reader or writer of it is held by the scoreboard.
// Random programs over six registers of li / add / mul / div / sqrt / loads / stores, under
// random grants; every register and every stored vector against the same program run in
// order on the host's IEEE arithmetic. And the overlap itself: four independent instructions
// issued behind a divide finish before it does.
TEST_F(Vpu, DivideRunsInTheBackgroundBehindAScoreboard) {
  grant_pct_ = 100;
  const uint64_t alone =
      stream({{isa::OP_VPU_LI | 1 << 16, fp::bits(2.0f)}, {vop(isa::VF_DIV, 2, 1, 1, 0), 0}});
  const uint64_t behind = stream({{isa::OP_VPU_LI | 1 << 16, fp::bits(2.0f)},
                                  {vop(isa::VF_DIV, 2, 1, 1, 0), 0},
                                  {vop(isa::VF_ADD, 3, 1, 1, 0), 0},
                                  {vop(isa::VF_MUL, 4, 1, 1, 0), 0},
                                  {isa::OP_VPU_LI | 5 << 16, 7},
                                  {vop(isa::VF_SUB, 6, 1, 3, 0), 0}});
  EXPECT_EQ(behind, alone) << "independent instructions overlap the divide";
  // a reader of the divide's register waits, then takes the quotient through the bypass
  stream({{isa::OP_VPU_LI | 1 << 16, fp::bits(2.0f)},
          {vop(isa::VF_DIV, 2, 1, 1, 0), 0},
          {vop(isa::VF_ADD, 3, 2, 1, 0), 0}});
  exec(st(0, 3), 3072);
  EXPECT_EQ(get_vec(3072)[0], fp::add(fp::div(fp::bits(2.0f), fp::bits(2.0f)), fp::bits(2.0f)));

  // (max4 reads a fourth register through imm: the scoreboard must hold it behind a divide too)
  const uint32_t functs[] = {isa::VF_ADD, isa::VF_MUL, isa::VF_DIV,
                             isa::VF_SQRT, isa::VF_SUB, isa::VF_MAX4};
  for (int trial = 0; trial < 40; ++trial) {
    grant_pct_ = 30 + static_cast<int>(rng_() % 71);
    std::array<Vec, 16> reg{};
    for (int r = 1; r <= 6; ++r) {  // start from known registers (the unit's from earlier trials)
      Vec v;
      for (auto& x : v) x = random_operand();
      stream({{isa::OP_VPU_LI | r << 16, v[0]}});
      reg[r].fill(v[0]);
    }
    std::vector<std::pair<uint32_t, uint32_t>> prog;
    std::vector<uint8_t> ub_ref = ub_;
    for (int i = 0; i < 60; ++i) {
      const int vd = 1 + static_cast<int>(rng_() % 6), va = 1 + static_cast<int>(rng_() % 6),
                vb = 1 + static_cast<int>(rng_() % 6);
      const uint32_t addr = 64 * static_cast<uint32_t>(rng_() % 32);
      switch (rng_() % 8) {
        case 0: {  // li
          const uint32_t x = random_operand();
          prog.push_back({isa::OP_VPU_LI | vd << 16, x});
          reg[vd].fill(x);
          break;
        }
        case 1: {  // fp32 load
          prog.push_back({ld(0, vd), addr});
          std::memcpy(reg[vd].data(), &ub_ref[addr], 4 * kN);
          break;
        }
        case 2:  // fp32 store
          prog.push_back({st(0, va), addr});
          std::memcpy(&ub_ref[addr], reg[va].data(), 4 * kN);
          break;
        default: {
          const uint32_t f = functs[rng_() % 6];
          if (f == isa::VF_MAX4) {
            const int vc = 1 + static_cast<int>(rng_() % 6), vx = 1 + static_cast<int>(rng_() % 6);
            prog.push_back({vop(f, vd, va, vb, vc), static_cast<uint32_t>(vx)});
            reg[vd] = reference(f, reg[va], reg[vb], reg[vc], static_cast<uint32_t>(vx), reg[vx]);
            break;
          }
          prog.push_back({vop(f, vd, va, vb, 0), 0});
          reg[vd] = reference(f, reg[va], reg[vb], Vec{}, 0);
          break;
        }
      }
    }
    stream(prog);
    for (int r = 1; r <= 6; ++r) {
      stream({{st(0, r), 2048 + 64 * r}});
      std::memcpy(&ub_ref[2048 + 64 * r], reg[r].data(), 4 * kN);
    }
    for (size_t k = 0; k < ub_.size(); k += 4 * kN)
      ASSERT_TRUE(std::equal(ub_.begin() + k, ub_.begin() + k + 4 * kN, ub_ref.begin() + k))
          << "trial " << trial << ", the vector at UB " << k << " (seed " << test::test_seed()
          << ")";
  }
}

}  // namespace
}  // namespace tessera
