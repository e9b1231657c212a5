// The lowering of the conv + relu + max-pool fusion (conv_pool_fused, tessera/dense_step.h;
// docs/compiler.md, "Fusion by pattern"): the Conv2D matmul's epilogue that pools its ACC rows
// and keeps the argmax, and the backward pass's routing of the pooled gradient by that argmax.
// The codes are kept as bf16 numbers 0..4 (exact), a code per pooled value: the window position
// (dy, dx) row-major of the first tap holding the max, 4 where the relu output is 0.
#pragma once

#include <cstdint>

#include "sw/compiler/matmul_lowering.h"
#include "sw/compiler/program_builder.h"

namespace tessera::compiler::lowering {

// Where the fused epilogue writes: the pooled map ([pooled pixel][F] bf16, pooled pixels of all
// samples one after the other) and the codes (the same layout). The convolution's output map is
// wo pixels wide (even), F = ct N channels.
struct ConvPoolOut {
  uint64_t pooled = 0, codes = 0;
  uint32_t wo = 0, f = 0;
  // rows_batch > 0: the pooled map pooled-row-major instead, [hp][rows_batch][wp f] (pooled
  // row py of sample s at (py rows_batch + s) wp f); the codes stay as above
  uint32_t rows_batch = 0, hp = 0;
};
// One epilogue piece of the Conv2D matmul (Matmul::row_align = 2 wo: its rows are pairs of
// output rows): per 2x2 window and column tile, from the four fp32 sums in the ACC: the max;
// max + bias (the fp32 row at ub_bias + tile 4N), relu, to bf16: the pooled value; the argmax
// code. The piece's scratch holds rows / 4 pixels of pooled values, then of codes ([pixel]
// [tile][N] bf16 each: 1.5 N bytes an ACC row of a tile, within Matmul::epi_row_bytes = 2 N).
// 10 VPU instructions a window and tile. Registers V1..V7, V11; V0 must be zero.
void emit_conv_pool_epilogue(ProgramBuilder& b, const Block& k, const ConvPoolOut& out,
                             uint32_t ub_bias);
// The conv's output gradient dz ([M rows (b, oy, ox)][F] bf16, the map ho = 2 hp by wo = 2 wp
// pixels a sample) from the pooled gradient dp and the codes (both [pooled pixel][F] bf16): dz
// at window position t of a pooled value = dp where its code is t, else 0 (seleqh on two column
// tiles' bf16 at once where the addresses are 4N-aligned). Chunks of pooled rows
// (or of a pooled row's pixels, when a row does not fit) staged through the UB arena
// [ub_lo, ub_hi), double-buffered. Registers V7..V13.
void emit_pool_route(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint32_t batch, uint32_t hp,
                     uint32_t wp, uint32_t f, uint64_t dp, uint64_t codes, uint64_t dz);

// The same routing inside the conv's weight gradient (pool_routed_in_weight_gradient): its
// weight operand, dz rows [r0, r0 + rows) (M rows (b, oy, ox) of a map wo wide, its height
// even) and columns [c0, c0 + cols), made in the UB at `dst` (rows `pitch` bytes apart) from dp
// and the codes; rows from m on (the contraction's padding) zero. The pooled rows the call's
// conv rows lie in (at most stage_bytes of dp and codes) are staged by DMA in one of two
// buffers, the next call's (rows r0 + rows on) prefetched into the other before this call's VPU
// work. Per pair of conv rows sharing a pooled value and a column tile: 2 loads, 2 seleqh, 2
// stores, for two column tiles at once where the addresses are 4N-aligned. Registers V7..V13
// (the optimizer's working registers; its constants stay).
struct RouteOperand {
  uint64_t dp = 0, codes = 0;  // [pooled pixel][f] bf16
  uint32_t wo = 0, f = 0;
  uint64_t m = 0;  // batch ho wo
  uint32_t stage[2] = {0, 0};
  uint32_t stage_bytes = 0;
  // the prefetch: the conv row its stage starts the call at, and which buffer
  uint64_t ahead_r0 = ~0ull;
  uint32_t ahead_buf = 0, turn = 0;
};
void emit_route_operand(ProgramBuilder& b, RouteOperand& r, uint64_t r0, uint32_t rows, uint32_t c0,
                        uint32_t cols, uint32_t dst, uint32_t pitch);

// The weight gradient of a fused pair whose convolution is the first, one input channel, stride
// 1, padding valid (kernel k, the map h x w, ho = h - k + 1 and wo conv rows and columns, both
// even): [dW; db] = [im2col(x) ones]^T dz, dz routed from dp by the codes, item by item — an
// item is one pooled row of one sample: its two conv rows (2 wo positions, padded to whole
// K tiles with zero dz), whose k k tap rows the DMA copies out of the sample's image rows
// (two whole images staged, or the item's rows) and whose dz the VPU routes from the item's
// dp and codes (one contiguous run each). The MXU takes the items' dz in groups, emitted an
// item behind the routing, so its work, the DMA's loads (three items ahead) and the VPU's
// routing overlap. The sums land in ACC rows (j - j0)(T + 1) + t for column tile j of
// [j0, j1) and row t of [dW (T = k k taps); db] — the gradient's transpose, as the by-taps
// weight gradient leaves it. The UB arena [ub_lo, ub_hi) is the pass's. Registers V7..V13
// (the optimizer's working registers; its constants stay); V0 must be zero.
struct ConvPoolWeightGrad {
  uint64_t images = 0;               // [batch][h][w] bf16
  uint32_t batch = 0, h = 0, w = 0, k = 0, f = 0;
  uint64_t dp = 0, codes = 0;        // [batch][ho / 2][wo / 2][f] bf16
  uint32_t j0 = 0, j1 = 0;           // the column tiles of this pass
};
void emit_conv_pool_weight_gradient(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi,
                                    const ConvPoolWeightGrad& g);
// True when the smallest pipeline of emit_conv_pool_weight_gradient (one input set, one dz
// buffer, the item's image rows) fits `ub_bytes` of arena.
bool conv_pool_weight_gradient_fits(int n, uint64_t ub_bytes, uint32_t h, uint32_t w, uint32_t k,
                                    uint32_t f);

}  // namespace tessera::compiler::lowering
