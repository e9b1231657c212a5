// VPU sequences for exp, log and Adam (vpu_math.h).
#include "sw/compiler/vpu_math.h"

namespace tessera::compiler {

using F = isa::Funct;

void emit_exp(ProgramBuilder& b, int out, int in, int t1, int t2, int t3, int t4) {
  // x = max(in, -87)
  b.vpu_lif(t1, -87.0f);
  b.vpu_op(F::kMax, t2, in, t1);
  // n = round(x log2 e) as ceil(x log2 e - 0.5) (f2i truncates toward zero; x <= 0)
  b.vpu_lif(t1, 1.44269504088896341f);
  b.vpu_op(F::kMul, t3, t2, t1);
  b.vpu_lif(t1, 0.5f);
  b.vpu_op(F::kSub, t3, t3, t1);
  b.vpu_op(F::kF2I, t3, t3);
  b.vpu_op(F::kI2F, t4, t3);
  // r = x - n C1 - n C2 with C1 + C2 = ln 2 (C1 has 9 significant bits: n C1 is exact)
  b.vpu_lif(t1, 0.693359375f);
  b.vpu_op(F::kMul, t1, t4, t1);
  b.vpu_op(F::kSub, t2, t2, t1);
  b.vpu_lif(t1, -2.12194440e-4f);
  b.vpu_op(F::kMul, t1, t4, t1);
  b.vpu_op(F::kSub, t2, t2, t1);
  // p(r) = ((((( c0 r + c1) r + c2) r + c3) r + c4) r + c5) r^2 + r + 1
  static const float kC[] = {1.9875691500e-4f, 1.3981999507e-3f, 8.3334519073e-3f,
                             4.1665795894e-2f, 1.6666665459e-1f, 5.0000001201e-1f};
  b.vpu_lif(t4, kC[0]);
  for (int k = 1; k < 6; ++k) {
    b.vpu_op(F::kMul, t4, t4, t2);
    b.vpu_lif(t1, kC[k]);
    b.vpu_op(F::kAdd, t4, t4, t1);
  }
  b.vpu_op(F::kMul, t1, t2, t2);
  b.vpu_op(F::kMul, t4, t4, t1);
  b.vpu_op(F::kAdd, t4, t4, t2);
  b.vpu_lif(t1, 1.0f);
  b.vpu_op(F::kAdd, t4, t4, t1);
  // 2^n: (n + 127) << 23 (n >= -126 because x >= -87)
  b.vpu_li(t1, 127);
  b.vpu_op(F::kIAdd, t3, t3, t1);
  b.vpu_li(t1, 23);
  b.vpu_op(F::kShl, t3, t3, t1);
  b.vpu_op(F::kMul, out, t4, t3);
}

void emit_log(ProgramBuilder& b, int out, int in, int t1, int t2, int t3, int t4, int t5) {
  // e = exponent field - 127; m = mantissa with the exponent of 1.0
  b.vpu_li(t1, 23);
  b.vpu_op(F::kShr, t2, in, t1);
  b.vpu_li(t1, static_cast<uint32_t>(-127));
  b.vpu_op(F::kIAdd, t2, t2, t1);
  b.vpu_li(t1, 0x007FFFFFu);
  b.vpu_op(F::kIAnd, t3, in, t1);
  b.vpu_li(t1, 0x3F800000u);
  b.vpu_op(F::kIOr, t3, t3, t1);
  // m > sqrt 2: m /= 2 (exact), e += 1
  b.vpu_lif(t1, 1.41421356f);
  b.vpu_op(F::kCmpLt, t4, t1, t3);
  b.vpu_lif(t1, 0.5f);
  b.vpu_op(F::kMul, t1, t3, t1);
  b.vpu_op(F::kSel, t3, t1, t3, t4);
  b.vpu_op(F::kI2F, t2, t2);
  b.vpu_lif(t1, 1.0f);
  b.vpu_op(F::kSel, t1, t1, 0, t4);  // v0 is zero throughout a step program
  b.vpu_op(F::kAdd, t2, t2, t1);
  // f = (m - 1) / (m + 1); ln m = 2 (f + f^3 q(f^2)), q = 1/3 + f^2 (1/5 + f^2 (1/7 + f^2 / 9))
  b.vpu_lif(t1, 1.0f);
  b.vpu_op(F::kSub, t4, t3, t1);
  b.vpu_op(F::kAdd, t5, t3, t1);
  b.vpu_op(F::kDiv, t4, t4, t5);
  b.vpu_op(F::kMul, t5, t4, t4);
  b.vpu_lif(t3, 1.0f / 9.0f);
  for (float c : {1.0f / 7.0f, 1.0f / 5.0f, 1.0f / 3.0f}) {
    b.vpu_op(F::kMul, t3, t3, t5);
    b.vpu_lif(t1, c);
    b.vpu_op(F::kAdd, t3, t3, t1);
  }
  b.vpu_op(F::kMul, t3, t3, t5);
  b.vpu_op(F::kMul, t3, t3, t4);
  b.vpu_op(F::kAdd, t3, t3, t4);
  b.vpu_lif(t1, 2.0f);
  b.vpu_op(F::kMul, t3, t3, t1);
  // ln x = e ln2_hi + (ln m + e ln2_lo)
  b.vpu_lif(t1, -2.12194440e-4f);
  b.vpu_op(F::kMul, t1, t2, t1);
  b.vpu_op(F::kAdd, t3, t3, t1);
  b.vpu_lif(t1, 0.693359375f);
  b.vpu_op(F::kMul, t1, t2, t1);
  b.vpu_op(F::kAdd, out, t1, t3);
}

void emit_adam_constants(ProgramBuilder& b, const AdamRegs& r, float b1, float b2, float eps,
                         uint32_t lr_t_addr) {
  b.vpu_lif(r.b1, b1);
  b.vpu_lif(r.omb1, 1.0f - b1);
  b.vpu_lif(r.b2, b2);
  b.vpu_lif(r.omb2, 1.0f - b2);
  b.vpu_lif(r.eps, eps);
  b.vpu_ld(isa::Kind::kUbF32, r.lr_t, lr_t_addr);
}

void emit_adam_update(ProgramBuilder& b, const AdamRegs& r) {
  b.vpu_op(F::kMul, r.t1, r.b1, r.m);
  b.vpu_op(F::kMul, r.t2, r.omb1, r.g);
  b.vpu_op(F::kAdd, r.m, r.t1, r.t2);
  b.vpu_op(F::kMul, r.t1, r.g, r.g);
  b.vpu_op(F::kMul, r.t1, r.omb2, r.t1);
  b.vpu_op(F::kMul, r.t2, r.b2, r.v);
  b.vpu_op(F::kAdd, r.v, r.t2, r.t1);
  b.vpu_op(F::kMul, r.t1, r.lr_t, r.m);
  b.vpu_op(F::kSqrt, r.t2, r.v);
  b.vpu_op(F::kAdd, r.t2, r.t2, r.eps);
  b.vpu_op(F::kDiv, r.t1, r.t1, r.t2);
  b.vpu_op(F::kSub, r.w, r.w, r.t1);
}

void emit_adam_pipelined(ProgramBuilder& b, const AdamRegs& r, uint32_t count,
                         const std::function<void(uint32_t, int, int, int)>& load_gmv,
                         const std::function<void(uint32_t, int)>& load_w,
                         const std::function<void(uint32_t, int, int)>& store_mv,
                         const std::function<void(uint32_t, int)>& store_w) {
  // One register each (the loop body is the same for every vector, so loop compression keeps
  // it one REPEAT): the divide unit latches its operands when it starts, so v and s may be
  // written again while it runs, and the scoreboard holds whatever reads its result.
  const int g = 7, w = 8, m = 9, v = 10, t = 11, s = 12, n = 13;
  auto first_moment = [&] {  // m = b1 m + (1 - b1) g
    b.vpu_op(F::kMul, m, r.b1, m);
    b.vpu_op(F::kMul, t, r.omb1, g);
    b.vpu_op(F::kAdd, m, m, t);
  };
  auto second_moment = [&](uint32_t j) {  // v = b2 v + (1 - b2) g g, and the stores of both
    b.vpu_op(F::kMul, g, g, g);
    b.vpu_op(F::kMul, g, r.omb2, g);
    b.vpu_op(F::kMul, v, r.b2, v);
    b.vpu_op(F::kAdd, v, v, g);
    store_mv(j, m, v);
  };
  if (count == 0) return;
  load_gmv(0, g, m, v);
  load_w(0, w);
  first_moment();
  second_moment(0);
  b.vpu_op(F::kMul, n, r.lr_t, m);
  for (uint32_t j = 0; j < count; ++j) {
    const bool next = j + 1 < count;
    b.vpu_op(F::kSqrt, s, v);  // while it runs: vector j + 1's loads and first moment
    if (next) {
      load_gmv(j + 1, g, m, v);
      first_moment();
    }
    b.vpu_op(F::kAdd, s, s, r.eps);
    b.vpu_op(F::kDiv, n, n, s);  // while it runs: j + 1's second moment
    if (next) second_moment(j + 1);
    b.vpu_op(F::kSub, w, w, n);  // w -= lr_t m / (sqrt(v) + eps)
    store_w(j, w);
    if (next) {
      load_w(j + 1, w);
      b.vpu_op(F::kMul, n, r.lr_t, m);
    }
  }
}

}  // namespace tessera::compiler
