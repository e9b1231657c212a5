// The arithmetic RTL (tpu_fpu: fp32 add, bf16 x bf16 -> fp32, fp32 x fp32, fp32 <-> bf16) against
// the host's IEEE arithmetic (sw/numerics/fp_ref.h): every special class against every other, and
// random vectors (TESSERA_FP_VECTORS, default 10^6 per operation). A mismatch prints the
// operands, the expected and the produced bits.
#include <gtest/gtest.h>

#include <cstdio>

#include "Vtpu_fpu.h"
#include "harness/sim_ctrl.h"
#include "sw/numerics/fp_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using fp::hex16;
using fp::hex32;

class Fpu : public ::testing::Test {
 protected:
  uint32_t add(uint32_t a, uint32_t b) {
    sim_->add_a_i = a;
    sim_->add_b_i = b;
    sim_.eval();
    return sim_->add_o;
  }
  uint32_t mul(uint16_t a, uint16_t b) {
    sim_->mul_a_i = a;
    sim_->mul_b_i = b;
    sim_.eval();
    return sim_->mul_o;
  }
  uint32_t fmul(uint32_t a, uint32_t b) {
    sim_->fmul_a_i = a;
    sim_->fmul_b_i = b;
    sim_.eval();
    return sim_->fmul_o;
  }
  void check_fmul(uint32_t a, uint32_t b) {
    const uint32_t want = fp::mul(a, b), got = fmul(a, b);
    if (want != got)
      mismatch(hex32(a) + " * " + hex32(b) + ": want " + hex32(want) + " got " + hex32(got));
  }
  uint16_t f2bf(uint32_t a) {
    sim_->f2bf_i = a;
    sim_.eval();
    return sim_->f2bf_o;
  }
  uint32_t bf2f(uint16_t a) {
    sim_->bf2f_i = a;
    sim_.eval();
    return sim_->bf2f_o;
  }
  // Records a mismatch; prints the first few in full.
  void mismatch(const std::string& what) {
    if (++mismatches_ <= 10) ADD_FAILURE() << what;
  }
  void expect_no_mismatch(uint64_t cases) {
    EXPECT_EQ(mismatches_, 0u) << mismatches_ << " of " << cases << " cases differ";
    std::cout << "[ vectors  ] " << cases << " cases, " << mismatches_ << " mismatches\n";
  }

  CombSim<Vtpu_fpu> sim_{test::current_test_name()};
  uint64_t mismatches_ = 0;
};

TEST_F(Fpu, HostArithmeticIsIeee) {
  ASSERT_TRUE(fp::host_keeps_subnormals())
      << "the host flushes subnormals or does not round to nearest: the reference is invalid";
}

TEST_F(Fpu, AddSpecialClassesPairwise) {
  const auto s = test::fp32_specials();
  for (uint32_t a : s) {
    for (uint32_t b : s) {
      const uint32_t want = fp::add(a, b), got = add(a, b);
      if (want != got)
        mismatch(hex32(a) + " + " + hex32(b) + ": want " + hex32(want) + " got " + hex32(got));
    }
  }
  expect_no_mismatch(s.size() * s.size());
}

TEST_F(Fpu, AddRandom) {
  test::Fp32Gen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t a = gen();
    uint32_t b = gen();
    // A quarter of the cases subtract nearly equal values (deep cancellation).
    if ((gen.rng()() & 3) == 0)
      b = (a ^ 0x80000000u) + static_cast<uint32_t>(gen.rng()() % 64) - 32;
    const uint32_t want = fp::add(a, b), got = add(a, b);
    if (want != got)
      mismatch(hex32(a) + " + " + hex32(b) + ": want " + hex32(want) + " got " + hex32(got));
  }
  expect_no_mismatch(n);
}

TEST_F(Fpu, AddRoundingTies) {
  // x + y where y sits exactly half an ulp of x away, and one ulp either side of that.
  test::Fp32Gen gen(test::test_seed());
  uint64_t cases = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t x = (gen.rng()() & 0x807FFFFFu) | ((30 + gen.rng()() % 200) << 23);
    const uint32_t half_ulp_exp = ((x >> 23) & 0xFF) - 24;
    for (int shift = 0; shift < 3; ++shift) {
      const uint32_t y0 =
          ((half_ulp_exp + shift) << 23) | ((x ^ 0x80000000u * (i & 1)) & 0x80000000u);
      for (int d = -1; d <= 1; ++d) {
        const uint32_t y = y0 + d;
        const uint32_t want = fp::add(x, y), got = add(x, y);
        ++cases;
        if (want != got)
          mismatch(hex32(x) + " + " + hex32(y) + ": want " + hex32(want) + " got " + hex32(got));
      }
    }
  }
  expect_no_mismatch(cases);
}

TEST_F(Fpu, Bf16MulSpecialClassesPairwise) {
  const auto s = test::bf16_specials();
  for (uint16_t a : s) {
    for (uint16_t b : s) {
      const uint32_t want = fp::bf16_mul(a, b), got = mul(a, b);
      if (want != got)
        mismatch(hex16(a) + " * " + hex16(b) + ": want " + hex32(want) + " got " + hex32(got));
    }
  }
  expect_no_mismatch(s.size() * s.size());
}

TEST_F(Fpu, Bf16MulRandom) {
  test::Bf16Gen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  for (uint64_t i = 0; i < n; ++i) {
    const uint16_t a = gen(), b = gen();
    const uint32_t want = fp::bf16_mul(a, b), got = mul(a, b);
    if (want != got)
      mismatch(hex16(a) + " * " + hex16(b) + ": want " + hex32(want) + " got " + hex32(got));
  }
  expect_no_mismatch(n);
}

TEST_F(Fpu, Bf16MulUnderflowRangeExhaustiveExponents) {
  // Every pair of exponents whose product lands in or below fp32's subnormal range, with
  // random significands and signs: the only place a bf16 product is rounded.
  test::Bf16Gen gen(test::test_seed());
  uint64_t cases = 0;
  for (int ea = 0; ea < 128; ++ea) {
    for (int eb = 0; eb < 128; ++eb) {
      if (ea + eb > 160) continue;
      for (int rep = 0; rep < 4; ++rep) {
        const uint16_t a = static_cast<uint16_t>((gen.rng()() & 0x807F) | (ea << 7));
        const uint16_t b = static_cast<uint16_t>((gen.rng()() & 0x807F) | (eb << 7));
        const uint32_t want = fp::bf16_mul(a, b), got = mul(a, b);
        ++cases;
        if (want != got)
          mismatch(hex16(a) + " * " + hex16(b) + ": want " + hex32(want) + " got " + hex32(got));
      }
    }
  }
  expect_no_mismatch(cases);
}

TEST_F(Fpu, Bf16MulAllSignificandsAtTheRangeEdges) {
  // Every significand pair (both signs of the result) for exponent pairs whose sum sits at an
  // edge of the product's range: both operands subnormal or nearly (the deepest leading-zero
  // counts), the edge below which the product rounds to zero, the edge of the normal range and
  // overflow to infinity.
  uint64_t cases = 0;
  for (int sum : {0, 1, 2, 3, 100, 101, 102, 103, 125, 126, 127, 128, 379, 380, 381, 382}) {
    for (int ea : {0, 1, sum / 2, sum - 1, sum}) {
      const int eb = sum - ea;
      if (ea < 0 || eb < 0 || ea > 254 || eb > 254) continue;
      for (int ma = 0; ma < 128; ++ma) {
        for (int mb = 0; mb < 128; ++mb) {
          const uint16_t a = static_cast<uint16_t>((ea << 7) | ma);
          const uint16_t b = static_cast<uint16_t>(((ma & 1) << 15) | (eb << 7) | mb);
          const uint32_t want = fp::bf16_mul(a, b), got = mul(a, b);
          ++cases;
          if (want != got)
            mismatch(hex16(a) + " * " + hex16(b) + ": want " + hex32(want) + " got " + hex32(got));
        }
      }
    }
  }
  expect_no_mismatch(cases);
}

TEST_F(Fpu, Fp32MulSpecialClassesPairwise) {
  const auto s = test::fp32_specials();
  for (uint32_t a : s) {
    for (uint32_t b : s) check_fmul(a, b);
  }
  expect_no_mismatch(s.size() * s.size());
}

TEST_F(Fpu, Fp32MulRandom) {
  // Biased patterns (Fp32Gen) for half the cases, uniform bit patterns for the other half.
  test::Fp32Gen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  for (uint64_t i = 0; i < n; ++i) {
    const bool uniform = i & 1;
    const uint32_t a = uniform ? static_cast<uint32_t>(gen.rng()()) : gen();
    const uint32_t b = uniform ? static_cast<uint32_t>(gen.rng()()) : gen();
    check_fmul(a, b);
  }
  expect_no_mismatch(n);
}

TEST_F(Fpu, Fp32MulSubnormalResults) {
  // Exponent pairs whose product lands in the subnormal range, at the 2^-126 boundary or just
  // below the smallest subnormal (exponent sums 80 .. 130 cover product exponents -174 .. -124),
  // with random significands, signs and subnormal operands; a quarter of the cases use
  // significands with few set bits, so the product is exact or sits exactly on a rounding tie,
  // and half of those move one operand by an ulp (a near tie decided by the far sticky bits).
  test::Fp32Gen gen(test::test_seed());
  auto& rng = gen.rng();
  const uint64_t n = test::vector_count(1000000);
  for (uint64_t i = 0; i < n; ++i) {
    const int sum = 80 + static_cast<int>(rng() % 51);
    const int ea = static_cast<int>(rng() % (sum + 1 < 254 ? sum + 1 : 254));
    const int eb = sum - ea;
    uint32_t fa = static_cast<uint32_t>(rng()) & 0x7FFFFFu;
    uint32_t fb = static_cast<uint32_t>(rng()) & 0x7FFFFFu;
    if ((rng() & 3) == 0) {  // short significands: exact products, exact ties, near ties
      fa &= 0x7F0000u << (rng() % 8);
      fb &= 0x700000u;
      if (fa == 0 && ea == 0) fa = 1u << (rng() % 23);
      // One ulp off a short significand moves the product a hair off its tie: the rounding
      // then depends only on the sticky bits far below the guard.
      if (rng() & 1) fa = (fa + ((rng() & 1) ? 1u : 0x7FFFFFu)) & 0x7FFFFFu;
    }
    if (ea == 0 && fa == 0) fa = 1;
    if (eb == 0 && fb == 0) fb = 1;
    const uint32_t a =
        (static_cast<uint32_t>(rng() & 1) << 31) | (static_cast<uint32_t>(ea) << 23) | fa;
    const uint32_t b =
        (static_cast<uint32_t>(rng() & 1) << 31) | (static_cast<uint32_t>(eb) << 23) | fb;
    check_fmul(a, b);
  }
  expect_no_mismatch(n);
}

TEST_F(Fpu, Fp32MulRoundingTiesAndOverflow) {
  // Products of a power of two with values one ulp apart around the tie points of the
  // subnormal range (x * 2^-k with the shifted-out bits exactly half), and around the overflow
  // threshold (0x7F7FFFFF * (1 + ulp), max * 2, (2 - ulp) * 2^127).
  test::Fp32Gen gen(test::test_seed());
  uint64_t cases = 0;
  for (int k = 1; k <= 30; ++k) {
    for (int i = 0; i < 2000; ++i) {
      const uint32_t x =
          (static_cast<uint32_t>(gen.rng()()) & 0x807FFFFFu) | (1u << 23) * (1 + i % 3);
      const uint32_t p = static_cast<uint32_t>(127 - k - (i % 3)) << 23;  // 2^-(k + i%3)
      for (int d = -1; d <= 1; ++d) {
        check_fmul(x + d, p);
        ++cases;
      }
    }
  }
  for (uint32_t a : {0x7F7FFFFFu, 0x7F7FFFFEu, 0x7F000000u, 0x3F800000u, 0x3F800001u, 0x3FFFFFFFu,
                     0x40000000u, 0x00800000u, 0x007FFFFFu, 0x00000001u}) {
    for (uint32_t b : {0x3F800000u, 0x3F800001u, 0x3F7FFFFFu, 0x40000000u, 0x3FFFFFFFu, 0x7F000000u,
                       0x7E800000u, 0x00800000u, 0x34000000u, 0x33800000u}) {
      for (uint32_t sign : {0u, 0x80000000u}) {
        check_fmul(a | sign, b);
        check_fmul(b, a | sign);
        cases += 2;
      }
    }
  }
  expect_no_mismatch(cases);
}

TEST_F(Fpu, Fp32ToBf16SpecialsAndTies) {
  uint64_t cases = 0;
  for (uint32_t a : test::fp32_specials()) {
    // the value itself and the patterns one below, at and one above the bf16 rounding tie
    for (uint32_t v : {a, (a & 0xFFFF0000u) | 0x7FFFu, (a & 0xFFFF0000u) | 0x8000u,
                       (a & 0xFFFF0000u) | 0x8001u}) {
      const uint16_t want = fp::fp32_to_bf16(v), got = f2bf(v);
      ++cases;
      if (want != got)
        mismatch("f2bf " + hex32(v) + ": want " + hex16(want) + " got " + hex16(got));
    }
  }
  expect_no_mismatch(cases);
}

TEST_F(Fpu, Fp32ToBf16Random) {
  test::Fp32Gen gen(test::test_seed());
  const uint64_t n = test::vector_count(1000000);
  for (uint64_t i = 0; i < n; ++i) {
    uint32_t a = gen();
    if ((gen.rng()() & 3) == 0) a = (a & 0xFFFF0000u) | (0x7FFFu + gen.rng()() % 3);  // near ties
    const uint16_t want = fp::fp32_to_bf16(a), got = f2bf(a);
    if (want != got) mismatch("f2bf " + hex32(a) + ": want " + hex16(want) + " got " + hex16(got));
  }
  expect_no_mismatch(n);
}

TEST_F(Fpu, Bf16ToFp32Exhaustive) {
  for (uint32_t a = 0; a <= 0xFFFF; ++a) {
    const uint32_t want = fp::bf16_to_fp32(static_cast<uint16_t>(a));
    const uint32_t got = bf2f(static_cast<uint16_t>(a));
    if (want != got)
      mismatch("bf2f " + hex16(uint16_t(a)) + ": want " + hex32(want) + " got " + hex32(got));
  }
  expect_no_mismatch(65536);
}

}  // namespace
}  // namespace tessera
