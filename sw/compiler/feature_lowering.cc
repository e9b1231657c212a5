// Conv2D and pooling patterns of DenseStackStep (sw/compiler/feature_lowering.h).
#include "sw/compiler/feature_lowering.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sw/compiler/lowering_util.h"

namespace tessera::compiler::lowering {
namespace {
using Fn = isa::Funct;
constexpr isa::Kind kBf16 = isa::Kind::kUbBf16;
constexpr isa::Kind kF32 = isa::Kind::kUbF32;

// The pooling chunks: output rows [oy0, oy0 + rows), columns [ox0, ox0 + cols) of one sample
// (a chunk narrower than the map is one row).
struct Chunk {
  uint32_t sample, oy0, rows, ox0, cols;
};
// Chunks such that two sets of `buffers` chunk buffers fit the arena: whole rows if one does,
// else pieces of a row.
std::vector<Chunk> pool_chunks(uint64_t ub_lo, uint64_t ub_hi, uint32_t buffers,
                               const Shape3& out, uint32_t batch, uint32_t n, const char* what,
                               uint64_t& buf_bytes) {
  const uint64_t room = (ub_hi - ub_lo) - 2 * buffers * 64 - 64;
  auto need = [&](uint64_t values) { return 2 * buffers * (ceil_div(values, n) * uint64_t{n} * 2); };
  uint32_t nr = out.h, nc = out.w;
  while (nr > 1 && need(uint64_t{nr} * out.w * out.c) > room) nr = (nr + 1) / 2;
  if (need(uint64_t{nr} * out.w * out.c) > room) {
    while (nc > 1 && need(uint64_t{nc} * out.c) > room) nc = (nc + 1) / 2;
    if (need(uint64_t{nc} * out.c) > room)
      throw std::invalid_argument(std::string(what) + ": a pixel of " + std::to_string(out.c) +
                                  " channels does not fit the " + std::to_string(ub_hi - ub_lo) +
                                  " bytes of UB the phase has");
  }
  buf_bytes = ceil_div(uint64_t{nr} * nc * out.c, n) * uint64_t{n} * 2;
  std::vector<Chunk> c;
  for (uint32_t s = 0; s < batch; ++s)
    for (uint32_t y = 0; y < out.h; y += nr)
      for (uint32_t x = 0; x < out.w; x += nc)
        c.push_back({s, y, std::min(nr, out.h - y), x, std::min(nc, out.w - x)});
  return c;
}
// The chunk's window taps (dy, dx) in a map of width `w` (HBM), the chunk's own pixels in an
// output-shaped map, and its staging in the UB (contiguous, pixel after pixel).
DmaWalk window(const Chunk& c, uint32_t dy, uint32_t dx, const MapRef& m, uint32_t p, uint32_t w,
               uint32_t ch) {
  return hbm(m.addr + c.sample * m.sample + (uint64_t{p * c.oy0 + dy} * w + p * c.ox0 + dx) * m.px,
             {{ch, 2}, {c.cols, int32_t(p * m.px)}, {c.rows, int32_t(uint64_t{p} * w * m.px)}});
}
DmaWalk pixels(const Chunk& c, const MapRef& m, uint32_t w, uint32_t ch) {
  return hbm(m.addr + c.sample * m.sample + (uint64_t{c.oy0} * w + c.ox0) * m.px,
             {{ch, 2}, {c.cols, int32_t(m.px)}, {c.rows, int32_t(uint64_t{w} * m.px)}});
}
DmaWalk staged(uint32_t at, const Chunk& c, uint32_t ch) {
  return ub(at, {{ch, 2}, {c.cols, int32_t(ch * 2)}, {c.rows, int32_t(c.cols * ch * 2)}});
}
}  // namespace

ConvGeom conv_geom(const Shape3& in, const FeatureLayerSpec& f) {
  ConvGeom g;
  g.in = in;
  g.k = f.kernel;
  g.s = f.stride;
  g.out.c = f.filters;
  if (f.same) {
    g.out.h = ceil_div(in.h, f.stride);
    g.out.w = ceil_div(in.w, f.stride);
    const int64_t th = std::max<int64_t>(0, int64_t(g.out.h - 1) * f.stride + f.kernel - in.h);
    const int64_t tw = std::max<int64_t>(0, int64_t(g.out.w - 1) * f.stride + f.kernel - in.w);
    g.pt = static_cast<uint32_t>(th / 2);
    g.pl = static_cast<uint32_t>(tw / 2);
  } else {
    g.out.h = in.h >= f.kernel ? (in.h - f.kernel) / f.stride + 1 : 0;
    g.out.w = in.w >= f.kernel ? (in.w - f.kernel) / f.stride + 1 : 0;
  }
  return g;
}

void tap_range(const ConvGeom& g, uint32_t t, uint32_t pad, uint32_t size, uint32_t count,
               uint32_t& lo, uint32_t& hi) {
  // s o + t - pad in [0, size)
  const int64_t s = g.s, a = int64_t(pad) - t, z = int64_t(size) - 1 + pad - t;
  const int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
  const int64_t h = z < 0 ? 0 : std::min<int64_t>(count, z / s + 1);
  lo = static_cast<uint32_t>(l);
  hi = static_cast<uint32_t>(std::max(l, h));
}

void emit_im2col(ProgramBuilder& b, const ConvGeom& g, uint32_t batch, const MapRef& x,
                 uint64_t col, uint32_t col_pitch) {
  const uint32_t C = g.in.c, W = g.in.w, Wo = g.out.w, Ho = g.out.h, k = g.k;
  // Output columns where every kx lands inside the input: there the k taps of a kernel row are
  // one contiguous run of k C values in a compact map and in the im2col row, one copy a row.
  uint32_t xa = 0, xb = Wo;
  for (uint32_t kx = 0; kx < k; ++kx) {
    uint32_t lo, hi;
    tap_range(g, kx, g.pl, W, Wo, lo, hi);
    xa = std::max(xa, lo);
    xb = std::min(xb, hi);
  }
  const bool merge = x.px == C * 2 && xa < xb;
  auto copy = [&](uint32_t ky, uint32_t kx, uint32_t y0, uint32_t y1, uint32_t x0, uint32_t x1,
                  uint32_t run) {
    if (y0 >= y1 || x0 >= x1) return;
    const uint64_t iy = uint64_t{g.s} * y0 + ky - g.pt, ix = uint64_t{g.s} * x0 + kx - g.pl;
    b.dma_copy(hbm(x.addr + (iy * W + ix) * x.px,
                   {{run, 2},
                    {x1 - x0, int32_t(g.s * x.px)},
                    {y1 - y0, int32_t(uint64_t{g.s} * W * x.px)},
                    {batch, int32_t(x.sample)}}),
               hbm(col + (uint64_t{y0} * Wo + x0) * col_pitch + (ky * k + kx) * C * 2,
                   {{run, 2},
                    {x1 - x0, int32_t(col_pitch)},
                    {y1 - y0, int32_t(uint64_t{Wo} * col_pitch)},
                    {batch, int32_t(uint64_t{Ho} * Wo * col_pitch)}}),
               2);
  };
  for (uint32_t ky = 0; ky < k; ++ky) {
    uint32_t y0, y1;
    tap_range(g, ky, g.pt, g.in.h, Ho, y0, y1);
    if (merge) copy(ky, 0, y0, y1, xa, xb, k * C);
    for (uint32_t kx = 0; kx < k; ++kx) {
      uint32_t x0, x1;
      tap_range(g, kx, g.pl, W, Wo, x0, x1);
      if (!merge) {
        copy(ky, kx, y0, y1, x0, x1, C);
        continue;
      }
      copy(ky, kx, y0, y1, x0, std::min(x1, xa), C);  // the border columns, tap by tap
      copy(ky, kx, y0, y1, std::max(x0, xb), x1, C);
    }
  }
}

void emit_im2col_grad(ProgramBuilder& b, const ConvGeom& g, uint32_t batch, uint64_t dz,
                      uint32_t dz_px, uint64_t colT, uint32_t colT_pitch) {
  const uint32_t F = g.out.c, W = g.in.w, H = g.in.h, Wo = g.out.w, Ho = g.out.h, k = g.k;
  // Stride 1, compact gradient: for the input columns x every kx reaches, a kernel row's k taps
  // (columns k-1-kx = 0 .. k-1) are the k consecutive pixels from ox = x + pl - (k - 1): one run
  // of k F values, one copy a kernel row.
  const int64_t xa = std::max<int64_t>(0, int64_t(k) - 1 - g.pl);
  const int64_t xb = std::min<int64_t>(W, int64_t(Wo) - g.pl);
  const bool merge = g.s == 1 && dz_px == F * 2 && xa < xb;
  auto copy = [&](uint32_t ky, uint32_t kx, uint32_t y0, uint32_t y1, uint32_t x0, uint32_t x1,
                  uint32_t run) {
    if (y0 >= y1 || x0 >= x1) return;
    const uint64_t iy = uint64_t{g.s} * y0 + ky - g.pt, ix = uint64_t{g.s} * x0 + kx - g.pl;
    const uint32_t flipped = (k - 1 - ky) * k + (k - 1 - kx);
    b.dma_copy(hbm(dz + (uint64_t{y0} * Wo + x0) * dz_px,
                   {{run, 2},
                    {x1 - x0, int32_t(dz_px)},
                    {y1 - y0, int32_t(uint64_t{Wo} * dz_px)},
                    {batch, int32_t(uint64_t{Ho} * Wo * dz_px)}}),
               hbm(colT + (iy * W + ix) * colT_pitch + uint64_t{flipped} * F * 2,
                   {{run, 2},
                    {x1 - x0, int32_t(g.s * colT_pitch)},
                    {y1 - y0, int32_t(uint64_t{g.s} * W * colT_pitch)},
                    {batch, int32_t(uint64_t{H} * W * colT_pitch)}}),
               2);
  };
  for (uint32_t ky = 0; ky < k; ++ky) {
    uint32_t y0, y1;
    tap_range(g, ky, g.pt, H, Ho, y0, y1);
    // the merged run: output columns from xa + pl - (k - 1), tap kx = k - 1 (flipped column 0)
    if (merge)
      copy(ky, k - 1, y0, y1, static_cast<uint32_t>(xa + g.pl - (k - 1)),
           static_cast<uint32_t>(xb + g.pl - (k - 1)), k * F);
    for (uint32_t kx = 0; kx < k; ++kx) {
      uint32_t x0, x1;
      tap_range(g, kx, g.pl, W, Wo, x0, x1);
      if (!merge) {
        copy(ky, kx, y0, y1, x0, x1, F);
        continue;
      }
      // the border: outputs whose input column x = ox + kx - pl lies outside [xa, xb)
      const int64_t lo_end = xa + g.pl - int64_t(kx), hi_begin = xb + g.pl - int64_t(kx);
      copy(ky, kx, y0, y1, x0, static_cast<uint32_t>(std::clamp<int64_t>(lo_end, x0, x1)), F);
      copy(ky, kx, y0, y1, static_cast<uint32_t>(std::clamp<int64_t>(hi_begin, x0, x1)), x1, F);
    }
  }
}

void emit_flip_kernel(ProgramBuilder& b, const ConvGeom& g, uint64_t w16, uint32_t w_pitch,
                      uint64_t wflip, uint32_t flip_pitch) {
  const uint32_t C = g.in.c, F = g.out.c, k = g.k;
  // source: tap (ky, kx) is columns (ky k + kx) C .. + C of every row f; destination: rows
  // ((k-1-ky) k + (k-1-kx)) F + f. kx and ky run forward in the source, backward in wflip.
  b.dma_copy(hbm(w16, {{C, 2}, {F, int32_t(w_pitch)}, {k, int32_t(C * 2)},
                       {k, int32_t(k * C * 2)}}),
             hbm(wflip + (uint64_t{k} * k - 1) * F * flip_pitch,
                 {{C, 2}, {F, int32_t(flip_pitch)}, {k, -int32_t(F * flip_pitch)},
                  {k, -int32_t(k * F * flip_pitch)}}),
             2);
}

void emit_pool_forward(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, bool max, uint32_t p,
                       const Shape3& in, const Shape3& out, uint32_t batch, const MapRef& x,
                       const MapRef& y) {
  const uint32_t N = b.n(), C = in.c, taps = p * p;
  uint64_t buf = 0;
  const auto chunks = pool_chunks(ub_lo, ub_hi, taps + 1, out, batch, N,
                                  max ? "MaxPool2D" : "AveragePooling2D", buf);
  UbArena a(ub_lo, ub_hi, N, "pooling");
  std::vector<uint32_t> tap[2], res(2);
  for (int i = 0; i < 2; ++i) {
    for (uint32_t t = 0; t < taps; ++t) tap[i].push_back(a.take(buf));
    res[i] = a.take(buf);
  }
  auto load = [&](const Chunk& c, int i) {
    for (uint32_t dy = 0; dy < p; ++dy)
      for (uint32_t dx = 0; dx < p; ++dx)
        b.dma_copy(window(c, dy, dx, x, p, in.w, C), staged(tap[i][dy * p + dx], c, C), 2);
    b.signal(isa::Unit::kDma);
  };
  auto run = [&](const Chunk& c, int i) {
    const uint32_t vectors = ceil_div(uint64_t{c.rows} * c.cols * C, N);
    if (!max) b.vpu_lif(3, static_cast<float>(taps));
    for (uint32_t v = 0; v < vectors; ++v) {
      b.vpu_ld(kBf16, 1, tap[i][0] + v * 2 * N);
      for (uint32_t t = 1; t < taps; ++t) {
        b.vpu_ld(kBf16, 2, tap[i][t] + v * 2 * N);
        b.vpu_op(max ? Fn::kMax : Fn::kAdd, 1, 1, 2);
      }
      if (!max) b.vpu_op(Fn::kDiv, 1, 1, 3);
      b.vpu_st(kBf16, 1, res[i] + v * 2 * N);
    }
    b.signal(isa::Unit::kVpu);
    b.dma_copy(staged(res[i], c, C), pixels(c, y, out.w, C), 2);
  };
  load(chunks[0], 0);
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (k + 1 < chunks.size()) load(chunks[k + 1], int((k + 1) % 2));
    run(chunks[k], int(k % 2));
  }
}

void emit_pool_backward(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, bool max, uint32_t p,
                        bool relu, const Shape3& in, const Shape3& out, uint32_t batch,
                        const MapRef& x, const MapRef& g_out, const MapRef& g_in) {
  const uint32_t N = b.n(), C = in.c, taps = p * p;
  uint64_t buf = 0;
  const auto chunks = pool_chunks(ub_lo, ub_hi, taps + 1 + (max ? 4 : 0), out, batch, N,
                                  max ? "MaxPool2D" : "AveragePooling2D", buf);
  UbArena a(ub_lo, ub_hi, N, "pooling gradient");
  std::vector<uint32_t> tap[2], grad(2), mx(2), taken(2);
  for (int i = 0; i < 2; ++i) {
    for (uint32_t t = 0; t < taps; ++t) tap[i].push_back(a.take(buf));
    grad[i] = a.take(buf);
    if (max) {
      mx[i] = a.take(2 * buf);
      taken[i] = a.take(2 * buf);
    }
  }
  const bool need_x = max || relu;
  auto load = [&](const Chunk& c, int i) {
    if (need_x)
      for (uint32_t dy = 0; dy < p; ++dy)
        for (uint32_t dx = 0; dx < p; ++dx)
          b.dma_copy(window(c, dy, dx, x, p, in.w, C), staged(tap[i][dy * p + dx], c, C), 2);
    b.dma_copy(pixels(c, g_out, out.w, C), staged(grad[i], c, C), 2);
    b.signal(isa::Unit::kDma);
  };
  // Max: a pass for each window's max (into `mx`), then tap by tap (loops short enough to
  // compress): mask = x_t == max and no earlier tap took it (`taken`, kept in the UB), the
  // gradient where the mask holds. V1 x_t, V10 max (or p p), V11 g, V12 taken, V13 mask, V14,
  // V15 the result (written over x_t's staging).
  // Pool 2: one pass a vector (a loop body that still compresses): the taps in V1..V4, the
  // relu gradient folded into g as (max > 0) — the tap that takes g equals the max.
  auto run_single = [&](const Chunk& c, int i) {
    const uint32_t vectors = ceil_div(uint64_t{c.rows} * c.cols * C, N);
    for (uint32_t v = 0; v < vectors; ++v) {
      const uint32_t off = v * 2 * N;
      b.vpu_ld(kBf16, 11, grad[i] + off);
      for (uint32_t t = 0; t < taps; ++t) b.vpu_ld(kBf16, 1 + t, tap[i][t] + off);
      b.vpu_op(Fn::kMax, 10, 1, 2);
      for (uint32_t t = 2; t < taps; ++t) b.vpu_op(Fn::kMax, 10, 10, 1 + t);
      if (relu) {
        b.vpu_op(Fn::kCmpLt, 14, 0, 10);
        b.vpu_op(Fn::kSel, 11, 11, 0, 14);
      }
      for (uint32_t t = 0; t < taps; ++t) {
        b.vpu_op(Fn::kCmpEq, 13, 1 + t, 10);
        if (t > 0) b.vpu_op(Fn::kSel, 13, 0, 13, 12);  // an earlier tap took it: 0
        if (t + 1 < taps) b.vpu_op(Fn::kIOr, 12, t > 0 ? 12 : 13, t > 0 ? 13 : 0);
        b.vpu_op(Fn::kSel, 15, 11, 0, 13);
        b.vpu_st(kBf16, 15, tap[i][t] + off);
      }
    }
  };
  auto run = [&](const Chunk& c, int i) {
    const uint32_t vectors = ceil_div(uint64_t{c.rows} * c.cols * C, N);
    if (max && taps == 4) {
      run_single(c, i);
    } else if (max)
      for (uint32_t v = 0; v < vectors; ++v) {
        const uint32_t off = v * 2 * N;
        b.vpu_ld(kBf16, 1, tap[i][0] + off);
        for (uint32_t t = 1; t < taps; ++t) {
          b.vpu_ld(kBf16, 2, tap[i][t] + off);
          b.vpu_op(Fn::kMax, 1, 1, 2);
        }
        b.vpu_st(kF32, 1, mx[i] + v * 4 * N);
      }
    for (uint32_t t = 0; t < taps && !(max && taps == 4); ++t)
      for (uint32_t v = 0; v < vectors; ++v) {
        const uint32_t off = v * 2 * N, off4 = v * 4 * N;
        b.vpu_ld(kBf16, 11, grad[i] + off);
        if (need_x) b.vpu_ld(kBf16, 1, tap[i][t] + off);
        if (!max) {
          b.vpu_lif(10, static_cast<float>(taps));
          b.vpu_op(Fn::kDiv, 11, 11, 10);
        }
        int result = 11;
        if (max) {
          b.vpu_ld(kF32, 10, mx[i] + off4);
          b.vpu_op(Fn::kCmpEq, 13, 1, 10);
          if (t > 0) {
            b.vpu_ld(kF32, 12, taken[i] + off4);
            b.vpu_op(Fn::kSel, 13, 0, 13, 12);  // an earlier tap took it: 0
            if (t + 1 < taps) b.vpu_op(Fn::kIOr, 12, 12, 13);
          }
          if (t + 1 < taps) b.vpu_st(kF32, t > 0 ? 12 : 13, taken[i] + off4);
        }
        if (relu) {
          b.vpu_op(Fn::kCmpLt, 14, 0, 1);
          if (max)
            b.vpu_op(Fn::kIAnd, 13, 13, 14);
          else
            b.vpu_op(Fn::kIOr, 13, 14, 0);
        }
        if (max || relu) {
          b.vpu_op(Fn::kSel, 15, 11, 0, 13);
          result = 15;
        }
        b.vpu_st(kBf16, result, tap[i][t] + off);
      }
    b.signal(isa::Unit::kVpu);
    for (uint32_t dy = 0; dy < p; ++dy)
      for (uint32_t dx = 0; dx < p; ++dx)
        b.dma_copy(staged(tap[i][dy * p + dx], c, C), window(c, dy, dx, g_in, p, in.w, C), 2);
  };
  load(chunks[0], 0);
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (k + 1 < chunks.size()) load(chunks[k + 1], int((k + 1) % 2));
    run(chunks[k], int(k % 2));
  }
}

}  // namespace tessera::compiler::lowering
