// The lowering of the layers before Flatten (DenseStackStep; docs/compiler.md, "Convolutional
// layers"): the DMA patterns of a convolution (its operands gathered from padded maps into the
// UB, the flipped kernel) and the pooling layers forward and backward on the
// VPU. Feature maps are NHWC in HBM; a map is addressed by its pixel pitch (bytes from one
// pixel's channels to the next's) and sample pitch.
#pragma once

#include <cstdint>

#include "sw/compiler/program_builder.h"
#include "tessera/dense_step.h"

namespace tessera::compiler::lowering {

struct MapRef {
  uint64_t addr = 0;
  uint32_t px = 0;      // bytes from a pixel to the next
  uint64_t sample = 0;  // bytes from a sample to the next
  isa::Space space = isa::Space::kHbm;  // where the map lies (a UB-staged copy: kUb)
};

// A convolution's geometry: output (oy, ox) reads input rows s oy + ky - pt, columns
// s ox + kx - pl (outside the map: zero).
struct ConvGeom {
  Shape3 in, out;
  uint32_t k = 1, s = 1, pt = 0, pl = 0;
};
ConvGeom conv_geom(const Shape3& in, const FeatureLayerSpec& f);

// A convolution's operand read where it lies (no im2col in HBM): a map that holds every tap,
// its padding zeros (and, for the input gradient, the stride's holes) included. Operand row
// m = (b, oy, ox), column (ky, kx, c), is map[b][s oy + ky][s ox + kx][c].
struct PatchMap {
  MapRef map;
  uint32_t w = 0;  // pixels a map row
  uint32_t k = 1, s = 1, c = 1;
  uint32_t ho = 0, wo = 0, batch = 0;
  uint64_t rows() const { return uint64_t{batch} * ho * wo; }
  uint32_t cols() const { return k * k * c; }
  // the longest contiguous run of a row's values in the map: a kernel row where it is compact
  uint32_t run() const { return map.px == c * 2 ? k * c : c; }
};
// ub[r][j] (rows `pitch` bytes apart) = operand[r0 + r][c0 + j] for r < rows, j < cols, by DMA
// from the map: a kernel row's taps are one run where the map is compact, a run of output
// rows (or whole samples) one copy. Rows past the operand's are zero-filled from the `zero`
// block of `zero_elems` zero bf16 in the UB; columns past k k c too when `pad_cols` (a buffer
// loaded with the same shape before keeps its zeros).
void emit_gather_patches(ProgramBuilder& b, const PatchMap& p, uint64_t r0, uint32_t rows,
                         uint32_t c0, uint32_t cols, uint32_t ub_dst, uint32_t pitch,
                         uint32_t zero, uint32_t zero_elems, bool pad_cols);
// The transposed operand: ub[j][i] (rows `pitch` bytes apart) = operand[m0 + i][j0 + j] for
// j < rows (< k k c), i < cols; positions past the operand's rows are zero-filled. A row runs
// over output positions, so the copies are contiguous only for one channel at stride 1 (runs
// of an output row); otherwise they are element walks.
void emit_gather_patches_t(ProgramBuilder& b, const PatchMap& p, uint32_t j0, uint32_t rows,
                           uint64_t m0, uint32_t cols, uint32_t ub_dst, uint32_t pitch,
                           uint32_t zero, uint32_t zero_elems);
// dst[b][y0 + sy y][x0 + sx x] = src[b][y][x] (c channels) for y < h, x < w; src rows are
// `src_w` pixels long, dst a compact map of dst_h x dst_w pixels (its other pixels the
// caller's).
void emit_place_map(ProgramBuilder& b, const MapRef& src, uint32_t src_w, uint32_t h, uint32_t w,
                    uint32_t c, uint32_t batch, uint64_t dst, uint32_t dst_h, uint32_t dst_w,
                    uint32_t y0, uint32_t x0, uint32_t sy, uint32_t sx);
// Zeroes the compact map dst (batch x dst_h x dst_w pixels of c channels) outside the rows
// [y0, y0 + h) x columns [x0, x0 + w) of each sample, from the UB's `zero` block.
void emit_zero_frame(ProgramBuilder& b, uint32_t zero, uint32_t zero_elems, uint64_t dst,
                     uint32_t batch, uint32_t dst_h, uint32_t dst_w, uint32_t c, uint32_t y0,
                     uint32_t x0, uint32_t h, uint32_t w);
// wflip[(k-1-ky, k-1-kx, f)][c] = W^T[f][(ky, kx, c)] (bf16): the input gradient's weights.
// w16 rows `w_pitch` bytes, wflip rows `flip_pitch` bytes (padding the caller's: zero).
void emit_flip_kernel(ProgramBuilder& b, const ConvGeom& g, uint64_t w16, uint32_t w_pitch,
                      uint64_t wflip, uint32_t flip_pitch);

// Pooling (window p x p, stride p, valid): y = max or mean (the sum in window order, (dy, dx)
// row-major, divided by p p) of each window of x, in chunks of output rows staged in the UB
// arena [ub_lo, ub_hi): the p p window taps gathered by DMA, combined lane by lane on the VPU.
void emit_pool_forward(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, bool max, uint32_t p,
                       const Shape3& in, const Shape3& out, uint32_t batch, const MapRef& x,
                       const MapRef& y);
// The input gradient: max routes each output's gradient to the first tap (window order) equal
// to the window's max, mean gives every tap g / (p p); `relu`: times (x > 0), the gradient of
// the relu layer that produced x. Inputs outside every window are not written (the caller
// zeroes them).
void emit_pool_backward(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, bool max, uint32_t p,
                        bool relu, const Shape3& in, const Shape3& out, uint32_t batch,
                        const MapRef& x, const MapRef& g_out, const MapRef& g_in);

}  // namespace tessera::compiler::lowering
