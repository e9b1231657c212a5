// The IEEE reference itself (sw/numerics/fp_ref.h): known values from the standard, and the
// fp32 -> bf16 distance-based rounding against the usual integer rounding formula, two
// independent derivations that must agree on every class.
#include <gtest/gtest.h>

#include <cmath>

#include "sw/numerics/fp_ref.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

TEST(FpRef, HostKeepsSubnormalsAndRoundsToNearest) { EXPECT_TRUE(fp::host_keeps_subnormals()); }

TEST(FpRef, KnownValues) {
  EXPECT_EQ(fp::add(fp::bits(1.0f), fp::bits(2.0f)), fp::bits(3.0f));
  EXPECT_EQ(fp::add(0x80000000u, 0x80000000u), 0x80000000u);  // -0 + -0 = -0
  EXPECT_EQ(fp::add(0x80000000u, 0x00000000u), 0x00000000u);  // -0 + +0 = +0 (RNE)
  EXPECT_EQ(fp::add(0x7F800000u, 0xFF800000u), fp::kFp32CanonicalNan);
  EXPECT_EQ(fp::add(0x7F800001u, 0x3F800000u), fp::kFp32CanonicalNan);
  EXPECT_EQ(fp::add(0x00000001u, 0x00000001u), 0x00000002u);  // subnormals kept
  EXPECT_EQ(fp::add(0x3F800000u, 0x33800000u), 0x3F800000u);  // 1 + 2^-24: tie to even
  EXPECT_EQ(fp::add(0x3F800001u, 0x33800000u), 0x3F800002u);  // tie, odd -> up
  EXPECT_EQ(fp::bf16_mul(0x3FC0, 0x4000), fp::bits(3.0f));    // 1.5 * 2
  EXPECT_EQ(fp::bf16_mul(0x0080, 0x3F00), 0x00400000u);       // 2^-126 * 0.5: subnormal
  EXPECT_EQ(fp::bf16_mul(0x7F80, 0x0000), fp::kFp32CanonicalNan);
  EXPECT_EQ(fp::bf16_mul(0x7F7F, 0x7F7F), 0x7F800000u);  // overflow to inf
  EXPECT_EQ(fp::bf16_to_fp32(0x0001), 0x00010000u);      // bf16 subnormal is exact
  EXPECT_EQ(fp::bf16_to_fp32(0xFF81), fp::kFp32CanonicalNan);
  EXPECT_EQ(fp::fp32_to_bf16(0x3F808000u), 0x3F80);  // tie to even (down)
  EXPECT_EQ(fp::fp32_to_bf16(0x3F818000u), 0x3F82);  // tie to even (up)
  EXPECT_EQ(fp::fp32_to_bf16(0x3F808001u), 0x3F81);
  EXPECT_EQ(fp::fp32_to_bf16(0x7F7FFFFFu), 0x7F80);  // rounds past max: inf
  EXPECT_EQ(fp::fp32_to_bf16(0xFFC12345u), fp::kBf16CanonicalNan);
}

TEST(FpRef, Bf16RoundingAgreesWithIntegerFormula) {
  test::Fp32Gen gen(test::test_seed());
  auto formula = [](uint32_t a) -> uint16_t {
    if (fp::is_nan32(a)) return fp::kBf16CanonicalNan;
    return static_cast<uint16_t>((a + 0x7FFFu + ((a >> 16) & 1u)) >> 16);
  };
  for (int i = 0; i < 200000; ++i) {
    uint32_t a = gen();
    if (i & 1) a = (a & 0xFFFF0000u) | (0x7FFFu + i % 3);
    ASSERT_EQ(fp::fp32_to_bf16(a), formula(a)) << fp::hex32(a);
  }
}

}  // namespace
}  // namespace tessera
