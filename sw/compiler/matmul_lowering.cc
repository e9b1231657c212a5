// The generic tiled MXU matmul and the DMA helpers (sw/compiler/matmul_lowering.h).
#include "sw/compiler/matmul_lowering.h"

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <vector>

#include "sw/compiler/lowering_util.h"

namespace tessera::compiler::lowering {

// The generic tiled matmul. Row blocks of R rows x column groups of CT tiles fill half the ACC
// (blocks alternate halves, so block k's epilogue overlaps block k + 1's matmul); (R, CT) is the
// pair with the least HBM traffic (A is read once per column group, the weights once per row
// block). The contraction runs in groups of KG tiles, A and weight rows double-buffered in the
// UB (the builder's sync lets the DMA load the next group while the MXU works). The epilogue
// runs in pieces of rows through two to four (Matmul::epi_buffers) alternating scratch
// buffers, so a piece's DMA overlaps the VPU work of the one before. Returns the tiling as text
// (for tessera compile --dump).
namespace {
// Zeroes `bytes` at `addr` in `space` with elements of `e` bytes, repeating the UB's zero
// block (`zero_bytes` of zeros at `ub_zero`; the source walk steps 0).
void emit_zero_fill(ProgramBuilder& b, uint32_t ub_zero, uint32_t zero_bytes, isa::Space space,
                    uint64_t addr, uint64_t bytes, int e) {
  const uint32_t run = zero_bytes / e;  // elements of one repetition
  while (bytes) {
    const uint64_t reps = std::min<uint64_t>(bytes / zero_bytes, 65535);
    if (reps) {
      b.dma_copy(ub(ub_zero, {{run, e}, {static_cast<uint32_t>(reps), 0}}),
                 walk(space, addr, {{run, e}, {static_cast<uint32_t>(reps), int32_t(zero_bytes)}}),
                 e);
      addr += reps * zero_bytes;
      bytes -= reps * zero_bytes;
      continue;
    }
    const uint32_t tail = static_cast<uint32_t>(bytes / e);
    b.dma_copy(ub(ub_zero, {{tail, e}}), walk(space, addr, {{tail, e}}), e);
    bytes = 0;
  }
}

// A contraction group of plain weights (group g: kgn of its KGN rows, column tiles c0 ..
// c0 + ctn / N) into the UB buffer `wbuf` laid out as load_weight_tile reads it: W^T rows
// (w_by_column) as [column][KGN], else [contraction row][CT N].
void load_weight_group(ProgramBuilder& b, const Matmul& op, uint32_t g, uint32_t KGN, uint32_t kgn,
                       uint32_t c0, uint32_t ctn, uint32_t CT, uint32_t wbuf) {
  const uint32_t N = b.n();
  if (op.w_by_column)
    b.dma_copy(hbm(op.w + uint64_t{c0} * N * op.w_pitch + uint64_t{g} * KGN * 2,
                   {{kgn, 2}, {ctn, int32_t(op.w_pitch)}}),
               ub(wbuf, {{kgn, 2}, {ctn, int32_t(KGN * 2)}}), 2);
  else
    b.dma_copy(hbm(op.w + uint64_t{g} * KGN * op.w_pitch + uint64_t{c0} * N * 2,
                   {{ctn, 2}, {kgn, int32_t(op.w_pitch)}}),
               ub(wbuf, {{ctn, 2}, {kgn, int32_t(CT * N * 2)}}), 2);
}
// MXU.LDW of tile (contraction tile kt of the group, column tile c) from such a buffer.
void load_weight_tile(ProgramBuilder& b, const Matmul& op, uint32_t wbuf, uint32_t kt, uint32_t c,
                      uint32_t KGN, uint32_t CT) {
  const uint32_t N = b.n();
  if (op.w_by_column)
    b.mxu_ldw(wbuf + (c * N * KGN + kt * N) * 2, KGN * 2, true);
  else
    b.mxu_ldw(wbuf + (kt * N * CT * N + c * N) * 2, CT * N * 2);
}
}  // namespace

std::string emit_matmul(ProgramBuilder& b, const Matmul& op, uint64_t ub_lo, uint64_t ub_hi,
                        uint32_t acc_rows, const Epilogue& epi) {
  const uint32_t N = b.n();
  const uint32_t half = acc_rows / 2;
  const uint64_t arena = ub_hi - ub_lo, tile = uint64_t{N} * N * 2;
  // The tiling: for each column group size ct and row block size (the largest that fits
  // the ACC half, and its halvings), the contraction group KG that the rest of the arena
  // double-buffers. Plain operands (whole rows from HBM, long runs) take the largest block
  // and the ct with the least HBM traffic. A gathered operand's runs are short (a kernel row
  // of a tap, or less), so there the pick has the least estimated time, max(MXU, DMA): the
  // MXU streams max(rows w, N w + 1) a tile (w UB words a row), the DMA moves 16 HBM bytes a
  // cycle plus kRunCycles a contiguous run and kLoadCycles a load (a copy's start-up).
  // kEpiRowCycles: what the VPU spends on an ACC row of a block's epilogue (a load, a store,
  // an operation), which a single-buffered ACC (below) cannot hide behind the next block.
  constexpr uint64_t kRunCycles = 2, kLoadCycles = 64, kEpiRowCycles = 3;
  struct Tiling {
    uint32_t R = 0, CT = 0, PR = 0, KG = 0;
    uint64_t traffic = 0, time = ~0ull;
    bool single = false;   // blocks take the whole ACC, each epilogue before the next matmul
    uint64_t dma = ~0ull;  // the DMA's estimate: of two tilings as fast, the one with less
    uint64_t mxu = 1;
  };
  // A gathered A operand beside plain weights, without a load epilogue (a convolution's
  // forward and input gradient), whose column tiles fit one group: the largest row block whose
  // contraction groups hold two tiles (or the whole contraction), and at that block the longest
  // groups (half-size epilogue pieces where they buy a longer group or full-size ones leave no
  // room), wins over the time model: the weights are
  // read again for every row block, and the model, which counts runs and loads, not the UB's
  // or the HBM's real costs, misjudged it (docs/compiler.md, the tiling).
  const bool by_rows = op.a_gather && !op.w_gather && !epi.load && op.epi_row_bytes;
  auto runs = [](uint64_t elems, uint32_t run) { return run ? ceil_div(elems, uint64_t{run}) : 1; };
  const bool gathered = op.a_gather || op.w_gather;
  const uint32_t nbuf = std::clamp(op.epi_buffers, 2u, 4u);
  const uint32_t a_run = op.a_gather ? op.a_run : op.Kt * N;
  const uint32_t w_run = op.w_gather && !op.w_by_column ? op.w_run : 0;
  // The A gather's staging buffers (Matmul::a_stage_bytes) when a tiling fits beside them;
  // else the search runs again without them and the gather reads HBM (stage kNoStage).
  const uint64_t align = std::max<uint64_t>(4ull * N, 64);
  const uint32_t ra = std::max(1u, op.row_align);
  const uint32_t nop = std::clamp(op.operand_buffers, 2u, 3u);
  if (op.M % ra)
    throw std::logic_error(std::string(op.name) + ": " + std::to_string(op.M) +
                           " rows are not whole multiples of " + std::to_string(ra));
  // `span`: the ACC rows a block may take — half the ACC (blocks alternate halves, so block k's
  // epilogue overlaps block k + 1's matmul) or, for plain operands and an epilogue without a
  // load part, the whole ACC (blocks twice as large, so half the operand traffic, each
  // epilogue's ACC reads before the next block's matmul: the time model adds them).
  auto search = [&](uint32_t stage_bytes, uint32_t span) {
    const bool single = span > half;
    Tiling best, rows_first;
    for (uint32_t ct = op.whole_columns ? op.Ct : 1; ct <= op.Ct; ++ct) {
      if (ct > span) break;
      const uint32_t r = std::min(op.M, span / ct) / ra * ra;
      // epilogue pieces: `nbuf` buffers in at most half the arena; without a load part, more
      // than two buffers split what two would take into smaller pieces (the VPU runs further
      // ahead of the stores in the same UB, which the operands keep)
      const uint32_t pr =
          op.epi_row_bytes
              ? static_cast<uint32_t>(
                    epi.load ? std::min<uint64_t>(
                                   r, arena / 2 / nbuf / (uint64_t{ct} * op.epi_row_bytes))
                             : std::min<uint64_t>(
                                   r, arena / 2 / 2 / (uint64_t{ct} * op.epi_row_bytes)) *
                                   2 / nbuf) /
                    ra * ra
              : r;
      if (pr < 1) continue;
      const uint64_t left = arena - nbuf * uint64_t{pr} * ct * op.epi_row_bytes;
      // row blocks of the largest size and its halvings (in whole multiples of row_align)
      for (uint32_t ru = r / ra; ru >= 1; ru = ru > 1 ? (ru + 1) / 2 : 0) {
        const uint32_t rr = ru * ra;
        // plain operands: the largest block where one contraction tile of A and W
        // double-buffers, the least HBM traffic
        if (!gathered && 2 * (uint64_t{rr} * 2 * N + ct * tile) + 256 > left) continue;
        // epilogue pieces: the largest that fit; for plain operands and an epilogue without a
        // load part also half that, which leaves room for longer contraction groups and so
        // longer operand runs (the time model decides: the MLP's fwd1 groups of 3 tiles, 96-byte
        // runs, instead of 2). The optimizer's and the gathered operands' tilings keep the rule
        // they were measured with (the model picks worse ones for them).
        const bool plain_model = !gathered && !epi.load;
        const uint32_t p_max = std::min(pr, rr);
        for (uint32_t p : {p_max, std::max<uint32_t>(ra, p_max / 2 / ra * ra)}) {
          if (p != p_max && !(plain_model && op.epi_row_bytes) && !by_rows) break;
          UbArena t(ub_lo, ub_hi, static_cast<int>(N), op.name);
          const uint64_t sc = uint64_t{p} * ct * op.epi_row_bytes;
          if (op.epi_row_bytes && nbuf * sc + 256 > arena) continue;
          if (op.epi_row_bytes)
            for (uint32_t i = 0; i < nbuf; ++i) t.take(sc);
          if (stage_bytes && 2 * (uint64_t{stage_bytes} + align) + 128 > t.free()) continue;
          if (stage_bytes)
            for (int i = 0; i < 2; ++i) t.take(stage_bytes);
          const uint64_t per_tile = uint64_t{rr} * 2 * N + ct * tile;
          const uint32_t kg = static_cast<uint32_t>(
              std::min<uint64_t>(op.max_group_tiles ? std::min(op.Kt, op.max_group_tiles) : op.Kt,
                                 t.free() / (nop * per_tile + 128)));
          if (kg < 1) continue;
          const uint64_t rblocks = ceil_div(op.M, rr), cgroups = ceil_div(op.Ct, ct);
          const uint64_t groups = ceil_div(op.Kt, kg), kgn = uint64_t{kg} * N;
          const uint64_t a_bytes = uint64_t{op.M} * op.Kt * N * 2 * cgroups;
          const uint64_t w_bytes = uint64_t{op.Ct} * N * op.Kt * N * 2 * rblocks;
          // runs: A a row's group in runs of a_run; the weights a row (of the group's or the
          // block's columns) at a time
          const uint64_t a_runs = uint64_t{op.M} * cgroups * groups * runs(kgn, a_run);
          const uint64_t w_runs = op.w_by_column ? rblocks * uint64_t{op.Ct} * N * groups
                                                 : rblocks * cgroups * uint64_t{op.Kt} * N *
                                                       runs(uint64_t{ct} * N, w_run);
          const uint64_t loads = rblocks * cgroups * groups;
          // the epilogue's copies (one out a piece), counted for the plain-operand model
          const uint64_t pieces = op.epi_row_bytes ? rblocks * cgroups * ceil_div(rr, p) : 0;
          const uint64_t dma = (a_bytes + w_bytes) / 16 + kRunCycles * (a_runs + w_runs) +
                               kLoadCycles * (loads + (plain_model ? pieces : 0));
          const uint64_t mxu = rblocks * cgroups * op.Kt * ct * mxu_tile_cycles(N, rr);
          const uint64_t traffic = (a_bytes + w_bytes) / 2;
          const uint64_t epi_drain = single ? rblocks * cgroups * rr * ct * kEpiRowCycles : 0;
          const uint64_t time = gathered || plain_model ? std::max(dma, mxu) + epi_drain : traffic;
          // the whole contraction in one group: larger pieces buy no longer runs, only a coarser
          // pipeline, so half-size pieces (an epilogue without a load part)
          // (a row-aligned epilogue keeps whole blocks: its pieces already combine rows)
          const uint32_t pk = kg == op.Kt && !epi.load && p >= 2 && ra == 1 ? p / 2 : p;
          if ((time < best.time || (time == best.time && single && dma < best.dma)) &&
              (p == p_max || !by_rows))
            best = {rr, ct, pk, kg, traffic, time, single, dma, mxu};
          // (all column tiles in one group, A read once; full-size pieces where they leave room,
          // halved again, as for every matmul, when the whole contraction is one group)
          if (by_rows && ct == op.Ct && kg >= std::min(2u, op.Kt) &&
              (rr > rows_first.R || (rr == rows_first.R && kg > rows_first.KG)))
            rows_first = {rr, ct, pk, kg, traffic, time, single, dma, mxu};
        }
        if (!gathered) break;
      }
    }
    return rows_first.CT ? rows_first : best;
  };
  uint32_t stage_bytes = op.a_stage_bytes;
  Tiling best = search(stage_bytes, half);
  if (!best.CT && stage_bytes) best = search(stage_bytes = 0, half);
  if (!gathered && !epi.load && op.allow_whole_acc && !op.interleave) {
    // Half against whole ACC: both are usually MXU-bound in the model, but the DMA's loads hide
    // behind the MXU less well the closer they come to it (HBM row misses, refresh, the group
    // pipeline's two buffers): fitted on the GEMM benchmark's squares, about dma² / (3 mxu)
    // more cycles.
    auto score = [](const Tiling& t) { return t.time + t.dma / 3 * t.dma / t.mxu; };
    const Tiling whole = search(stage_bytes, acc_rows);
    if (whole.CT && (!best.CT || score(whole) < score(best))) best = whole;
  }
  const uint32_t R = best.R, CT = best.CT, PR = best.PR, KG = best.KG;
  // MXU.MM's acc_stride reaches 256: wider column groups keep their tiles one after the other
  const bool acc_inter = op.acc_interleave && CT <= 256;
  UbArena a(ub_lo, ub_hi, static_cast<int>(N), op.name);
  if (!CT) a.take(arena + 1);  // throws, naming the op: does not fit
  uint32_t scratch[4] = {0, 0, 0, 0};
  if (op.epi_row_bytes)
    for (uint32_t i = 0; i < nbuf; ++i) scratch[i] = a.take(uint64_t{PR} * CT * op.epi_row_bytes);
  // (the A stages: two, whatever the operand buffers — a stage is read only by its own load's
  // gather, which the DMA finishes before it starts the next load)
  uint32_t abuf[3], wbuf[3], stage[2] = {kNoStage, kNoStage};
  if (stage_bytes)
    for (int i = 0; i < 2; ++i) stage[i] = a.take(stage_bytes);
  for (uint32_t i = 0; i < nop; ++i) {
    abuf[i] = a.take(uint64_t{R} * KG * N * 2);
    wbuf[i] = a.take(uint64_t{CT} * N * KG * N * 2);
  }
  const uint32_t KGN = KG * N, groups = ceil_div(op.Kt, KG);
  struct Blk {
    uint32_t r0, rows, c0, ct, acc0;
  };
  std::vector<Blk> blocks;
  for (uint32_t r0 = 0; r0 < op.M; r0 += R)
    for (uint32_t c0 = 0; c0 < op.Ct; c0 += CT)
      blocks.push_back({r0, std::min(R, op.M - r0), c0, std::min(CT, op.Ct - c0),
                        best.single ? 0u : static_cast<uint32_t>(blocks.size() % 2) * half});
  // Whole-ACC blocks split at the accumulator's banks (rtl/mxu/tpu_mxu.sv: its low and high
  // halves of rows; the VPU's read port yields only to an accumulate of its own bank): tiles
  // [0, lo) of block k in the low bank, [lo, ct) in the high one. Each contraction group runs
  // the low tiles, then the high ones, so at a block change the epilogue reads the low bank
  // while the MXU finishes the high tiles, and the high bank while the next block starts on
  // the low ones. 0: no split (half-ACC blocks, interleaved tiles, a softmax's whole rows,
  // every tile in the low bank, or a single block: with no block change to overlap, the split
  // would only repeat an epilogue's per-row work, e.g. a Dropout's hashes, in two pieces). A
  // tile across the boundary counts as high (its epilogue waits while the next block
  // accumulates the low bank).
  auto low_tiles = [&](const Blk& k) -> uint32_t {
    if (!best.single || acc_inter || op.whole_columns || blocks.size() < 2) return 0;
    const uint32_t lo = half / R;
    return lo < k.ct ? lo : 0;
  };
  uint32_t slot = 0;
  // the shape of each buffer's last gathered load (rows, first column, columns)
  std::array<std::array<uint64_t, 3>, 3> a_shape{}, w_shape{};
  auto fresh = [](std::array<uint64_t, 3>& last, std::array<uint64_t, 3> now) {
    const bool f = last != now;
    last = now;
    return f;
  };
  // A block's matmul as steps: its first group's load, then each group's MXU work behind the
  // next group's load.
  using Steps = std::vector<std::function<void()>>;
  auto mm_steps = [&](const Blk& k) {
    const uint32_t ctn = k.ct * N;
    auto slots =
        std::make_shared<std::vector<uint32_t>>();  // the buffer each group was loaded into
    auto load = [&, k, ctn, slots](uint32_t g) {
      const uint32_t kgn = std::min(KG, op.Kt - g * KG) * N, i = slot++ % nop;
      slots->push_back(i);
      if (op.a_gather)
        op.a_gather(k.r0, k.rows, g * KGN, kgn, abuf[i], KGN * 2,
                    fresh(a_shape[i], {k.rows, uint64_t{g} * KGN, kgn}), stage[i % 2]);
      else
        b.dma_copy(hbm(op.a + uint64_t{k.r0} * op.a_pitch + uint64_t{g} * KGN * 2,
                       {{kgn, 2}, {k.rows, int32_t(op.a_pitch)}}),
                   ub(abuf[i], {{kgn, 2}, {k.rows, int32_t(KGN * 2)}}), 2);
      if (op.w_gather && !op.w_by_column)
        op.w_gather(uint64_t{g} * KGN, kgn, k.c0 * N, ctn, wbuf[i], CT * N * 2,
                    fresh(w_shape[i], {kgn, uint64_t{k.c0} * N, ctn}), kNoStage);
      else
        load_weight_group(b, op, g, KGN, kgn, k.c0, ctn, CT, wbuf[i]);
      b.signal(isa::Unit::kDma);
    };
    // the group's MXU work on column tiles [c_lo, c_hi): each tile still sums its contraction
    // tiles in order, whatever the tiles' order
    // (a SIGNAL drains the array: between the banks only in the last group, which the
    // epilogue waits for; the other groups end with SIGNAL ..., reads, which frees their
    // operand buffers for the loads two groups on without a drain)
    auto mxu_work = [&, k](uint32_t g, uint32_t c_lo, uint32_t c_hi, uint32_t i, bool sig) {
      const uint32_t kg = std::min(KG, op.Kt - g * KG);
      for (uint32_t kt = 0; kt < kg; ++kt)
        for (uint32_t c = c_lo; c < c_hi; ++c) {
          load_weight_tile(b, op, wbuf[i], kt, c, KGN, CT);
          if (acc_inter)
            b.mxu_mm(g > 0 || kt > 0, abuf[i] + kt * N * 2, KGN * 2, k.rows, k.acc0 + c, k.ct);
          else
            b.mxu_mm(g > 0 || kt > 0, abuf[i] + kt * N * 2, KGN * 2, k.rows, k.acc0 + c * R);
        }
      if (sig) b.signal(isa::Unit::kMxu, g + 1 < groups);
    };
    const uint32_t lo = low_tiles(k);
    Steps steps{[load] { load(0); }};
    for (uint32_t g = 0; g < groups; ++g) {
      // banked: the low bank's tiles, then the high bank's, each its own step
      steps.push_back([&, k, g, load, slots, mxu_work, lo] {
        if (g + 1 < groups) load(g + 1);
        mxu_work(g, 0, lo ? lo : k.ct, (*slots)[g], !lo || g + 1 == groups);
      });
      if (lo)
        steps.push_back([g, slots, mxu_work, lo, k] { mxu_work(g, lo, k.ct, (*slots)[g], true); });
    }
    return steps;
  };
  auto emit_mm = [&](const Blk& k) {
    for (const auto& st : mm_steps(k)) st();
  };
  // Pipelined: block k + 1's matmul is emitted before block k's epilogue, and each piece's
  // load before the piece before it runs. The pieces form one stream across blocks: the last
  // pieces of a block load the first ones of the next (a load needs only its buffer free, not
  // the block's matmul), so the DMA is not left waiting for the VPU at a block change.
  // With Matmul::interleave, the next block's matmul steps are spread between this block's
  // epilogue pieces instead (short MXU bursts the sequencer dispatches without stalling the
  // epilogue's copies and updates behind a full MXU queue).
  // A banked block's pieces: the low tiles' rows, then the high tiles' (each piece as many rows
  // as a full-width piece's scratch holds); `low_pieces[k]` of them read the low bank.
  std::vector<std::vector<Block>> pieces(blocks.size());
  std::vector<size_t> low_pieces(blocks.size(), 0);
  {
    uint32_t piece = 0;
    for (size_t k = 0; k < blocks.size(); ++k) {
      const Blk& bk = blocks[k];
      const uint32_t lo = low_tiles(bk);
      auto cut = [&](uint32_t c_lo, uint32_t c_hi) {
        const uint32_t ct = c_hi - c_lo;
        const uint32_t pr = std::max(ra, std::min(bk.rows, PR * CT / ct) / ra * ra);
        for (uint32_t p0 = 0; p0 < bk.rows; p0 += pr, ++piece)
          pieces[k].push_back({bk.r0 + p0, std::min(pr, bk.rows - p0), bk.c0 + c_lo, ct, R,
                               scratch[piece % nbuf], bk.acc0 + c_lo * R, p0, acc_inter});
      };
      if (lo) {
        cut(0, lo);
        low_pieces[k] = pieces[k].size();
        cut(lo, bk.ct);
      } else {
        for (uint32_t p0 = 0; p0 < bk.rows; p0 += PR, ++piece)
          pieces[k].push_back({bk.r0 + p0, std::min(PR, bk.rows - p0), bk.c0, bk.ct, R,
                               scratch[piece % nbuf], bk.acc0, p0, acc_inter});
      }
    }
  }
  // the stream's loads in order: (block, piece), issued `nbuf - 1` pieces ahead of the runs
  size_t lk = 0, li = 0;
  auto load_next = [&] {
    while (lk < pieces.size() && li >= pieces[lk].size()) ++lk, li = 0;
    if (lk < pieces.size()) epi.load(pieces[lk][li++]);
  };
  emit_mm(blocks[0]);
  if (best.single) {
    // One ACC for all blocks: block k's epilogue reads its rows before block k + 1's matmul
    // overwrites them; only the next block's first operand loads go ahead of it.
    // A banked block: the low bank's pieces, the next block's first MXU step (its first
    // group's low tiles, or all its tiles), then the high bank's pieces.
    for (size_t k = 0; k < blocks.size(); ++k) {
      Steps next;
      if (k + 1 < blocks.size()) next = mm_steps(blocks[k + 1]);
      size_t done = 0;
      if (!next.empty()) next[done++]();
      for (size_t i = 0; i < pieces[k].size(); ++i) {
        if (low_pieces[k] && i == low_pieces[k] && done < next.size()) next[done++]();
        epi.run(pieces[k][i]);
      }
      for (; done < next.size(); ++done) next[done]();
    }
  }
  for (size_t i = 0; !best.single && epi.load && i + 1 < nbuf; ++i) load_next();
  for (size_t k = 0; !best.single && k < blocks.size(); ++k) {
    Steps next;
    if (k + 1 < blocks.size()) {
      if (op.interleave)
        next = mm_steps(blocks[k + 1]);
      else
        emit_mm(blocks[k + 1]);
    }
    const std::vector<Block>& pk = pieces[k];
    size_t done = 0;  // next's steps emitted
    for (size_t i = 0; i < pk.size(); ++i) {
      if (epi.load) load_next();
      epi.run(pk[i]);
      for (; done < next.size() && done * pk.size() < (i + 1) * next.size(); ++done) next[done]();
    }
    for (; done < next.size(); ++done) next[done]();
  }
  return std::string(op.name) + ": [" + std::to_string(op.M) + " x " + std::to_string(op.Kt * N) +
         "] x [" + std::to_string(op.Kt * N) + " x " + std::to_string(op.Ct * N) + "]" +
         (op.w_by_column ? " (weight tiles transposed, MXU.LDW t)" : "") + "; row blocks of " +
         std::to_string(R) + ", column groups of " + std::to_string(CT) + " tiles, contraction " +
         std::to_string(op.Kt) + " tiles in groups of " + std::to_string(KG) +
         (best.single ? "; the whole ACC a block" : "") +
         (low_tiles(blocks[0]) ? ", its two banks in turn" : "") + "; " +
         std::to_string(best.traffic * 2) +
         " operand bytes from HBM; epilogue pieces of " + std::to_string(PR) + " rows, 2 x " +
         std::to_string(uint64_t{PR} * CT * op.epi_row_bytes) + " bytes of UB";
}

std::string emit_matmul_implicit(ProgramBuilder& b, const Matmul& op, const ImplicitA& a,
                                 uint64_t ub_lo, uint64_t ub_hi, uint32_t acc_rows,
                                 const Epilogue& epi) {
  const uint32_t N = b.n();
  const uint32_t C = a.px / 2, kc = a.k * C;
  if (C % N || op.Kt * N != a.k * kc || op.a_gather || !op.epi_row_bytes ||
      uint64_t{a.batch} * a.ho * a.wo != op.M || a.wo + a.k - 1 > a.w ||
      (!a.direct && a.sample < uint64_t{a.ho + a.k - 1} * a.w * a.px) ||
      (a.direct && (a.h != a.ho + a.k - 1 || a.y0 + a.src_h > a.h || a.x0 + a.src_w > a.w)))
    throw std::logic_error("compiler: emit_matmul_implicit: not a stride-1 compact map");
  const uint32_t half = acc_rows / 2;
  const uint32_t rs = (a.ho - 1) * a.w + a.wo;  // flattened rows of a sample
  const uint32_t span = (a.k - 1) * (a.w + 1);  // pixels past a block's rows its taps read
  const uint64_t arena = ub_hi - ub_lo, tile = uint64_t{N} * N * 2;
  // The largest row block (fewest per sample: the weights are read again for each), then the
  // widest column group (Ct split into ceil(Ct / groups)-tile groups; a sample block's stage
  // serves all its groups),
  // then the longest contraction group (at most a tap's tiles), that fit.
  uint32_t R = 0, CT = 0, KG = 0;
  for (uint32_t nb = 1; nb <= 16 && !R; ++nb) {
    const uint32_t r = (rs + nb - 1) / nb;
    if (r < N + 1) break;
    const uint64_t stage = uint64_t{r + span} * a.px;
    for (uint32_t ng = 1; ng <= op.Ct && !R; ++ng) {
      const uint32_t ct = ceil_div(op.Ct, ng);
      if (uint64_t{r} * ct > half) continue;
      const uint64_t piece = uint64_t{a.wo} * ct * op.epi_row_bytes;  // an output row's piece
      for (uint32_t kg = std::min(op.Kt, C / N); kg >= 1; --kg) {
        if (2 * piece + 2 * stage + 2 * kg * ct * tile > arena) continue;
        // a trial allocation: the arena aligns every buffer
        UbArena t(ub_lo, ub_hi, static_cast<int>(N), op.name);
        bool fits = true;
        for (uint64_t bytes :
             {piece, piece, stage, stage, uint64_t{kg} * ct * tile, uint64_t{kg} * ct * tile}) {
          if (t.free() < bytes) {
            fits = false;
            break;
          }
          t.take(bytes);
        }
        if (!fits) continue;
        R = r;
        CT = ct;
        KG = kg;
        break;
      }
    }
  }
  if (!R) return "";
  const uint64_t piece = uint64_t{a.wo} * CT * op.epi_row_bytes;
  UbArena ar(ub_lo, ub_hi, static_cast<int>(N), op.name);
  const uint32_t scratch[2] = {ar.take(piece), ar.take(piece)};
  const uint32_t stage[2] = {ar.take(uint64_t{R + span} * a.px),
                             ar.take(uint64_t{R + span} * a.px)};
  const uint32_t wbuf[2] = {ar.take(KG * CT * tile), ar.take(KG * CT * tile)};
  const uint32_t KGN = KG * N, groups = ceil_div(op.Kt, KG);

  // blocks: (sample, row block) x column group; a row block's stage (slot sb) is loaded with
  // its first column group and read by all of them
  struct Blk {
    uint32_t b, i0, rows, c0, ct, acc0, sb;
    bool first;
  };
  std::vector<Blk> blocks;
  uint32_t nsb = 0;
  for (uint32_t s = 0; s < a.batch; ++s)
    for (uint32_t i0 = 0; i0 < rs; i0 += R, ++nsb)
      for (uint32_t c0 = 0; c0 < op.Ct; c0 += CT)
        blocks.push_back({s, i0, std::min(R, rs - i0), c0, std::min(CT, op.Ct - c0),
                          static_cast<uint32_t>(blocks.size() % 2) * half, nsb % 2, c0 == 0});
  uint32_t wslot = 0;
  // Direct staging of block bk into stage buffer `sb`: map pixels [i0, i0 + rows + span).
  // The frame's zeros stay in a buffer that held the same stretch last (the j-th row block of
  // every sample has the same frame), so a buffer is zeroed only when its stretch changes:
  // never again with one or two row blocks a sample (the buffers alternate), before every
  // block with more.
  uint32_t last_i0[2] = {~0u, ~0u}, last_rows[2] = {0, 0};
  auto stage_direct = [&](const Blk& bk, uint32_t sb) {
    const uint32_t n = bk.rows + span, p_lo = bk.i0, p_hi = bk.i0 + n;
    if (last_i0[sb] != bk.i0 || last_rows[sb] != bk.rows) {
      emit_zero_fill(b, a.ub_zero, a.zero_bytes, isa::Space::kUb, stage[sb], uint64_t{n} * a.px, 4);
      last_i0[sb] = bk.i0;
      last_rows[sb] = bk.rows;
    }
    // src rows: the map rows Y in the stretch; the full ones in one copy, the cut ones alone
    const uint64_t sbase = a.src + bk.b * a.src_sample;
    auto copy = [&](uint32_t Y, uint32_t xa, uint32_t xb, uint32_t nrows) {
      const uint32_t words = (xb - xa) * a.px / 4;
      b.dma_copy(hbm(sbase + (uint64_t{Y - a.y0} * a.src_w + (xa - a.x0)) * a.px,
                     {{words, 4}, {nrows, int32_t(a.src_w * a.px)}}),
                 ub(static_cast<uint32_t>(stage[sb] + (uint64_t{Y} * a.w + xa - p_lo) * a.px),
                    {{words, 4}, {nrows, int32_t(a.w * a.px)}}),
                 4);
    };
    uint32_t full0 = 0, nfull = 0;  // a run of whole src rows not yet copied
    for (uint32_t Y = std::max(a.y0, p_lo / a.w); Y < a.y0 + a.src_h && Y * a.w < p_hi; ++Y) {
      const uint32_t xa = std::max<uint32_t>(a.x0, p_lo > Y * a.w ? p_lo - Y * a.w : 0);
      const uint32_t xb = std::min<uint32_t>(a.x0 + a.src_w, p_hi - Y * a.w);
      if (xa >= xb) continue;
      if (xa == a.x0 && xb == a.x0 + a.src_w) {
        if (!nfull) full0 = Y;
        ++nfull;
        continue;
      }
      if (nfull) copy(full0, a.x0, a.x0 + a.src_w, nfull), nfull = 0;
      copy(Y, xa, xb, 1);
    }
    if (nfull) copy(full0, a.x0, a.x0 + a.src_w, nfull);
  };
  // A block's matmul as steps: its map stretch staged and the first weight group loaded, then
  // each group's MXU work behind the next group's load. The steps of block k + 1 are spread
  // between block k's epilogue pieces: emitted whole before them, they would hold the in-order
  // sequencer until the MXU had all but finished, and the MXU would then wait for the
  // epilogue's dispatch.
  using Steps = std::vector<std::function<void()>>;
  auto mm_steps = [&](size_t k) {
    auto slots = std::make_shared<std::vector<uint32_t>>();
    auto load_w = [&, k, slots](uint32_t g) {
      const Blk& bk = blocks[k];
      const uint32_t kgn = std::min(KG, op.Kt - g * KG) * N, i = wslot++ % 2, ctn = bk.ct * N;
      slots->push_back(i);
      load_weight_group(b, op, g, KGN, kgn, bk.c0, ctn, CT, wbuf[i]);
      b.signal(isa::Unit::kDma);
    };
    Steps steps{[&, k, load_w] {
      const Blk& bk = blocks[k];
      if (bk.first && a.direct)
        stage_direct(bk, bk.sb);
      else if (bk.first)
        b.dma_copy(hbm(a.addr + bk.b * a.sample + uint64_t{bk.i0} * a.px,
                       {{a.px / 4, 4}, {bk.rows + span, int32_t(a.px)}}),
                   ub(stage[bk.sb], {{a.px / 4, 4}, {bk.rows + span, int32_t(a.px)}}), 4);
      load_w(0);
    }};
    for (uint32_t g = 0; g < groups; ++g)
      steps.push_back([&, k, g, load_w, slots] {
        const Blk& bk = blocks[k];
        if (g + 1 < groups) load_w(g + 1);
        const uint32_t kg = std::min(KG, op.Kt - g * KG), wb = wbuf[(*slots)[g]];
        for (uint32_t kt = 0; kt < kg; ++kt) {
          const uint32_t t = g * KG + kt;  // contraction tile: kernel row ky, byte (kx C + f) 2
          const uint32_t ky = t * N / kc, off = (t * N % kc) * 2;
          for (uint32_t c = 0; c < bk.ct; ++c) {
            load_weight_tile(b, op, wb, kt, c, KGN, CT);
            b.mxu_mm(t > 0, stage[bk.sb] + ky * a.w * a.px + off, a.px, bk.rows, bk.acc0 + c * R);
          }
        }
        b.signal(isa::Unit::kMxu, g + 1 < groups);  // reads-only: the buffers; full: the ACC
      });
    return steps;
  };
  // The epilogue pieces: each output row's valid columns inside its block, one stream across
  // blocks (loads a piece ahead).
  std::vector<std::vector<Block>> pieces(blocks.size());
  uint32_t np = 0;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Blk& bk = blocks[k];
    for (uint32_t oy = bk.i0 / a.w; oy * a.w < bk.i0 + bk.rows && oy < a.ho; ++oy) {
      const uint32_t x0 = bk.i0 > oy * a.w ? bk.i0 - oy * a.w : 0;
      const uint32_t x1 = std::min(a.wo, bk.i0 + bk.rows - oy * a.w);
      if (x0 >= x1) continue;
      pieces[k].push_back({bk.b * a.ho * a.wo + oy * a.wo + x0, x1 - x0, bk.c0, bk.ct, R,
                           scratch[np++ % 2], bk.acc0, oy * a.w + x0 - bk.i0});
    }
  }
  size_t lk = 0, li = 0;
  auto load_next = [&] {
    while (lk < pieces.size() && li >= pieces[lk].size()) ++lk, li = 0;
    if (lk < pieces.size()) epi.load(pieces[lk][li++]);
  };
  for (const auto& st : mm_steps(0)) st();
  if (epi.load) load_next();
  for (size_t k = 0; k < blocks.size(); ++k) {
    Steps next;
    if (k + 1 < blocks.size()) next = mm_steps(k + 1);
    const std::vector<Block>& pk = pieces[k];
    size_t done = 0;
    for (size_t i = 0; i < pk.size(); ++i) {
      for (; done < next.size() && done * pk.size() <= i * next.size(); ++done) next[done]();
      if (epi.load) load_next();
      epi.run(pk[i]);
    }
    for (; done < next.size(); ++done) next[done]();
  }
  return std::string(op.name) + ": [" + std::to_string(op.M) + " x " + std::to_string(op.Kt * N) +
         "] x [" + std::to_string(op.Kt * N) + " x " + std::to_string(op.Ct * N) +
         "], implicit: the MXU streams the map staged in the UB (blocks of " + std::to_string(R) +
         " of a sample's " + std::to_string(rs) + " rows over " + std::to_string(a.w) +
         "-pixel map rows, " + std::to_string(uint64_t{R + span} * a.px) + "-byte stages" +
         (a.direct ? ", staged from the unpadded map" : "") + "), column groups of " +
         std::to_string(CT) + " tiles, contraction " + std::to_string(op.Kt) +
         " tiles in groups of " + std::to_string(KG) + "; epilogue pieces of an output row, 2 x " +
         std::to_string(piece) + " bytes of UB";
}

std::string emit_gemm(ProgramBuilder& b, uint32_t M, uint32_t Kt, uint32_t Ct, uint64_t a,
                      uint64_t w, uint64_t c, uint64_t ub_bytes, uint32_t acc_rows) {
  const uint32_t N = b.n();
  Matmul op;
  op.name = "GEMM";
  op.M = M;
  op.Kt = Kt;
  op.Ct = Ct;
  op.a = a;
  op.a_pitch = Kt * N * 2;
  op.w = w;
  op.w_pitch = Ct * N * 2;
  op.w_by_column = false;  // B's row j is contraction index j
  op.epi_row_bytes = N * 4;
  op.allow_whole_acc = true;
  // the epilogue is bound by its fp32 stores (C leaves at the pins' 16 bytes a cycle): four
  // buffers let the VPU empty a bank's tiles up to three pieces ahead of them
  op.epi_buffers = 4;
  const uint32_t row4n = N * 4, out_pitch = Ct * N * 4;
  Epilogue epi;
  epi.run = [&](const Block& k) {
    const uint32_t pitch = k.ct * row4n;
    for (uint32_t r = 0; r < k.rows; ++r)
      for (uint32_t t = 0; t < k.ct; ++t) {
        b.vpu_ld(isa::Kind::kAcc, 1, k.acc(r, t));
        b.vpu_st(isa::Kind::kUbF32, 1, k.scratch + r * pitch + t * row4n);
      }
    b.signal(isa::Unit::kVpu);
    b.dma_copy(ub(k.scratch, {{k.ct * N, 4}, {k.rows, int32_t(pitch)}}),
               hbm(c + uint64_t{k.r0} * out_pitch + uint64_t{k.c0} * row4n,
                   {{k.ct * N, 4}, {k.rows, int32_t(out_pitch)}}),
               4);
  };
  return emit_matmul(b, op, 0, ub_bytes, acc_rows, epi);
}

void emit_zero_hbm(ProgramBuilder& b, uint32_t ub_zero, uint32_t zero_bytes, uint64_t addr,
                   uint64_t bytes) {
  emit_zero_fill(b, ub_zero, zero_bytes, isa::Space::kHbm, addr, bytes, 2);
}

bool emit_transpose_mxu(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint32_t acc_rows,
                        uint32_t ub_identity, uint64_t src, uint32_t rows, uint32_t cols,
                        uint32_t read, uint32_t src_pitch, uint64_t dst, uint32_t dst_pitch) {
  const uint32_t N = b.n(), CT = ceil_div(cols, N);
  if (rows % N || read % N || read < CT * N) return false;
  UbArena t(ub_lo, ub_hi, N, "transpose");
  // rows a chunk: the ACC holds two chunks of CT tiles per N rows; two sets of UB buffers.
  // The transposed chunk is written over its own input once the MXU has read it (read >=
  // cols: it fits), so two buffers, not four: longer chunks, longer runs for the store.
  const bool shared = read >= cols;
  uint64_t rb = std::min<uint64_t>(rows, acc_rows / (2 * CT) / N * N);
  auto fits = [&](uint64_t r) {  // a trial allocation: the arena aligns every buffer
    UbArena u = t;
    for (int i = 0; i < 2; ++i)
      for (uint64_t bytes : {r * read * 2, shared ? 0 : r * cols * 2}) {
        if (u.free() < bytes) return false;
        if (bytes) u.take(bytes);
      }
    return true;
  };
  while (rb >= N && !fits(rb)) rb -= N;
  if (rb < N) return false;
  const uint32_t RB = static_cast<uint32_t>(rb);
  uint32_t in[2], out[2];
  for (int i = 0; i < 2; ++i) {
    in[i] = t.take(uint64_t{RB} * read * 2);
    out[i] = shared ? in[i] : t.take(uint64_t{RB} * cols * 2);
  }
  // Software-pipelined: chunk k + 1's load is emitted before chunk k's VPU work and store, so
  // the in-order DMA reads the next chunk while the VPU empties the ACC (emitted after chunk
  // k's store, it would wait for it, and the chunks would run one unit at a time).
  auto load = [&](uint32_t r0, uint32_t i) {
    const uint32_t rc = std::min(RB, rows - r0);
    b.dma_copy(hbm(src + uint64_t{r0} * src_pitch, {{read, 2}, {rc, int32_t(src_pitch)}}),
               ub(in[i], {{read, 2}, {rc, int32_t(read * 2)}}), 2);
    b.signal(isa::Unit::kDma);
  };
  load(0, 0);
  for (uint32_t r0 = 0, i = 0; r0 < rows; r0 += RB, i ^= 1) {
    const uint32_t rc = std::min(RB, rows - r0), acc0 = i * (acc_rows / 2);
    // tile (row block j, column tile c) transposed into ACC rows acc0 + (j CT + c) N + t: the
    // identity's rows times the tile loaded transposed give row t = column c N + t
    for (uint32_t j = 0; j < rc / N; ++j)
      for (uint32_t c = 0; c < CT; ++c) {
        b.mxu_ldw(in[i] + (uint64_t{j} * N * read + c * N) * 2, int32_t(read * 2), true);
        b.mxu_mm(false, ub_identity, int32_t(2 * N), N, acc0 + (j * CT + c) * N);
      }
    b.signal(isa::Unit::kMxu);
    if (r0 + RB < rows) load(r0 + RB, i ^ 1);
    for (uint32_t col = 0; col < cols; ++col)
      for (uint32_t j = 0; j < rc / N; ++j) {
        b.vpu_ld(isa::Kind::kAcc, 1, acc0 + (j * CT + col / N) * N + col % N);
        b.vpu_st(isa::Kind::kUbBf16, 1, out[i] + (uint64_t{col} * rc + j * N) * 2);
      }
    b.signal(isa::Unit::kVpu);
    b.dma_copy(ub(out[i], {{rc, 2}, {cols, int32_t(rc * 2)}}),
               hbm(dst + uint64_t{r0} * 2, {{rc, 2}, {cols, int32_t(dst_pitch)}}), 2);
  }
  return true;
}

void emit_transpose(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint64_t src, uint32_t rows,
                    uint32_t cols, uint32_t read, uint32_t src_pitch, uint64_t dst,
                    uint32_t dst_pitch) {
  UbArena t(ub_lo, ub_hi, b.n(), "transpose");
  const uint64_t in_row = uint64_t{read} * 2, tr_row = uint64_t{cols} * 2;
  const uint32_t Rb = static_cast<uint32_t>(std::min<uint64_t>(
      {rows, 65535, std::max<uint64_t>(1, (t.free() - 512) / (2 * (in_row + tr_row)))}));
  uint32_t in[2], tr[2];
  for (int i = 0; i < 2; ++i) {
    in[i] = t.take(uint64_t{Rb} * in_row);
    tr[i] = t.take(uint64_t{Rb} * tr_row);
  }
  for (uint32_t r0 = 0, i = 0; r0 < rows; r0 += Rb, i ^= 1) {
    const uint32_t rb = std::min(Rb, rows - r0);
    b.dma_copy(hbm(src + uint64_t{r0} * src_pitch, {{read, 2}, {rb, int32_t(src_pitch)}}),
               ub(in[i], {{read, 2}, {rb, int32_t(in_row)}}), 2);
    b.dma_copy(ub(in[i], {{rb, int32_t(in_row)}, {cols, 2}}),
               ub(tr[i], {{rb, 2}, {cols, int32_t(rb * 2)}}), 2);
    b.dma_copy(ub(tr[i], {{rb, 2}, {cols, int32_t(rb * 2)}}),
               hbm(dst + uint64_t{r0} * 2, {{rb, 2}, {cols, int32_t(dst_pitch)}}), 2);
  }
}

}  // namespace tessera::compiler::lowering
