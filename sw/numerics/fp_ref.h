// Reference IEEE-754 arithmetic computed with the host's own float unit: the independent
// oracle for the RTL's bf16/fp32 datapaths (contract 1, docs/numerics.md). Values travel as
// raw bit patterns; every NaN result is mapped to the canonical NaN, as the RTL produces.
// The build compiles everything with -ffp-contract=off and without fast-math; the host must
// not flush subnormals (host_keeps_subnormals() checks the floating-point environment).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "tessera/chip_params.h"

namespace tessera::fp {

constexpr uint32_t kFp32CanonicalNan = chip_params::FP32_CANON_NAN;
constexpr uint16_t kBf16CanonicalNan = chip_params::BF16_CANON_NAN;

inline float f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
inline bool is_nan32(uint32_t b) { return (b & 0x7F800000u) == 0x7F800000u && (b & 0x7FFFFFu); }
inline bool is_nan16(uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x7Fu); }
inline uint32_t canonical(uint32_t b) { return is_nan32(b) ? kFp32CanonicalNan : b; }

// fp32 + fp32 with the host's adder.
uint32_t add(uint32_t a, uint32_t b);
// fp32 * fp32 with the host's multiplier.
uint32_t mul(uint32_t a, uint32_t b);
// fp32 / fp32 with the host's divider (x / 0 = +-inf, 0 / 0 and inf / inf = NaN).
uint32_t div(uint32_t a, uint32_t b);
// Square root of an fp32 with std::sqrt on float (sqrt(-0) = -0, negative -> NaN).
uint32_t sqrt(uint32_t a);
// bf16 -> fp32: the value rebuilt from its fields with ldexp (independent of bit shifting).
uint32_t bf16_to_fp32(uint16_t a);
// bf16 * bf16 -> fp32: both widened, multiplied by the host, rounded once to fp32.
uint32_t bf16_mul(uint16_t a, uint16_t b);
// fp32 -> bf16 round-to-nearest-even: picks the nearer of the two neighbouring bf16 values by
// exact distances in double (ties to the even one; beyond the largest finite, inf).
uint16_t fp32_to_bf16(uint32_t a);
// The architectural MAC of one processing element: psum + a * w, two roundings.
uint32_t mac(uint32_t psum, uint16_t act, uint16_t weight);

// True when the FPU environment keeps subnormals (no FTZ/DAZ) and rounds to nearest.
bool host_keeps_subnormals();

std::string hex32(uint32_t v);
std::string hex16(uint16_t v);

}  // namespace tessera::fp
