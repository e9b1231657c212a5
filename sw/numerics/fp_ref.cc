#include "sw/numerics/fp_ref.h"

#include <cfenv>
#include <cmath>
#include <cstdio>

namespace tessera::fp {

uint32_t add(uint32_t a, uint32_t b) { return canonical(bits(f32(a) + f32(b))); }

uint32_t mul(uint32_t a, uint32_t b) { return canonical(bits(f32(a) * f32(b))); }

uint32_t div(uint32_t a, uint32_t b) {
  volatile float x = f32(a), y = f32(b);  // volatile: never folded or reassociated
  return canonical(bits(x / y));
}

uint32_t sqrt(uint32_t a) {
  volatile float x = f32(a);
  return canonical(bits(std::sqrt(static_cast<float>(x))));
}

uint32_t bf16_to_fp32(uint16_t a) {
  if (is_nan16(a)) return kFp32CanonicalNan;
  const bool neg = a & 0x8000u;
  const int exp = (a >> 7) & 0xFF;
  const int frac = a & 0x7F;
  double v;
  if (exp == 0xFF) {
    v = INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(static_cast<double>(frac), -126 - 7);  // subnormal: 0.frac * 2^-126
  } else {
    v = std::ldexp(static_cast<double>(128 + frac), exp - 127 - 7);
  }
  return bits(static_cast<float>(neg ? -v : v));  // exact: every bf16 value is an fp32 value
}

uint32_t bf16_mul(uint16_t a, uint16_t b) {
  return canonical(bits(f32(bf16_to_fp32(a)) * f32(bf16_to_fp32(b))));
}

uint16_t fp32_to_bf16(uint32_t a) {
  if (is_nan32(a)) return kBf16CanonicalNan;
  const uint16_t sign = static_cast<uint16_t>((a >> 16) & 0x8000u);
  const uint32_t mag = a & 0x7FFFFFFFu;
  if (mag >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7F80u);  // inf stays inf
  const uint16_t lo = static_cast<uint16_t>(mag >> 16);                  // truncation
  const uint16_t hi = static_cast<uint16_t>(lo + 1);                     // next up (maybe inf)
  const double x = std::fabs(static_cast<double>(f32(mag)));
  const double vlo = f32(static_cast<uint32_t>(lo) << 16);
  // The value after the largest finite bf16 is 2^128 for rounding purposes (IEEE overflow).
  const double vhi = (hi == 0x7F80u) ? std::ldexp(1.0, 128) : f32(static_cast<uint32_t>(hi) << 16);
  const double dlo = x - vlo, dhi = vhi - x;  // exact in double
  uint16_t r;
  if (dlo < dhi)
    r = lo;
  else if (dhi < dlo)
    r = hi;
  else
    r = (lo & 1u) ? hi : lo;
  return static_cast<uint16_t>(sign | r);
}

uint32_t mac(uint32_t psum, uint16_t act, uint16_t weight) {
  return add(psum, bf16_mul(act, weight));
}

bool host_keeps_subnormals() {
  volatile float tiny = f32(0x00000001u);  // smallest subnormal
  volatile float half = 0.5f;
  volatile float two = 2.0f;
  return bits(tiny * two) == 0x00000002u && bits(tiny * half) == 0u &&
         bits(f32(0x00800000u) * half) == 0x00400000u && std::fegetround() == FE_TONEAREST;
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}
std::string hex16(uint16_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04x", v);
  return buf;
}

}  // namespace tessera::fp
