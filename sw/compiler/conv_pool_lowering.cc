// The conv + relu + max-pool fusion's lowering (sw/compiler/conv_pool_lowering.h).
#include "sw/compiler/conv_pool_lowering.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sw/compiler/lowering_util.h"
#include "sw/numerics/fp_ref.h"

namespace tessera::compiler::lowering {
namespace {
using Fn = isa::Funct;
uint32_t bits_of(float v) { return fp::bits(v); }

// The routing's registers: dp, its codes, the routed value, and the four window positions' codes
// (kTap + t), each a bf16 in both halves of a lane (seleqh compares the halves one by one).
constexpr int kDp = 7, kCode = 8, kRouted = 9, kTap = 10;
void load_route_taps(ProgramBuilder& b) {
  for (int t = 0; t < 4; ++t) {
    const uint32_t h = bits_of(static_cast<float>(t)) >> 16;  // 0..3 are exact in bf16
    b.vpu_li(kTap + t, h << 16 | h);
  }
}

// One pooled vector's routing: dp (at `dp`, its codes at `code`) to the window positions
// `to[k].first` at UB `to[k].second`: code == t ? dp : 0. Two column tiles at once — 2N bf16
// bit patterns loaded as 4N bytes, a pair a lane, routed by seleqh half by half and stored as
// they are — when `pair` and every address is 4N-aligned; else one tile, loaded widened (the
// bf16 in the high half, seleqh's low halves 0) and rounded back exactly on the store.
// Returns the column tiles routed (2 or 1).
uint32_t route_vector(ProgramBuilder& b, uint32_t dp, uint32_t code,
                      const std::vector<std::pair<int, uint32_t>>& to, bool pair) {
  const uint32_t wide = 4 * b.n();
  for (const auto& [t, at] : to) pair = pair && at % wide == 0;
  pair = pair && dp % wide == 0 && code % wide == 0;
  const isa::Kind kind = pair ? isa::Kind::kUbF32 : kBf16;
  b.vpu_ld(kind, kDp, dp);
  b.vpu_ld(kind, kCode, code);
  for (const auto& [t, at] : to) {
    b.vpu_op(Fn::kSelEqH, kRouted, kCode, kTap + t, kDp, 0);
    b.vpu_st(kind, kRouted, at);
  }
  return pair ? 2 : 1;
}
}  // namespace

void emit_conv_pool_epilogue(ProgramBuilder& b, const Block& k, const ConvPoolOut& out,
                             uint32_t ub_bias) {
  const uint32_t N = b.n(), wo = out.wo, wp = wo / 2, row2n = 2 * N;
  if (wo % 2 || k.rows % (2 * wo) || k.r0 % (2 * wo))
    throw std::logic_error("conv + max-pool epilogue: a piece of " + std::to_string(k.rows) +
                           " rows at " + std::to_string(k.r0) + " is not pairs of " +
                           std::to_string(wo) + "-pixel rows");
  const uint32_t rows_p = k.rows / (2 * wo), pixels = rows_p * wp;
  const uint32_t pitch = k.ct * row2n;  // a pooled pixel's tiles in the scratch
  const uint32_t pooled = k.scratch, codes = k.scratch + pixels * pitch;
  for (uint32_t c = 0; c < k.ct; ++c) {
    b.vpu_ld(isa::Kind::kUbF32, 7, ub_bias + (k.c0 + c) * 4 * N);
    for (uint32_t q = 0; q < rows_p; ++q)
      for (uint32_t px = 0; px < wp; ++px) {
        const uint32_t r = q * 2 * wo + 2 * px;  // the window's top-left row in the piece
        b.vpu_ld(kAcc, 1, k.acc(r, c));
        b.vpu_ld(kAcc, 2, k.acc(r + 1, c));
        b.vpu_ld(kAcc, 3, k.acc(r + wo, c));
        b.vpu_ld(kAcc, 4, k.acc(r + wo + 1, c));
        // the window's max (V4 its fourth operand), max(max + bias, 0), the first position
        // holding the max (0 .. 3), then 0 < relu ? code : 4 (sellt: va < vb ? vc : imm)
        b.vpu_op(Fn::kMax4, 5, 1, 2, 3, 4);
        b.vpu_op(Fn::kAddMax, 6, 5, 7, 0);
        const uint32_t at = (q * wp + px) * pitch + c * row2n;
        b.vpu_st(kBf16, 6, pooled + at);
        b.vpu_op(Fn::kArgMax4, 11, 1, 2, 3, 4);
        b.vpu_op(Fn::kSelLt, 11, 0, 6, 11, bits_of(4.0f));
        b.vpu_st(kBf16, 11, codes + at);
      }
  }
  b.signal(isa::Unit::kVpu);
  // pooled pixels of the piece: from pooled row r0 / (2 wo), all samples one after the other
  const uint64_t pix0 = uint64_t{k.r0} / (2 * wo) * wp;
  const uint32_t valid = std::min(k.ct * N, out.f - k.c0 * N);
  for (const auto& [src, dst] : {std::pair<uint32_t, uint64_t>{pooled, out.pooled},
                                 std::pair<uint32_t, uint64_t>{codes, out.codes}}) {
    if (out.rows_batch && dst == out.pooled) {  // pooled-row-major: a pooled row at a time
      for (uint32_t q = 0; q < rows_p; ++q) {
        const uint64_t g = pix0 / wp + q, smp = g / out.hp, py = g % out.hp;
        b.dma_copy(ub(src + q * wp * pitch, {{valid, 2}, {wp, int32_t(pitch)}}),
                   hbm(dst + ((py * out.rows_batch + smp) * wp * out.f + k.c0 * N) * 2,
                       {{valid, 2}, {wp, int32_t(out.f * 2)}}),
                   2);
      }
      continue;
    }
    b.dma_copy(ub(src, {{valid, 2}, {pixels, int32_t(pitch)}}),
               hbm(dst + (pix0 * out.f + k.c0 * N) * 2, {{valid, 2}, {pixels, int32_t(out.f * 2)}}),
               2);
  }
}

void emit_pool_route(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint32_t batch, uint32_t hp,
                     uint32_t wp, uint32_t f, uint64_t dp, uint64_t codes, uint64_t dz) {
  const uint32_t N = b.n(), wo = 2 * wp, ct = f / N, px_bytes = f * 2;
  if (f % N) throw std::logic_error("pooling route: channels not a multiple of N");
  // A chunk: pooled rows [g0, g0 + q) whole, or one pooled row's pixels [p0, p0 + np). Its UB:
  // dp and codes (np pixels each), dz (2 rows x 2 np pixels): 12 np f bytes, two sets.
  const uint64_t room = (ub_hi - ub_lo) - 6 * 64 - 64;
  const uint64_t row_set = uint64_t{12} * wp * f;
  const uint32_t rows_total = batch * hp;
  uint32_t q = static_cast<uint32_t>(std::min<uint64_t>(rows_total, room / (2 * row_set)));
  uint32_t np = wp;
  if (q == 0) {
    q = 1;
    np = static_cast<uint32_t>(std::min<uint64_t>(wp, room / (2 * uint64_t{12} * f)));
    if (np == 0)
      throw std::invalid_argument("MaxPool2D gradient: a pixel of " + std::to_string(f) +
                                  " channels does not fit the " + std::to_string(ub_hi - ub_lo) +
                                  " bytes of UB the phase has");
  }
  struct Chunk {
    uint32_t g0, rows, p0, cols;
  };
  std::vector<Chunk> chunks;
  for (uint32_t g = 0; g < rows_total; g += q)
    for (uint32_t p = 0; p < wp; p += np)
      chunks.push_back({g, std::min(q, rows_total - g), p, std::min(np, wp - p)});
  UbArena a(ub_lo, ub_hi, static_cast<int>(N), "pooling route");
  const uint64_t in_bytes = uint64_t{q} * np * px_bytes;
  uint32_t dp_ub[2], code_ub[2], dz_ub[2];
  for (int i = 0; i < 2; ++i) {
    dp_ub[i] = a.take(in_bytes);
    code_ub[i] = a.take(in_bytes);
    dz_ub[i] = a.take(4 * in_bytes);
  }
  // dp and codes: the chunk's pooled pixels, contiguous in HBM and in the UB
  auto pooled_walk = [&](uint64_t base, const Chunk& c) {
    return hbm(base + (uint64_t{c.g0} * wp + c.p0) * px_bytes,
               {{f, 2}, {c.cols, int32_t(px_bytes)}, {c.rows, int32_t(wp * px_bytes)}});
  };
  auto staged = [&](uint32_t at, const Chunk& c) {
    return ub(at, {{f, 2}, {c.cols, int32_t(px_bytes)}, {c.rows, int32_t(c.cols * px_bytes)}});
  };
  auto load = [&](const Chunk& c, int i) {
    b.dma_copy(pooled_walk(dp, c), staged(dp_ub[i], c), 2);
    b.dma_copy(pooled_walk(codes, c), staged(code_ub[i], c), 2);
    b.signal(isa::Unit::kDma);
  };
  load_route_taps(b);
  auto run = [&](const Chunk& c, int i) {
    // dz in the UB: [pooled row][dy][2 cols pixels][f]; tap t of pixel p at (dy, 2 p + dx)
    const uint32_t zrow = 2 * c.cols * px_bytes;  // one conv row's pixels of the chunk
    for (uint32_t r = 0; r < c.rows; ++r)
      for (uint32_t p = 0; p < c.cols; ++p)
        for (uint32_t j = 0; j < ct;) {
          const uint32_t in = (r * c.cols + p) * px_bytes + j * 2 * N;
          std::vector<std::pair<int, uint32_t>> to;
          for (int t = 0; t < 4; ++t)
            to.push_back({t, dz_ub[i] + (2 * r + t / 2) * zrow + (2 * p + t % 2) * px_bytes +
                                 j * 2 * N});
          j += route_vector(b, dp_ub[i] + in, code_ub[i] + in, to, j + 1 < ct);
        }
    b.signal(isa::Unit::kVpu);
    // conv rows 2 g + dy, columns [2 p0, 2 p0 + 2 cols), of M rows (b, oy, ox) wo pixels apart
    b.dma_copy(ub(dz_ub[i], {{f, 2}, {2 * c.cols, int32_t(px_bytes)}, {2 * c.rows, int32_t(zrow)}}),
               hbm(dz + (uint64_t{2 * c.g0} * wo + 2 * c.p0) * px_bytes,
                   {{f, 2}, {2 * c.cols, int32_t(px_bytes)}, {2 * c.rows, int32_t(wo * px_bytes)}}),
               2);
  };
  load(chunks[0], 0);
  for (size_t k = 0; k < chunks.size(); ++k) {
    if (k + 1 < chunks.size()) load(chunks[k + 1], int((k + 1) % 2));
    run(chunks[k], int(k % 2));
  }
}

namespace {
// The pooled rows [g0, g1) that conv rows [r0, end) lie in, staged at `at` (dp, then codes).
struct Staged {
  uint64_t g0 = 0, g1 = 0;
  uint32_t at = 0;
};
Staged stage_pooled_rows(ProgramBuilder& b, const RouteOperand& r, uint64_t r0, uint64_t end,
                         uint32_t at) {
  const uint32_t wp = r.wo / 2, px_bytes = r.f * 2;
  Staged s{r0 / r.wo / 2, (end - 1) / r.wo / 2 + 1, at};
  const uint32_t pixels = static_cast<uint32_t>((s.g1 - s.g0) * wp);
  if (2ull * pixels * px_bytes > r.stage_bytes)
    throw std::logic_error(
        "pooling route in the weight gradient: a group's pooled rows exceed "
        "the staging");
  for (const auto& [from, to] : {std::pair<uint64_t, uint32_t>{r.dp, at},
                                 std::pair<uint64_t, uint32_t>{r.codes, at + pixels * px_bytes}})
    b.dma_copy(hbm(from + s.g0 * wp * px_bytes, {{r.f, 2}, {pixels, int32_t(px_bytes)}}),
               ub(to, {{r.f, 2}, {pixels, int32_t(px_bytes)}}), 2);
  b.signal(isa::Unit::kDma);
  return s;
}
}  // namespace

void emit_route_operand(ProgramBuilder& b, RouteOperand& r, uint64_t r0, uint32_t rows, uint32_t c0,
                        uint32_t cols, uint32_t dst, uint32_t pitch) {
  const uint32_t N = b.n(), wo = r.wo, wp = wo / 2, px_bytes = r.f * 2, tiles = cols / N;
  if (cols % N || wo % 2) throw std::logic_error("pooling route: columns or width");
  const uint64_t end = std::min<uint64_t>(r0 + rows, r.m);
  // this call's stage: prefetched by the call before, or loaded now
  Staged cur;
  if (r0 < end) {
    if (r.ahead_r0 == r0) {
      cur = {r0 / wo / 2, (end - 1) / wo / 2 + 1, r.stage[r.ahead_buf]};
    } else {
      r.ahead_buf = r.turn++ % 2;
      cur = stage_pooled_rows(b, r, r0, end, r.stage[r.ahead_buf]);
    }
  }
  // the next call's (the following rows), into the other buffer, before this call's VPU work
  const uint64_t n0 = r0 + rows, n1 = std::min<uint64_t>(n0 + rows, r.m);
  r.ahead_r0 = ~0ull;
  if (n0 < n1) {
    r.ahead_buf = r.turn++ % 2;
    stage_pooled_rows(b, r, n0, n1, r.stage[r.ahead_buf]);
    r.ahead_r0 = n0;
  }
  for (uint64_t m = std::max<uint64_t>(r0, r.m); m < r0 + rows; ++m)  // the padding rows
    for (uint32_t j = 0; j < tiles; ++j)
      b.vpu_st(kBf16, 0, dst + static_cast<uint32_t>(m - r0) * pitch + j * 2 * N);
  if (r0 < end) {
    const uint32_t s = cur.at;
    const uint32_t s_codes = s + static_cast<uint32_t>((cur.g1 - cur.g0) * wp) * px_bytes;
    load_route_taps(b);
    for (uint64_t y = r0 / wo; y * wo < end; ++y) {  // conv rows (b ho + oy)
      const uint64_t ma = std::max<uint64_t>(r0, y * wo),
                     mb = std::min<uint64_t>(end, (y + 1) * wo);
      const uint32_t dy = static_cast<uint32_t>(y % 2);
      const uint32_t row0 = static_cast<uint32_t>(y / 2 - cur.g0) * wp;  // staged pixel, ox 0
      // pair by pair, every column tile of a pair together: a row's pairs are one loop body
      for (uint64_t m = ma; m < mb;) {
        const uint32_t ox = static_cast<uint32_t>(m - y * wo);
        const uint32_t n = std::min<uint32_t>(2 - ox % 2, static_cast<uint32_t>(mb - m));
        for (uint32_t j = 0; j < tiles;) {
          const uint32_t at = (row0 + ox / 2) * px_bytes + (c0 + j * N) * 2;
          std::vector<std::pair<int, uint32_t>> to;
          for (uint32_t k = 0; k < n; ++k)
            to.push_back({static_cast<int>(2 * dy + ox % 2 + k),
                          dst + static_cast<uint32_t>(m + k - r0) * pitch + j * 2 * N});
          j += route_vector(b, s + at, s_codes + at, to, j + 1 < tiles);
        }
        m += n;
      }
    }
  }
  b.signal(isa::Unit::kVpu);
}

bool conv_pool_weight_gradient_fits(int n, uint64_t ub_bytes, uint32_t h, uint32_t w, uint32_t k,
                                    uint32_t f) {
  const uint64_t N = static_cast<uint64_t>(n), cw = w - k + 1;
  const uint64_t rpad = (2 * cw + N - 1) / N * N;
  const uint64_t in_bytes = (uint64_t{k} * k + 1) * rpad * 2 + 2 * (cw / 2) * f * 2;
  return in_bytes + rpad * f * 2 + uint64_t{k + 1} * w * 2 + 64 * 6 + 256 <= ub_bytes;
}

void emit_conv_pool_weight_gradient(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi,
                                    const ConvPoolWeightGrad& g) {
  const uint32_t N = b.n(), K = g.k, T = K * K, H = g.h, W = g.w, F = g.f;
  const uint32_t CW = W - K + 1, CH = H - K + 1, PW = CW / 2, PH = CH / 2;
  if (CW % 2 || CH % 2 || F % N)
    throw std::logic_error("conv + max-pool weight gradient: odd map or filters");
  const uint32_t RW = 2 * CW;                  // positions of an item
  const uint32_t Rpad = (RW + N - 1) / N * N;  // ... in whole K tiles
  const uint32_t at_bytes = (T + 1) * Rpad * 2, row_bytes = PW * F * 2, dz_bytes = Rpad * F * 2;
  const uint32_t row2n = 2 * N;
  UbArena a(ub_lo, ub_hi, static_cast<int>(N), "conv + max-pool weight gradient");
  // The MXU takes the items' dz in groups of P (one SIGNAL a group), emitted `lag` = 1 item
  // after the group's last dz so that its WAIT is met when the decoder reaches it. In flight:
  // the group the MXU runs, the dz the lag holds back and the next group: 2 P + 2 dz buffers;
  // input sets (im2col^T, dp, codes) P + 4: the DMA loads up to 3 items ahead. Smaller UBs:
  // P = 1, lag 0, fewer sets.
  const uint64_t in_bytes = uint64_t{at_bytes} + 2 * row_bytes;
  const uint32_t rows_in = 2 + K - 1;  // image rows of an item
  uint64_t stage_bytes = 2ull * H * W * 2;
  auto fits = [&](int sets, int dzs) {
    return a.free() >= uint64_t(sets) * in_bytes + uint64_t(dzs) * dz_bytes + stage_bytes +
                           64 * (3 * sets + dzs + 2);
  };
  uint32_t P = 2, lag = 1;
  int nin = 6, ndz = 6;
  const bool whole = fits(nin, ndz);
  if (!whole) stage_bytes = uint64_t{rows_in} * W * 2;
  if (!fits(nin, ndz)) {
    P = 1;
    lag = 0;
    nin = 3;
    ndz = 2;
  }
  while (nin > 1 && !fits(nin, ndz)) {
    --nin;
    ndz = std::min(ndz, nin);
  }
  uint32_t at[6], dp[6], code[6], dz[6];
  for (int i = 0; i < nin; ++i) at[i] = a.take(at_bytes);
  // dp and codes: one block each, the sets back to back (a pair of items loads with one copy)
  const uint32_t dp0 = a.take(uint64_t(nin) * row_bytes);
  const uint32_t code0 = a.take(uint64_t(nin) * row_bytes);
  for (int i = 0; i < nin; ++i) {
    dp[i] = dp0 + i * row_bytes;
    code[i] = code0 + i * row_bytes;
  }
  for (int i = 0; i < ndz; ++i) dz[i] = a.take(dz_bytes);
  const uint32_t stage = a.take(stage_bytes);
  // im2col^T: T tap rows (padding positions zero) and a row of ones (the bias gradient); dz
  // padding rows zero — written once, the loads and the routing never touch them
  b.vpu_lif(8, 1.0f);
  for (int i = 0; i < nin; ++i) {
    for (uint32_t r = 0; r < T; ++r)
      for (uint32_t c = RW / N; c < Rpad / N; ++c)
        b.vpu_st(kBf16, 0, at[i] + (r * Rpad + c * N) * 2);
    for (uint32_t c = 0; c < Rpad / N; ++c) b.vpu_st(kBf16, 8, at[i] + (T * Rpad + c * N) * 2);
  }
  for (int i = 0; i < ndz; ++i)
    for (uint32_t r = RW; r < Rpad; ++r)
      for (uint32_t j = 0; j < F / N; ++j) b.vpu_st(kBf16, 0, dz[i] + (r * F + j * N) * 2);
  load_route_taps(b);
  b.signal(isa::Unit::kVpu);
  const uint32_t items = g.batch * PH;
  // Loads run nin - P - lag items ahead: the set a load overwrites is that of an item whose MXU
  // group is already emitted (in program order after the group's reads, so it waits for them).
  const uint32_t ahead = nin - static_cast<int>(P + lag);
  // A pair's two items are consecutive in HBM and, with an even number of sets, in the UB.
  const bool pairs = nin % 2 == 0 && static_cast<int>(ahead) + 2 <= nin;
  auto load = [&](uint32_t i) {
    const uint32_t img = i / PH, py = i % PH, buf = i % nin;
    // the item's image rows 2 py .. 2 py + rows_in - 1 in the UB: the whole image, loaded
    // with its first item (two buffers, items in order), or the item's rows alone
    uint32_t rows;
    const uint64_t image = g.images + uint64_t{img} * H * W * 2;
    if (whole) {
      const uint32_t sb = stage + (img % 2) * H * W * 2;
      if (py == 0) copy_linear(b, isa::Space::kHbm, image, isa::Space::kUb, sb, uint64_t{H} * W, 2);
      rows = sb + 2 * py * W * 2;
    } else {
      copy_linear(b, isa::Space::kHbm, image + uint64_t{2 * py} * W * 2, isa::Space::kUb, stage,
                  uint64_t{rows_in} * W, 2);
      rows = stage;
    }
    b.dma_copy(
        ub(rows, {{CW, 2}, {2, int32_t(W * 2)}, {K, 2}, {K, int32_t(W * 2)}}),
        ub(at[buf],
           {{CW, 2}, {2, int32_t(CW * 2)}, {K, int32_t(Rpad * 2)}, {K, int32_t(K * Rpad * 2)}}),
        2);
    const bool pair_first = pairs && i % 2 == 0 && i + 1 < items && py + 1 < PH;
    const bool pair_second = pairs && i % 2 == 1 && py > 0;
    if (!pair_second) {
      const uint32_t n_items = pair_first ? 2 : 1;
      const uint64_t off = (uint64_t{img} * PH + py) * PW * F * 2;
      copy_linear(b, isa::Space::kHbm, g.dp + off, isa::Space::kUb, dp[buf],
                  uint64_t{n_items} * PW * F, 2);
      copy_linear(b, isa::Space::kHbm, g.codes + off, isa::Space::kUb, code[buf],
                  uint64_t{n_items} * PW * F, 2);
    }
    b.signal(isa::Unit::kDma);
  };
  for (uint32_t k = 0; k < ahead && k < items; ++k) load(k);
  // The MXU's group: items first .. last - 1, waiting once for all of their inputs.
  uint32_t next_group = 0;
  auto emit_group = [&](uint32_t first, uint32_t last) {
    std::vector<Footprint> fp{{Footprint::Space::kAcc, 0, uint64_t{g.j1 - g.j0} * (T + 1), true}};
    for (uint32_t k = first; k < last; ++k) {
      fp.push_back({Footprint::Space::kUb, dz[k % ndz], dz[k % ndz] + dz_bytes, false});
      fp.push_back({Footprint::Space::kUb, at[k % nin], at[k % nin] + at_bytes, false});
    }
    b.await(isa::Unit::kMxu, fp);
    for (uint32_t k = first; k < last; ++k)
      for (uint32_t j = g.j0; j < g.j1; ++j)
        for (uint32_t c = 0; c < Rpad / N; ++c) {
          b.mxu_ldw(dz[k % ndz] + (c * N * F + j * N) * 2, static_cast<int32_t>(F * 2));
          b.mxu_mm(k > 0 || c > 0, at[k % nin] + c * row2n, static_cast<int32_t>(Rpad * 2), T + 1,
                   (j - g.j0) * (T + 1));
        }
    // reads-only until the last group: it frees the items' buffers without draining the
    // array; the update reads the ACC after the full one
    b.signal(isa::Unit::kMxu, last < items);
  };
  for (uint32_t i = 0; i < items; ++i) {
    const uint32_t buf = i % nin, zb = i % ndz;
    if (ahead == 0)
      load(i);
    else if (i + ahead < items)
      load(i + ahead);
    // dz of the item's two conv rows: position (dy, 2 px + dx) gets dp where its code is
    // 2 dy + dx, else 0
    for (uint32_t j = g.j0; j < g.j1;) {
      // tiles j, j + 1 together where every pixel's addresses allow (the buffers are 4N-aligned)
      const uint32_t tiles = j + 1 < g.j1 && j % 2 == 0 && F * 2 % (4 * N) == 0 ? 2 : 1;
      for (uint32_t px = 0; px < PW; ++px) {
        std::vector<std::pair<int, uint32_t>> to;
        for (int pos = 0; pos < 4; ++pos)
          to.push_back({pos, dz[zb] + (((pos / 2) * CW + 2 * px + pos % 2) * F + j * N) * 2});
        if (route_vector(b, dp[buf] + (px * F + j * N) * 2, code[buf] + (px * F + j * N) * 2,
                         to, tiles == 2) != tiles)
          throw std::logic_error("conv + max-pool weight gradient: a routed pair not aligned");
      }
      j += tiles;
    }
    b.signal(isa::Unit::kVpu);
    // Items 0 .. i - lag are ready for the MXU: emit the whole groups among them.
    const uint32_t ready = i + 1 >= lag ? i + 1 - lag : 0;
    while (next_group < items && (next_group + P <= ready || (i + 1 == items))) {
      emit_group(next_group, std::min(items, next_group + P));
      next_group = std::min(items, next_group + P);
    }
  }
}

}  // namespace tessera::compiler::lowering
