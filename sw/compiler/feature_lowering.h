// The lowering of the layers before Flatten (DenseStackStep; docs/compiler.md, "Convolutional
// layers"): the DMA patterns of a convolution (im2col of the input, the gradient's im2col for
// the input gradient, the flipped kernel) and the pooling layers forward and backward on the
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
};

// A convolution's geometry: output (oy, ox) reads input rows s oy + ky - pt, columns
// s ox + kx - pl (outside the map: zero).
struct ConvGeom {
  Shape3 in, out;
  uint32_t k = 1, s = 1, pt = 0, pl = 0;
};
ConvGeom conv_geom(const Shape3& in, const FeatureLayerSpec& f);
// The outputs o (of `count`) whose tap `t` lands inside [0, size): [lo, hi).
void tap_range(const ConvGeom& g, uint32_t t, uint32_t pad, uint32_t size, uint32_t count,
               uint32_t& lo, uint32_t& hi);

// col[(b, oy, ox)][(ky, kx, c)] = x[b][s oy + ky - pt][s ox + kx - pl][c] for the taps inside
// the map, one DMA per tap (the rest of `col` is the caller's: zero). Rows `col_pitch` bytes.
void emit_im2col(ProgramBuilder& b, const ConvGeom& g, uint32_t batch, const MapRef& x,
                 uint64_t col, uint32_t col_pitch);
// The input gradient's operand: colT[(b, y, x)][(k-1-ky, k-1-kx, f)] = dz[b][oy][ox][f] where
// y = s oy + ky - pt, x = s ox + kx - pl (the rest zero, the caller's). dz: [B][Ho][Wo] pixels
// of `dz_px` bytes.
void emit_im2col_grad(ProgramBuilder& b, const ConvGeom& g, uint32_t batch, uint64_t dz,
                      uint32_t dz_px, uint64_t colT, uint32_t colT_pitch);
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
