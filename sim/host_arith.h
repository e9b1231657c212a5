// The host-arithmetic simulation flavour's datapath functions (docs/numerics.md, "Two builds of
// the same chip"). A model verilated with +define+TPU_SIM_HOST_ARITH computes tpu_fp_pkg's
// fp32_add, bf16_mul, fp32_mul and mac with these instead of the word-level RTL: every register,
// pipeline stage and handshake is the RTL's, only the combinational arithmetic between them is
// the host's IEEE-754 binary32 unit. Bit-exact by construction where the contract and IEEE agree:
// round-to-nearest-even (the C++ default environment), subnormals kept (no FTZ/DAZ:
// host_arith_environment_ok checks), a bf16 widened to fp32 by a shift (exact), the MAC's two
// roundings as two statements (the build compiles with -ffp-contract=off, and the pragma below
// holds it here too), and every NaN result mapped to the canonical NaN. The tests
// (test_host_arith) prove the flavour bit-identical to the RTL on vectors and on whole training
// steps. Included into every verilated model's C++ (sim/CMakeLists.txt); the pure-RTL models do
// not call it.
#pragma once

#include <cfenv>
#include <cstdint>
#include <cstring>

#include "tessera/chip_params.h"

#if defined(__clang__)
#pragma clang fp contract(off)
#endif

namespace tessera_host_arith {

inline float as_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint32_t as_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}
// Any NaN -> the canonical NaN (the host returns one of the operand NaNs, quieted).
inline uint32_t canonical(uint32_t b) {
  return ((b & 0x7F800000u) == 0x7F800000u && (b & 0x007FFFFFu))
             ? tessera::chip_params::FP32_CANON_NAN
             : b;
}

// True when the floating-point environment is the one the contract needs: round to nearest
// even and subnormal results and operands kept. A model of this flavour must not run otherwise
// (driver::make_rtl_device refuses).
inline bool environment_ok() {
  if (std::fegetround() != FE_TONEAREST) return false;
  volatile float smallest = as_float(0x00000001u);  // 2^-149
  volatile float half = 0.5f, two = 2.0f;
  const float x = smallest * two;   // 2^-148: a subnormal result
  const float y = smallest * half;  // 2^-150: a tie, rounds to even (0)
  return as_bits(x) == 0x00000002u && as_bits(y) == 0u && as_bits(smallest + smallest) == 2u;
}

}  // namespace tessera_host_arith

// The functions the flavour's $c calls name (tpu_fp_pkg.sv): raw bit patterns in and out.
static inline uint32_t tpu_host_fp32_add(uint32_t a, uint32_t b) {
  using namespace tessera_host_arith;
  const float s = as_float(a) + as_float(b);
  return canonical(as_bits(s));
}
static inline uint32_t tpu_host_fp32_mul(uint32_t a, uint32_t b) {
  using namespace tessera_host_arith;
  const float p = as_float(a) * as_float(b);
  return canonical(as_bits(p));
}
static inline uint32_t tpu_host_bf16_mul(uint32_t a, uint32_t b) {
  using namespace tessera_host_arith;
  const float p = as_float((a & 0xFFFFu) << 16) * as_float((b & 0xFFFFu) << 16);
  return canonical(as_bits(p));
}
// psum + act * weight: the product rounded to fp32 (exact in range), then the sum rounded.
// A NaN anywhere propagates through the add, so one canonicalisation at the end suffices.
static inline uint32_t tpu_host_mac(uint32_t psum, uint32_t act, uint32_t weight) {
  using namespace tessera_host_arith;
  const float p = as_float((act & 0xFFFFu) << 16) * as_float((weight & 0xFFFFu) << 16);
  const float s = as_float(psum) + p;
  return canonical(as_bits(s));
}
