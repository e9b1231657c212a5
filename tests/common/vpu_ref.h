// The vector unit's lane operations written from docs/isa.md with the host's IEEE arithmetic
// (sw/numerics/fp_ref) and C++ integer arithmetic: the independent reference the VPU tests compare
// the RTL with (tests/rtl/test_vpu.cc, test_vpu_lane.cc).
#pragma once

#include <cmath>
#include <cstdint>

#include "sw/numerics/fp_ref.h"
#include "tessera/isa_gen.h"

namespace tessera::test {

inline bool nan32(uint32_t x) { return fp::is_nan32(x); }
inline bool lt(uint32_t a, uint32_t b) { return !nan32(a) && !nan32(b) && fp::f32(a) < fp::f32(b); }
inline bool eq(uint32_t a, uint32_t b) {
  return !nan32(a) && !nan32(b) && fp::f32(a) == fp::f32(b);
}
inline uint32_t fmin_ref(uint32_t a, uint32_t b) {
  if (nan32(a) || nan32(b)) return fp::kFp32CanonicalNan;
  if ((a & 0x7FFFFFFF) == 0 && (b & 0x7FFFFFFF) == 0) return a | b;
  return lt(b, a) ? b : a;
}
inline uint32_t fmax_ref(uint32_t a, uint32_t b) {
  if (nan32(a) || nan32(b)) return fp::kFp32CanonicalNan;
  if ((a & 0x7FFFFFFF) == 0 && (b & 0x7FFFFFFF) == 0) return a & b;
  return lt(a, b) ? b : a;
}
inline uint32_t fmax4_ref(uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  return fmax_ref(fmax_ref(fmax_ref(a, b), c), d);
}
inline uint32_t i2f_ref(uint32_t a) {
  return fp::bits(static_cast<float>(static_cast<int32_t>(a)));
}
inline uint32_t f2i_ref(uint32_t a) {
  if (nan32(a)) return 0;
  const double d = std::trunc(static_cast<double>(fp::f32(a)));
  if (d >= 2147483648.0) return 0x7FFFFFFF;
  if (d < -2147483648.0) return 0x80000000u;
  return static_cast<uint32_t>(static_cast<int32_t>(d));
}

// One lane of an element-wise funct, div and sqrt included (host float through sw/numerics/fp_ref).
// `imm` is the instruction's imm (w1): the select-with-immediate and bit-field functs read it.
// `d` is the lane of the register imm[3:0] names (max4, argmax4 read it).
inline uint32_t vpu_lane_ref(uint32_t funct, uint32_t x, uint32_t y, uint32_t c, uint32_t d,
                             uint32_t imm) {
  switch (funct) {
    case isa::VF_ADD:
      return fp::add(x, y);
    case isa::VF_SUB:
      return fp::add(x, y ^ 0x80000000u);
    case isa::VF_MUL:
      return fp::mul(x, y);
    case isa::VF_DIV:
      return fp::div(x, y);
    case isa::VF_SQRT:
      return fp::sqrt(x);
    case isa::VF_MIN:
      return fmin_ref(x, y);
    case isa::VF_MAX:
      return fmax_ref(x, y);
    case isa::VF_CMPEQ:
      return eq(x, y) ? 0xFFFFFFFFu : 0;
    case isa::VF_CMPLT:
      return lt(x, y) ? 0xFFFFFFFFu : 0;
    case isa::VF_CMPLE:
      return (lt(x, y) || eq(x, y)) ? 0xFFFFFFFFu : 0;
    case isa::VF_SEL:
      return c != 0 ? x : y;
    case isa::VF_I2F:
      return i2f_ref(x);
    case isa::VF_F2I:
      return f2i_ref(x);
    case isa::VF_F2BF:
      return uint32_t(fp::fp32_to_bf16(x)) << 16;
    case isa::VF_IADD:
      return x + y;
    case isa::VF_IAND:
      return x & y;
    case isa::VF_IOR:
      return x | y;
    case isa::VF_IXOR:
      return x ^ y;
    case isa::VF_SHL:
      return x << (y & 31);
    case isa::VF_SHR:
      return x >> (y & 31);
    case isa::VF_SRA:
      return static_cast<uint32_t>(static_cast<int32_t>(x) >> (y & 31));
    case isa::VF_SELEQ:
      return eq(x, y) ? c : imm;
    case isa::VF_SELNE:
      return eq(x, y) ? imm : c;
    case isa::VF_SELLT:
      return lt(x, y) ? c : imm;
    case isa::VF_BFX: {  // width (imm[9:5] + 1) bits of x from bit imm[4:0]
      const uint64_t width = ((imm >> 5) & 31) + 1;
      return static_cast<uint32_t>((uint64_t{x} >> (imm & 31)) & ((uint64_t{1} << width) - 1));
    }
    case isa::VF_SHLOR:
      return x | static_cast<uint32_t>(uint64_t{y} << (imm & 31));
    case isa::VF_SELEQH: {  // per 16-bit half, bit patterns: x.h == y.h ? c.h : imm
      uint32_t r = 0;
      for (int h = 0; h < 2; ++h) {
        const uint32_t s = 16u * h, m = 0xFFFFu << s;
        r |= ((x & m) == (y & m)) ? (c & m) : ((imm & 0xFFFFu) << s);
      }
      return r;
    }
    case isa::VF_ADDMAX:
      return fmax_ref(fp::add(x, y), c);
    case isa::VF_MAX4:
      return fmax4_ref(x, y, c, d);
    case isa::VF_ARGMAX4: {  // position of the first of x, y, c equal to the max, else 3
      const uint32_t m = fmax4_ref(x, y, c, d);
      const float k = eq(x, m) ? 0.0f : eq(y, m) ? 1.0f : eq(c, m) ? 2.0f : 3.0f;
      return fp::bits(k);
    }
    default:
      return 0xDEADBEEF;  // not an element-wise funct: never matches the RTL's 0
  }
}

}  // namespace tessera::test
