// The convolution operand patterns of sw/compiler/feature_lowering.h run as programs on the
// functional model against a host im2col: emit_gather_patches and its transpose
// emit_gather_patches_t (every window of rows and columns, past the operand's rows and the
// kernel's columns, compact and padded-pixel maps, strides 1 and 2), emit_place_map (with the input
// gradient's dilation) and emit_zero_frame. UB and HBM start as NaN garbage, so a byte the pattern
// should write and does not, or one it should leave and writes, is seen.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "sw/compiler/feature_lowering.h"
#include "sw/compiler/lowering_util.h"
#include "sw/compiler/matmul_lowering.h"
#include "tessera/functional_model.h"

namespace tessera {
namespace {

using compiler::ProgramBuilder;
namespace lw = compiler::lowering;

constexpr int kN = 4;
constexpr uint64_t kProg = 0x800000, kMap = 0x10000, kUbZero = 0, kZeroElems = 32;
constexpr uint32_t kDst = 256;  // UB destination of the gathers
constexpr uint16_t kGarbage = 0x7FC1;  // a NaN: never a value the patterns move

uint16_t ub16(const functional::FunctionalModel& m, uint64_t at) {
  return static_cast<uint16_t>(m.ub()[at] | m.ub()[at + 1] << 8);
}

// Runs what `emit` adds after the zero block is loaded from (never written, so zero) HBM.
functional::RunResult run(functional::FunctionalModel& m,
                          const std::function<void(ProgramBuilder&)>& emit) {
  ProgramBuilder b(kN, m.config().ub_bytes, m.config().acc_rows);
  b.dma_copy(lw::hbm(0x7F0000, {{static_cast<uint32_t>(kZeroElems), 2}}),
             lw::ub(kUbZero, {{static_cast<uint32_t>(kZeroElems), 2}}), 2);
  b.signal(isa::Unit::kDma);
  emit(b);
  m.load_program(kProg, b.finish());
  return m.run(kProg);
}

struct Geometry {
  uint32_t k, s, c, h, w, batch, px_pad;  // px_pad: extra channels of pitch (not compact)
};

// A valid convolution's map over g at kMap (random bf16 values; samples `gap` bytes further
// apart than their pixels need) and the host's im2col of it: value(m, col), 0 past the
// operand's rows and the kernel's columns.
struct HostMap {
  Geometry g;
  lw::PatchMap p;
  std::vector<uint16_t> map;
  HostMap(const Geometry& geo, uint32_t gap, std::mt19937& rng) : g(geo) {
    p.k = g.k;
    p.s = g.s;
    p.c = g.c;
    p.w = g.w;
    p.ho = (g.h - g.k) / g.s + 1;
    p.wo = (g.w - g.k) / g.s + 1;
    p.batch = g.batch;
    const uint32_t px = (g.c + g.px_pad) * 2;
    p.map = {kMap, px, uint64_t{g.h} * g.w * px + gap};
    map.resize(p.map.sample / 2 * g.batch);
    for (auto& v : map) v = static_cast<uint16_t>(rng() & 0x7F7F);
  }
  // the map into m's HBM, the UB filled with garbage
  void load(functional::FunctionalModel& m) const {
    m.hbm().write(kMap, map.data(), map.size() * 2);
    for (size_t i = 0; i + 1 < m.ub().size(); i += 2) {
      m.ub()[i] = kGarbage & 0xFF;
      m.ub()[i + 1] = kGarbage >> 8;
    }
  }
  uint16_t value(uint64_t m, uint32_t col) const {
    if (m >= p.rows() || col >= p.cols()) return 0;
    const uint64_t b = m / (p.ho * p.wo), oy = m % (p.ho * p.wo) / p.wo, ox = m % p.wo;
    const uint32_t ky = col / (g.k * g.c), kx = col / g.c % g.k, ch = col % g.c;
    return map[(b * p.map.sample + ((g.s * oy + ky) * g.w + g.s * ox + kx) * p.map.px + ch * 2) /
               2];
  }
};

TEST(PatchGather, EveryWindowOfTheOperandMatchesAHostIm2col) {
  std::mt19937 rng(5);
  const std::vector<Geometry> cases = {{3, 1, 1, 7, 6, 2, 0}, {3, 1, 4, 6, 5, 2, 0},
                                       {2, 2, 3, 7, 7, 3, 0}, {5, 1, 2, 6, 7, 1, 0},
                                       {3, 2, 4, 7, 6, 2, 2}, {1, 1, 8, 3, 4, 2, 0},
                                       {3, 1, 3, 5, 5, 2, 1}};
  for (const Geometry& g : cases) {
    const HostMap host(g, 6, rng);
    const lw::PatchMap& p = host.p;
    const uint64_t M = p.rows();
    const uint32_t K = p.cols();
    const uint32_t px = p.map.px;
    // windows: from the start, unaligned, across samples, past M and past K, ending inside a
    // kernel row
    const std::vector<std::array<uint64_t, 4>> windows = {
        {0, M, 0, K}, {1, std::min<uint64_t>(M, 9), 0, K + 3}, {M / 2, M - M / 2 + 5, 2, K},
        {3, 2 * p.wo + 1, K / 2, K - K / 2 + 2}, {M - 1, 4, 0, K + 1}, {0, 5, 0, K - 1}};
    for (bool pad : {true, false}) {
      for (const auto& win : windows) {
        const uint64_t r0 = win[0];
        const uint32_t rows = static_cast<uint32_t>(win[1]), c0 = static_cast<uint32_t>(win[2]),
                       cols = static_cast<uint32_t>(win[3]);
        const uint32_t pitch = (cols + 3) * 2;  // two bytes of each row's end stay as they were
        functional::FunctionalModel m({kN, 64 * 1024, 64});
        host.load(m);
        const auto r = run(m, [&](ProgramBuilder& b) {
          lw::emit_gather_patches(b, p, r0, rows, c0, cols, kDst, pitch, kUbZero, kZeroElems, pad);
        });
        ASSERT_EQ(r.status, functional::RunStatus::kHalted) << r.describe();
        size_t bad = 0;
        for (uint32_t i = 0; i < rows; ++i)
          for (uint32_t j = 0; j < cols + 3; ++j) {
            const bool pad_col = r0 + i < M && c0 + j >= K && j < cols;
            const uint16_t want =
                j >= cols || (pad_col && !pad) ? kGarbage : host.value(r0 + i, c0 + j);
            bad += ub16(m, kDst + uint64_t{i} * pitch + j * 2) != want;
          }
        EXPECT_EQ(bad, 0u) << "k " << g.k << " s " << g.s << " c " << g.c << " px " << px
                           << " rows [" << r0 << ", +" << rows << ") cols [" << c0 << ", +"
                           << cols << ") pad_cols " << pad;
      }
    }
  }
}

TEST(PatchGather, TransposedWindowsMatchAHostIm2col) {
  std::mt19937 rng(7);
  // one channel at stride 1 (contiguous runs: the first convolution's weight gradient), and
  // element walks (channels, stride 2)
  for (const Geometry& g : {Geometry{3, 1, 1, 7, 6, 3, 0}, Geometry{2, 2, 3, 7, 7, 2, 1}}) {
    const HostMap host(g, 4, rng);
    const lw::PatchMap& p = host.p;
    const uint64_t M = p.rows();
    const uint32_t K = p.cols();
    // (first tap, taps, first position, positions): all, across samples, past M
    const std::vector<std::array<uint64_t, 4>> windows = {
        {0, K, 0, M}, {1, K - 2, p.wo + 1, M - p.wo - 1}, {K - 1, 1, M - 3, 7}};
    for (const auto& win : windows) {
      const uint32_t j0 = static_cast<uint32_t>(win[0]), rows = static_cast<uint32_t>(win[1]);
      const uint64_t m0 = win[2];
      const uint32_t cols = static_cast<uint32_t>(win[3]), pitch = (cols + 2) * 2;
      functional::FunctionalModel m({kN, 64 * 1024, 64});
      host.load(m);
      const auto r = run(m, [&](ProgramBuilder& b) {
        lw::emit_gather_patches_t(b, p, j0, rows, m0, cols, kDst, pitch, kUbZero, kZeroElems);
      });
      ASSERT_EQ(r.status, functional::RunStatus::kHalted) << r.describe();
      size_t bad = 0;
      for (uint32_t j = 0; j < rows; ++j)
        for (uint32_t i = 0; i < cols + 2; ++i)
          bad += ub16(m, kDst + uint64_t{j} * pitch + i * 2) !=
                 (i >= cols ? kGarbage : host.value(m0 + i, j0 + j));
      EXPECT_EQ(bad, 0u) << "k " << g.k << " s " << g.s << " c " << g.c << " taps [" << j0
                         << ", +" << rows << ") positions [" << m0 << ", +" << cols << ")";
    }
  }
}

TEST(PatchGather, PlacedMapWithItsFrameZeroedMatchesTheHost) {
  std::mt19937 rng(9);
  // a 3 x 4 map of 3 channels (pixel pitch 4 channels) placed dilated by (2, 2) at (2, 1)
  // into a 9 x 10 map, and undilated at (1, 2) into a 5 x 7 map
  struct Case {
    uint32_t y0, x0, sy, sx, dh, dw;
  };
  const uint32_t h = 3, w = 4, c = 3, batch = 2, spx = 8;
  const lw::MapRef src{kMap, spx, uint64_t{h} * w * spx};
  std::vector<uint16_t> s(src.sample / 2 * batch);
  for (auto& v : s) v = static_cast<uint16_t>(rng() & 0x7F7F);
  for (const Case& cs : {Case{2, 1, 2, 2, 9, 10}, Case{1, 2, 1, 1, 5, 7}}) {
    functional::FunctionalModel m({kN, 64 * 1024, 64});
    m.hbm().write(kMap, s.data(), s.size() * 2);
    const uint64_t dst = 0x40000, bytes = uint64_t{batch} * cs.dh * cs.dw * c * 2;
    const std::vector<uint16_t> garbage(bytes / 2 + 8, kGarbage);
    m.hbm().write(dst, garbage.data(), garbage.size() * 2);
    const auto r = run(m, [&](ProgramBuilder& b) {
      if (cs.sy == 1)
        lw::emit_zero_frame(b, kUbZero, kZeroElems, dst, batch, cs.dh, cs.dw, c, cs.y0, cs.x0, h,
                            w);
      else
        lw::emit_zero_frame(b, kUbZero, kZeroElems, dst, batch, cs.dh, cs.dw, c, 0, 0, 0, 0);
      lw::emit_place_map(b, src, w, h, w, c, batch, dst, cs.dh, cs.dw, cs.y0, cs.x0, cs.sy, cs.sx);
    });
    ASSERT_EQ(r.status, functional::RunStatus::kHalted) << r.describe();
    std::vector<uint16_t> got(garbage.size());
    m.hbm().read(dst, got.data(), got.size() * 2);
    size_t bad = 0;
    for (uint32_t b = 0; b < batch; ++b)
      for (uint32_t y = 0; y < cs.dh; ++y)
        for (uint32_t x = 0; x < cs.dw; ++x)
          for (uint32_t ch = 0; ch < c; ++ch) {
            uint16_t want = 0;
            const int64_t sy = int64_t(y) - cs.y0, sx = int64_t(x) - cs.x0;
            if (sy >= 0 && sx >= 0 && sy % cs.sy == 0 && sx % cs.sx == 0 && sy / cs.sy < h &&
                sx / cs.sx < w)
              want = s[(b * src.sample + (sy / cs.sy * w + sx / cs.sx) * spx) / 2 + ch];
            bad += got[((uint64_t{b} * cs.dh + y) * cs.dw + x) * c + ch] != want;
          }
    for (size_t i = bytes / 2; i < got.size(); ++i) bad += got[i] != kGarbage;  // past the map
    EXPECT_EQ(bad, 0u) << "dilation " << cs.sy;
  }
}

// The implicit GEMM's tiling search takes only tilings that the UB arena really holds, its
// alignment included: over shapes and arena sizes at N = 128 (alignment 512 bytes, six
// buffers) and N = 16 it returns a plan or "" (the caller gathers), never a tiling whose
// allocation then throws.
TEST(ImplicitGemm, TheTilingSearchFitsTheArenaItAllocates) {
  for (int n : {16, 128}) {
    int planned = 0;
    for (uint32_t k = 1; k <= 3; ++k)
      for (uint32_t wo = 5; wo <= 23; wo += 6)
        for (uint32_t ho = 5; ho <= 35; ho += 10)
          for (uint32_t ct = 1; ct <= 3; ++ct)
            for (uint64_t arena = 16 * 1024; arena <= 256 * 1024; arena += 2560) {
              const uint64_t ub = 256 * 1024;
              ProgramBuilder b(n, ub, 1024);
              lw::Matmul op;
              op.name = "implicit";
              op.M = ho * wo;
              op.Kt = k * k;
              op.Ct = ct;
              op.w_pitch = k * k * n * 2;
              op.w_by_column = true;
              op.epi_row_bytes = 2 * n;
              lw::ImplicitA a;
              a.px = n * 2;
              a.w = wo + k - 1;
              a.k = k;
              a.ho = ho;
              a.wo = wo;
              a.batch = 1;
              a.sample = uint64_t{ho + k - 1} * a.w * a.px;
              const lw::Epilogue epi{nullptr, [](const lw::Block&) {}};
              std::string plan;
              EXPECT_NO_THROW(plan = lw::emit_matmul_implicit(b, op, a, ub - arena, ub, 1024, epi))
                  << "N " << n << " k " << k << " wo " << wo << " ho " << ho << " Ct " << ct
                  << " arena " << arena;
              planned += !plan.empty();
            }
    EXPECT_GT(planned, 0) << "N " << n;  // the search is exercised, not only refusing
  }
}

}  // namespace
}  // namespace tessera
