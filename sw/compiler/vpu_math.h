// VPU instruction sequences for the functions the ISA has no instruction for: exp and log
// (softmax and cross-entropy) and the Adam update. They are fixed sequences of IEEE binary32
// operations, so the RTL and the functional model agree bit for bit; their error against the
// host's libm is measured in tests/sw/test_compiler.cc (docs/compiler.md, "VPU math").
#pragma once

#include <functional>

#include "sw/compiler/program_builder.h"

namespace tessera::compiler {

// out = exp(in) for in <= 0 (Cody-Waite reduction by ln 2, degree-7 polynomial (Cephes expf),
// 2^n built in the exponent field). Inputs below -87 are clamped to -87 (exp(-87) = 1.6e-38:
// the result stays normal). Clobbers t1..t4; `in` may equal `out`.
void emit_exp(ProgramBuilder& b, int out, int in, int t1, int t2, int t3, int t4);

// out = ln(in) for a positive normal in: in = 2^e * m with m in [sqrt(1/2), sqrt(2)), ln m by
// the atanh series in f = (m - 1) / (m + 1) to f^9. Clobbers t1..t5; `in` is kept.
void emit_log(ProgramBuilder& b, int out, int in, int t1, int t2, int t3, int t4, int t5);

// Registers of the Adam update (Keras form). Constants: b1, 1 - b1, b2, 1 - b2, eps, lr_t.
struct AdamRegs {
  int b1 = 1, omb1 = 2, b2 = 3, omb2 = 4, eps = 5, lr_t = 6;
  int g = 7, w = 8, m = 9, v = 10, t1 = 11, t2 = 12;
};
// Loads the constants (lr_t from the UB fp32 row `lr_t_addr`).
void emit_adam_constants(ProgramBuilder& b, const AdamRegs& r, float b1, float b2, float eps,
                         uint32_t lr_t_addr);
// m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g g; w = w - (lr_t m) / (sqrt(v) + eps).
void emit_adam_update(ProgramBuilder& b, const AdamRegs& r);

// The same update of `count` vectors, software-pipelined around the divide unit, which works in
// the background (docs/architecture.md, "The DMA and vector units"): vector j's square root
// runs while the VPU loads vector j + 1 and updates its first moment, its divide while it
// updates j + 1's second moment. Every element sees the same operations on the same values as
// emit_adam_update, so the results are bit for bit the same; only independent instructions
// move. Working registers v7 .. v13 (the constants stay in r's). `load_gmv(j, g, m, v)` and
// `load_w(j, w)` emit vector j's loads; `store_mv(j, m, v)` and `store_w(j, w)` its stores.
void emit_adam_pipelined(ProgramBuilder& b, const AdamRegs& r, uint32_t count,
                         const std::function<void(uint32_t, int, int, int)>& load_gmv,
                         const std::function<void(uint32_t, int)>& load_w,
                         const std::function<void(uint32_t, int, int)>& store_mv,
                         const std::function<void(uint32_t, int)>& store_w);

}  // namespace tessera::compiler
