#include "sw/numerics/mxu_ref.h"

#include <algorithm>

#include "sw/numerics/fp_ref.h"

namespace tessera::mxu {

std::vector<uint32_t> reference_matmul(int array_n, int m, int k, int n,
                                       const std::vector<uint16_t>& a,
                                       const std::vector<uint16_t>& w) {
  std::vector<uint32_t> c(static_cast<size_t>(m) * n, 0);
  const int k_tiles = ceil_div(k, array_n);
  for (int row = 0; row < m; ++row) {
    for (int col = 0; col < n; ++col) {
      uint32_t acc = 0;
      for (int kt = 0; kt < k_tiles; ++kt) {
        uint32_t sum = 0;  // +0: the top PE's partial-sum input
        for (int r = 0; r < array_n; ++r) {
          const int kk = kt * array_n + r;
          const uint16_t av = kk < k ? a[static_cast<size_t>(row) * k + kk] : 0;
          const uint16_t wv = kk < k ? w[static_cast<size_t>(kk) * n + col] : 0;
          sum = fp::mac(sum, av, wv);
        }
        acc = (kt == 0) ? sum : fp::add(acc, sum);
      }
      c[static_cast<size_t>(row) * n + col] = acc;
    }
  }
  return c;
}

uint64_t tile_sequence_cycles(int array_n, int folds, int rows) {
  const uint64_t n = static_cast<uint64_t>(array_n);
  const uint64_t period = std::max<uint64_t>(rows, n + 1);
  return 3 * n + static_cast<uint64_t>(folds - 1) * period + rows - 1;
}

}  // namespace tessera::mxu
