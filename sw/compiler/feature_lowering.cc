// Conv2D and pooling patterns of DenseStackStep (sw/compiler/feature_lowering.h).
#include "sw/compiler/feature_lowering.h"

#include <algorithm>
#include <functional>
#include <stdexcept>
#include <string>

#include "sw/compiler/lowering_util.h"

namespace tessera::compiler::lowering {
namespace {
using Fn = isa::Funct;

// The pooling chunks: output rows [oy0, oy0 + rows), columns [ox0, ox0 + cols) of one sample
// (a chunk narrower than the map is one row).
struct Chunk {
  uint32_t sample, oy0, rows, ox0, cols;
};
// Chunks such that two sets of `buffers` chunk buffers fit the arena: whole rows if one does,
// else pieces of a row.
std::vector<Chunk> pool_chunks(uint64_t ub_lo, uint64_t ub_hi, uint32_t buffers, const Shape3& out,
                               uint32_t batch, uint32_t n, const char* what, uint64_t& buf_bytes) {
  const uint64_t room = (ub_hi - ub_lo) - 2 * buffers * 64 - 64;
  auto need = [&](uint64_t values) {
    return 2 * buffers * (ceil_div(values, n) * uint64_t{n} * 2);
  };
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

namespace {
// Zeroes the UB rows [dst, + rows x pitch): `run` bf16 of each, from the zero block.
void zero_ub(ProgramBuilder& b, uint32_t zero, uint32_t zero_elems, uint32_t dst, uint32_t run,
             uint32_t rows, uint32_t pitch) {
  for (uint32_t off = 0; off < run && rows; off += zero_elems) {
    const uint32_t n = std::min(zero_elems, run - off);
    b.dma_copy(ub(zero, {{n, 2}, {rows, 0}}), ub(dst + off * 2, {{n, 2}, {rows, int32_t(pitch)}}),
               2);
  }
}
// Zeroes HBM runs of `run` bf16 at dst repeated over `outer` loops, from the zero block.
void zero_hbm_walk(ProgramBuilder& b, uint32_t zero, uint32_t zero_elems, uint64_t dst,
                   uint64_t run, std::vector<std::pair<uint32_t, int32_t>> outer) {
  for (const auto& l : outer)
    if (!l.first) return;
  for (uint64_t off = 0; off < run; off += zero_elems) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(zero_elems, run - off));
    std::vector<std::pair<uint32_t, int32_t>> s{{n, 2}}, d{{n, 2}};
    for (const auto& l : outer) {
      s.push_back({l.first, 0});
      d.push_back(l);
    }
    b.dma_copy(ub(zero, s), hbm(dst + off * 2, d), 2);
  }
}
using Loops = std::vector<std::pair<uint32_t, int32_t>>;
// The output positions [m, mend) of a patch operand in copies: a piece of an output row (one
// loop), whole output rows (two), whole samples (three, when `samples`). For each: the first
// position, its pixel's byte offset in the map (tap (0, 0)), and the position loops of the
// map and of a destination `step` bytes a position.
void for_each_segment(const PatchMap& p, uint64_t m, uint64_t mend, int32_t step, bool samples,
                      const std::function<void(uint64_t, uint64_t, Loops, Loops)>& copy) {
  const uint64_t plane = uint64_t{p.ho} * p.wo;
  const int32_t sx = int32_t(p.s * p.map.px), sy = int32_t(uint64_t{p.s} * p.w * p.map.px);
  while (m < mend) {
    const uint64_t bi = m / plane, rem = m % plane;
    const uint32_t oy = static_cast<uint32_t>(rem / p.wo), ox = static_cast<uint32_t>(rem % p.wo);
    const uint64_t at =
        bi * p.map.sample + (uint64_t{p.s} * oy * p.w + uint64_t{p.s} * ox) * p.map.px;
    const uint64_t left = mend - m, first = m;
    if (ox || left < p.wo) {
      const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(p.wo - ox, left));
      m += n;
      copy(first, at, {{n, sx}}, {{n, step}});
    } else if (oy || left < plane || !samples) {
      const uint32_t nr = static_cast<uint32_t>(std::min<uint64_t>(p.ho - oy, left / p.wo));
      m += uint64_t{nr} * p.wo;
      copy(first, at, {{p.wo, sx}, {nr, sy}}, {{p.wo, step}, {nr, int32_t(p.wo * step)}});
    } else {
      const uint32_t nb = static_cast<uint32_t>(std::min<uint64_t>(left / plane, 65535));
      m += nb * plane;
      copy(first, at, {{p.wo, sx}, {p.ho, sy}, {nb, int32_t(p.map.sample)}},
           {{p.wo, step}, {p.ho, int32_t(p.wo * step)}, {nb, int32_t(plane * step)}});
    }
  }
}
}  // namespace

void emit_gather_patches(ProgramBuilder& b, const PatchMap& p, uint64_t r0, uint32_t rows,
                         uint32_t c0, uint32_t cols, uint32_t ub_dst, uint32_t pitch, uint32_t zero,
                         uint32_t zero_elems, bool pad_cols) {
  const uint64_t M = p.rows();
  const uint32_t K = p.cols(), kc = p.k * p.c, px = p.map.px;
  const uint64_t rend = std::min<uint64_t>(r0 + rows, M);
  // One run of `len` values at column `col` of the operand (inside kernel row ky, from the
  // tap's channel offset `off` bytes into its window row) for the rows [r0, rend), and with
  // `nky` > 1 the same run of the next kernel rows too (whole rows of a compact map: one more
  // loop): copies of a piece of an output row, of whole output rows, of whole samples.
  auto runs = [&](uint32_t ky, uint64_t off, uint32_t len, uint32_t col, uint32_t nky) {
    // the kernel rows just inside the run: an operand row's kernel rows follow one another,
    // so their runs land in the row's UB word together (one write, not one a kernel row), and
    // the rows' source words, a map row apart, stay among the copy's read slots (each read
    // once); whole samples need a fourth loop
    auto with = [&](Loops loops, std::pair<uint32_t, int32_t> kernel_rows) {
      loops.insert(loops.begin(), {len, 2});
      if (nky > 1) loops.insert(loops.begin() + 1, kernel_rows);
      return loops;
    };
    for_each_segment(
        p, r0, rend, int32_t(pitch), nky == 1, [&](uint64_t m, uint64_t at, Loops src, Loops dst) {
          b.dma_copy(hbm(p.map.addr + at + uint64_t{ky} * p.w * px + off,
                         with(src, {nky, int32_t(uint64_t{p.w} * px)})),
                     ub(static_cast<uint32_t>(ub_dst + (m - r0) * pitch + uint64_t{col} * 2),
                        with(dst, {nky, int32_t(kc * 2)})),
                     2);
        });
  };
  for (uint32_t ky = 0; ky < p.k;) {
    const uint32_t a = std::max(c0, ky * kc), e = std::min(c0 + cols, (ky + 1) * kc);
    if (a >= e) {
      ++ky;
      continue;
    }
    if (px == p.c * 2) {  // compact: the row's taps are consecutive pixels
      uint32_t nky = 1;   // and whole kernel rows one copy
      if (a == ky * kc && e == (ky + 1) * kc)
        while (ky + nky < p.k && (ky + nky + 1) * kc <= c0 + cols) ++nky;
      runs(ky, uint64_t{a - ky * kc} * 2, e - a, a - c0, nky);
      ky += nky;
      continue;
    }
    for (uint32_t j = a; j < e;) {  // tap by tap
      const uint32_t kx = (j - ky * kc) / p.c, ch = (j - ky * kc) % p.c;
      const uint32_t n = std::min(e - j, p.c - ch);
      runs(ky, uint64_t{kx} * px + ch * 2, n, j - c0, 1);
      j += n;
    }
    ++ky;
  }
  if (pad_cols && c0 + cols > K) {
    const uint32_t z0 = std::max(c0, K);
    zero_ub(b, zero, zero_elems, ub_dst + (z0 - c0) * 2, c0 + cols - z0,
            static_cast<uint32_t>(rend > r0 ? rend - r0 : 0), pitch);
  }
  if (r0 + rows > rend) {
    const uint32_t first = static_cast<uint32_t>(rend > r0 ? rend - r0 : 0);
    zero_ub(b, zero, zero_elems, ub_dst + first * pitch, cols, rows - first, pitch);
  }
}

void emit_gather_patches_t(ProgramBuilder& b, const PatchMap& p, uint32_t j0, uint32_t rows,
                           uint64_t m0, uint32_t cols, uint32_t ub_dst, uint32_t pitch,
                           uint32_t zero, uint32_t zero_elems) {
  const uint64_t mend = std::min<uint64_t>(m0 + cols, p.rows());
  for (uint32_t j = 0; j < rows; ++j) {
    const uint32_t col = j0 + j, ky = col / (p.k * p.c), kx = col / p.c % p.k, ch = col % p.c;
    const uint64_t tap = (uint64_t{ky} * p.w + kx) * p.map.px + ch * 2;
    for_each_segment(p, m0, mend, 2, true, [&](uint64_t m, uint64_t at, Loops src, Loops dst) {
      b.dma_copy(walk(p.map.space, p.map.addr + at + tap, src),
                 ub(static_cast<uint32_t>(ub_dst + j * pitch + (m - m0) * 2), dst), 2);
    });
  }
  if (m0 + cols > mend) {
    const uint32_t first = static_cast<uint32_t>(mend > m0 ? mend - m0 : 0);
    zero_ub(b, zero, zero_elems, ub_dst + first * 2, cols - first, rows, pitch);
  }
}

void emit_place_map(ProgramBuilder& b, const MapRef& src, uint32_t src_w, uint32_t h, uint32_t w,
                    uint32_t c, uint32_t batch, uint64_t dst, uint32_t dst_h, uint32_t dst_w,
                    uint32_t y0, uint32_t x0, uint32_t sy, uint32_t sx) {
  if (!h || !w || !batch) return;
  const uint32_t dpx = c * 2;
  const uint64_t at = dst + (uint64_t{y0} * dst_w + x0) * dpx;
  const int32_t drow = int32_t(uint64_t{sy} * dst_w * dpx),
                dsample = int32_t(uint64_t{dst_h} * dst_w * dpx);
  const int32_t srow = int32_t(uint64_t{src_w} * src.px);
  if (sx == 1 && src.px == dpx)  // a row of pixels is one run
    b.dma_copy(hbm(src.addr, {{w * c, 2}, {h, srow}, {batch, int32_t(src.sample)}}),
               hbm(at, {{w * c, 2}, {h, drow}, {batch, dsample}}), 2);
  else
    b.dma_copy(
        hbm(src.addr, {{c, 2}, {w, int32_t(src.px)}, {h, srow}, {batch, int32_t(src.sample)}}),
        hbm(at, {{c, 2}, {w, int32_t(sx * dpx)}, {h, drow}, {batch, dsample}}), 2);
}

void emit_zero_frame(ProgramBuilder& b, uint32_t zero, uint32_t zero_elems, uint64_t dst,
                     uint32_t batch, uint32_t dst_h, uint32_t dst_w, uint32_t c, uint32_t y0,
                     uint32_t x0, uint32_t h, uint32_t w) {
  const uint64_t row = uint64_t{dst_w} * c, sample = uint64_t{dst_h} * row;
  const int32_t ss = int32_t(sample * 2), rs = int32_t(row * 2);
  zero_hbm_walk(b, zero, zero_elems, dst, y0 * row, {{batch, ss}});  // rows above
  zero_hbm_walk(b, zero, zero_elems, dst + (y0 + h) * row * 2, (dst_h - y0 - h) * row,
                {{batch, ss}});  // rows below
  const uint64_t mid = dst + y0 * row * 2;
  zero_hbm_walk(b, zero, zero_elems, mid, uint64_t{x0} * c, {{h, rs}, {batch, ss}});  // left
  zero_hbm_walk(b, zero, zero_elems, mid + uint64_t{x0 + w} * c * 2, uint64_t{dst_w - x0 - w} * c,
                {{h, rs}, {batch, ss}});  // right
}

void emit_flip_kernel(ProgramBuilder& b, const ConvGeom& g, uint64_t w16, uint32_t w_pitch,
                      uint64_t wflip, uint32_t flip_pitch) {
  const uint32_t C = g.in.c, F = g.out.c, k = g.k;
  // source: tap (ky, kx) is columns (ky k + kx) C .. + C of every row f; destination: rows
  // ((k-1-ky) k + (k-1-kx)) F + f. kx and ky run forward in the source, backward in wflip.
  b.dma_copy(
      hbm(w16, {{C, 2}, {F, int32_t(w_pitch)}, {k, int32_t(C * 2)}, {k, int32_t(k * C * 2)}}),
      hbm(wflip + (uint64_t{k} * k - 1) * F * flip_pitch, {{C, 2},
                                                           {F, int32_t(flip_pitch)},
                                                           {k, -int32_t(F * flip_pitch)},
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
  // relu gradient folded into g as (max > 0) — the tap that takes g equals the max; 25 VPU
  // instructions a vector.
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
      // V11 holds the gradient until a tap equal to the max takes it, then 0
      for (uint32_t t = 0; t < taps; ++t) {
        b.vpu_op(Fn::kCmpEq, 13, 1 + t, 10);
        b.vpu_op(Fn::kSel, 15, 11, 0, 13);
        if (t + 1 < taps) b.vpu_op(Fn::kSel, 11, 0, 11, 13);
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
