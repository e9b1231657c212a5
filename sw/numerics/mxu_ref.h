// Reference model of the MXU's architectural behaviour (docs/numerics.md, docs/architecture.md):
// the result of a tiled matmul bit for bit, in the array's accumulation order, and the cycle
// count of a tile sequence.
#pragma once

#include <cstdint>
#include <vector>

namespace tessera::mxu {

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// C[m][n] = sum_k A[m][k] * W[k][n] as the MXU computes it with array dimension array_n:
// K is cut into tiles of array_n rows (the last one padded with zeros); within a tile the
// column sum starts at +0 and adds the products for k = 0, 1, ..., array_n - 1 in order, each
// product rounded to fp32 and each sum rounded to fp32; the tile sums of K-tiles 0, 1, ... are
// then added to the accumulator in that order (the first tile overwrites it).
// a: m x k bf16, w: k x n bf16, row-major; returns m x n fp32 bits.
std::vector<uint32_t> reference_matmul(int array_n, int m, int k, int n,
                                       const std::vector<uint16_t>& a,
                                       const std::vector<uint16_t>& w);

// Cycles from the first weight row accepted to the MXU going idle, for `folds` tiles each
// streaming `rows` activation rows back to back, inputs always valid (docs/architecture.md):
//   3N + (folds - 1) * max(rows, N + 1) + rows - 1
uint64_t tile_sequence_cycles(int array_n, int folds, int rows);

}  // namespace tessera::mxu
