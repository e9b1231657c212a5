// The vector unit's element-wise arithmetic (tpu_vpu_pkg::lane_op through the combinational top
// tpu_vpu_lane — the function tpu_vpu applies to every lane) against the host: every special
// class pairwise and >= 10^6 random vectors per funct (TESSERA_FP_VECTORS raises it), operands
// drawn from random bit patterns, every exponent, the int32 range and conversion boundaries.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "Vtpu_vpu_lane.h"
#include "harness/sim_ctrl.h"
#include "tests/common/test_util.h"
#include "tests/common/vpu_ref.h"

namespace tessera {
namespace {

const uint32_t kFuncts[] = {
    isa::VF_ADD,   isa::VF_SUB,   isa::VF_MUL,   isa::VF_MIN,   isa::VF_MAX, isa::VF_CMPEQ,
    isa::VF_CMPLT, isa::VF_CMPLE, isa::VF_SEL,   isa::VF_I2F,   isa::VF_F2I, isa::VF_F2BF,
    isa::VF_IADD,  isa::VF_IAND,  isa::VF_IOR,   isa::VF_IXOR,  isa::VF_SHL, isa::VF_SHR,
    isa::VF_SRA,   isa::VF_SELEQ, isa::VF_SELNE, isa::VF_SELLT, isa::VF_BFX, isa::VF_SHLOR,
    isa::VF_SELEQH, isa::VF_ADDMAX, isa::VF_MAX4, isa::VF_ARGMAX4};

class VpuLane : public ::testing::TestWithParam<uint32_t> {};

TEST_P(VpuLane, MatchesTheHost) {
  const uint32_t f = GetParam();
  CombSim<Vtpu_vpu_lane> sim(test::current_test_name());
  auto& m = sim.top();
  std::mt19937_64 rng(test::test_seed() + f);
  uint64_t bad = 0, n = 0;
  // imm: any value for the selects, the legal ranges for bfx (10 bits), shlor (5 bits) and
  // seleqh (a bf16).
  auto draw_imm = [&]() -> uint32_t {
    if (f == isa::VF_BFX) return static_cast<uint32_t>(rng() % 1024);
    if (f == isa::VF_SELEQH) return static_cast<uint32_t>(rng() % 65536);
    if (f == isa::VF_MAX4 || f == isa::VF_ARGMAX4) return static_cast<uint32_t>(rng() % 16);
    if (f == isa::VF_SHLOR) return static_cast<uint32_t>(rng() % 32);
    return static_cast<uint32_t>(rng());
  };
  // d: the fourth operand of max4 / argmax4 (the register imm names): often equal to one of the
  // others, so that ties meet the first-position rule.
  auto check = [&](uint32_t a, uint32_t b, uint32_t c) {
    const uint32_t imm = draw_imm();
    const uint32_t pick[] = {a, b, c, static_cast<uint32_t>(rng())};
    const uint32_t d = pick[rng() % 4];
    m.funct_i = static_cast<uint8_t>(f);
    m.a_i = a;
    m.b_i = b;
    m.c_i = c;
    m.x_i = d;
    m.imm_i = imm;
    sim.eval();
    const uint32_t want = test::vpu_lane_ref(f, a, b, c, d, imm);
    ++n;
    if (m.r_o != want && bad++ < 5) {
      ADD_FAILURE() << "funct " << f << std::hex << ": a " << a << " b " << b << " c " << c
                    << " d " << d << " imm " << imm << " -> got " << m.r_o << ", expected "
                    << want;
    }
  };
  const std::vector<uint32_t> sp = test::fp32_specials();
  for (uint32_t a : sp) {
    for (uint32_t b : sp) check(a, b, b);
  }
  const uint64_t count = test::vector_count(1000000);
  for (uint64_t i = 0; i < count && bad < 5; ++i) {
    uint32_t a, b;
    switch (i % 4) {
      case 0:  // random bit patterns
        a = static_cast<uint32_t>(rng());
        b = static_cast<uint32_t>(rng());
        break;
      case 1:  // nearby magnitudes (cancellation, ties in min/max/compare)
        a = static_cast<uint32_t>(rng());
        b = a ^ static_cast<uint32_t>(rng() % 64) ^ ((rng() % 2) << 31);
        break;
      case 2:  // int32 near conversion boundaries, and small shift counts
        a = static_cast<uint32_t>(static_cast<int32_t>(rng() % 4000001) - 2000000) *
            ((rng() % 4 == 0) ? 1024u : 1u);
        b = static_cast<uint32_t>(rng() % 40);
        break;
      default:  // floats around the int32 range and integers (f2i, i2f)
        a = fp::bits(static_cast<float>(
            std::ldexp((rng() % 2000000) / 1e6 - 1.0, static_cast<int>(rng() % 34))));
        b = fp::bits(static_cast<float>(static_cast<int32_t>(rng())));
    }
    if (f == isa::VF_SELEQH) {  // equal halves: none, either or both
      const uint32_t same[] = {0, 0xFFFFu, 0xFFFF0000u, 0xFFFFFFFFu};
      const uint32_t m = same[rng() % 4];
      b = (b & ~m) | (a & m);
    }
    check(a, b, (rng() % 2) ? 0 : static_cast<uint32_t>(rng()));
  }
  EXPECT_EQ(bad, 0u) << bad << " mismatches in " << n << " vectors";
}

INSTANTIATE_TEST_SUITE_P(Functs, VpuLane, ::testing::ValuesIn(kFuncts));

}  // namespace
}  // namespace tessera
