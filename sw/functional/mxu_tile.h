// The functional model's MXU.MM kernel: one weight tile against `rows` activation rows, with the
// host's float unit. Bit-identical to sw/numerics/mxu_ref's reference_matmul for one K-tile (the
// oracle, which rebuilds every bf16 value from its fields and rounds through fp::mac) and ~20x
// faster, which the functional backend needs: before this kernel, three quarters of a training
// step's host time went into the oracle's ldexp calls.
//
// Why it is exact: a bf16 value is the upper half of the fp32 value with the same bits (shift
// by 16); a product of two bf16 values is rounded once to fp32 by the host's multiplier
// (-ffp-contract=off keeps the multiply and the add two roundings), the partial sums run from +0
// over k = 0..N-1 as in the array; a NaN stays a NaN through every later add, so mapping it to
// the canonical NaN once at the end gives what mapping it after every operation gives.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "sw/numerics/fp_ref.h"

namespace tessera::functional {

// c[t][col] = sum over k of a[t][k] * w[k][col], a: rows x n bf16, w: n x n bf16 (row k = the
// weights of input k), c: rows x n fp32 bits.
inline void mxu_tile_matmul(int n, uint32_t rows, const uint16_t* a, const uint16_t* w,
                            uint32_t* c) {
  std::vector<float> wf(static_cast<size_t>(n) * n), sum(static_cast<size_t>(n));
  for (size_t k = 0; k < wf.size(); ++k) wf[k] = fp::f32(static_cast<uint32_t>(w[k]) << 16);
  for (uint32_t t = 0; t < rows; ++t) {
    const uint16_t* at = a + static_cast<size_t>(t) * n;
    for (int col = 0; col < n; ++col) sum[col] = 0.0f;  // +0: the top PE's partial-sum input
    for (int k = 0; k < n; ++k) {
      const float ak = fp::f32(static_cast<uint32_t>(at[k]) << 16);
      const float* wk = &wf[static_cast<size_t>(k) * n];
      for (int col = 0; col < n; ++col) {
        const float p = ak * wk[col];  // rounded to fp32 here ...
        sum[col] = sum[col] + p;       // ... and the sum rounded again
      }
    }
    uint32_t* ct = c + static_cast<size_t>(t) * n;
    for (int col = 0; col < n; ++col) ct[col] = fp::canonical(fp::bits(sum[col]));
  }
}

}  // namespace tessera::functional
