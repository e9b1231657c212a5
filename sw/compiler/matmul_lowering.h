// The generic tiled MXU matmul of the step compilers (DenseStackStep's Dense and Conv2D
// layers) and the DMA helpers around it: zero fills and UB-staged transposes.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "sw/compiler/program_builder.h"

namespace tessera::compiler::lowering {

constexpr uint32_t kNoStage = ~0u;  // a gather's `stage`: no staging buffer

// One MXU matmul C[M][Ct N] = A[M][Kt N] x B, operands bf16 in HBM.
struct Matmul {
  const char* name = "";
  uint32_t M = 0, Kt = 0, Ct = 0;
  uint64_t a = 0;
  uint32_t a_pitch = 0;  // bytes between A rows
  uint64_t w = 0;
  uint32_t w_pitch = 0;  // bytes between weight rows
  // true: weight row c is output column c and holds the contraction (W^T rows: MXU.LDW t);
  // false: weight row j is contraction index j and holds the output columns
  bool w_by_column = false;
  bool whole_columns = false;  // every column tile in one group (the softmax's rows)
  uint32_t epi_row_bytes = 0;  // UB scratch the epilogue needs per ACC row of the group
  // Epilogue buffers, 2 to 4 (they share half the arena, so more buffers mean smaller
  // pieces): an epilogue with a load part is loaded epi_buffers - 1 pieces ahead (more loads
  // queued on the DMA while the VPU runs a piece); one without runs its VPU part up to
  // epi_buffers - 1 pieces ahead of the pieces' stores (the GEMM's, bound by its fp32 stores)
  uint32_t epi_buffers = 2;
  // Spread the next row block's matmul between this block's epilogue pieces instead of emitting
  // it whole before them (for epilogues heavy on the DMA and VPU: the optimizer's)
  bool interleave = false;
  // Plain operands and an epilogue without a load part may take the whole ACC a block when the
  // time model says the halved operand traffic outweighs the epilogue it no longer hides
  // (emit_matmul); off where a lowering was measured with the half-ACC tiling.
  bool allow_whole_acc = false;
  // The block's column tiles interleaved in the ACC: tile c's row r at acc0 + r ct + c (MXU.MM
  // acc_stride ct), so an epilogue walking the piece row by row, tile by tile, reads
  // consecutive ACC rows, as its UB rows (one REPEAT a piece: the optimizer's); else tile c's
  // rows are consecutive at acc0 + c R (also when a column group has more than 256 tiles, the
  // longest acc_stride).
  bool acc_interleave = false;
  // Row blocks and epilogue pieces hold whole multiples of this many rows (M must be one): an
  // epilogue that combines rows (the conv + max-pool fusion: two output rows of a map).
  uint32_t row_align = 1;
  // The operand buffers in rotation (A and weights): 2, or 3 for a weight gather with VPU work
  // (the conv + max-pool routing): it then fills a buffer the MXU has released a group earlier,
  // so the in-order decoder's MXU work of group g runs beside the gather of group g + 2.
  uint32_t operand_buffers = 2;
  // At most this many contraction tiles a group (0: as many as fit; a gather whose staging holds
  // a bounded stretch of its source).
  uint32_t max_group_tiles = 0;
  // An operand gathered by the caller instead of read from HBM rows (a convolution's, from
  // its map): fills the UB rows `pitch` bytes apart with operand[r0 + r][c0 + j], r < rows,
  // j < cols. A's operand is A; the weights' (w_by_column false) has a row per contraction
  // index. `fresh`: the buffer last held a load of another shape, so whatever the gather
  // leaves unwritten (zero columns) must be written again.
  // `stage`: a_stage_bytes of UB the A gather may fill first (its own per A buffer), or
  // kNoStage: none (a_stage_bytes 0, no tiling fits beside the staging, the weights' gather).
  std::function<void(uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols, uint32_t ub,
                     uint32_t pitch, bool fresh, uint32_t stage)>
      a_gather, w_gather;
  uint32_t a_stage_bytes = 0;
  // the longest contiguous source run (elements) of a gathered operand's row (the tiling's
  // DMA estimate)
  uint32_t a_run = 0, w_run = 0;
};
// The epilogue of a piece of one (row block, column group): rows r0 .. r0 + rows of the output
// (ar0 .. ar0 + rows of the block); the ACC row of (piece row r, tile c) is acc(r, c):
// acc0 + c * R + ar0 + r, or with the tiles interleaved acc0 + (ar0 + r) * ct + c.
struct Block {
  uint32_t r0, rows, c0, ct, R;
  uint32_t scratch;  // UB: epi_row_bytes x rows x ct bytes (pieces alternate two buffers)
  uint32_t acc0, ar0;
  bool interleaved = false;  // Matmul::acc_interleave
  uint32_t acc(uint32_t r, uint32_t c) const {
    return interleaved ? acc0 + (ar0 + r) * ct + c : acc0 + c * R + ar0 + r;
  }
};
// An epilogue in two parts, software-pipelined by emit_matmul: `load` (DMA into the piece's
// scratch; may be empty) is emitted Matmul::epi_buffers - 1 pieces ahead of `run` (VPU from
// the ACC, DMA out), across block boundaries: a load may come before its block's matmul and
// before the runs of the pieces ahead of it, so it must read neither the ACC nor HBM that
// earlier runs write (the optimizer's w, m, v of its own piece and a relu mask's activations
// qualify).
struct Epilogue {
  std::function<void(const Block&)> load, run;
};

// The generic tiled matmul. Row blocks of R rows x column groups of CT tiles fill half the ACC
// (blocks alternate halves, so block k's epilogue overlaps block k + 1's matmul); (R, CT) is the
// pair with the least HBM traffic (A is read once per column group, the weights once per row
// block). The contraction runs in groups of KG tiles, A and weight rows double-buffered in the
// UB (the builder's sync lets the DMA load the next group while the MXU works). The epilogue
// runs in pieces of rows through two (or up to four: Matmul::epi_buffers) alternating scratch
// buffers, so a piece's DMA overlaps the VPU work of the one before. Returns the tiling as text
// (for tessera compile --dump).
std::string emit_matmul(ProgramBuilder& b, const Matmul& op, uint64_t ub_lo, uint64_t ub_hi,
                        uint32_t acc_rows, const Epilogue& epi);

// A convolution's A operand as a compact map walked at stride 1 (a stride-1 forward's input
// map, padded or not; the input gradient's padded, dilated gradient map): operand row (b, oy, ox),
// k-tile t reads the N channels at pixel (oy + ky, ox + kx) of sample b, where t's contraction
// index t N lies in kernel row ky at byte (kx C + f) 2 of the row's taps. With the map's rows `w`
// pixels long, the rows of one tap and channel tile are one constant stride apart over the
// flattened index i = oy w + ox: the MXU streams them straight from a UB-staged stretch of the map
// (implicit GEMM), the columns ox >= wo computed and dropped by the epilogue.
struct ImplicitA {
  uint64_t addr = 0;    // the map in HBM: samples `sample` bytes apart, rows of w pixels
  uint32_t px = 0;      // bytes a pixel: its C channels (C a multiple of N)
  uint64_t sample = 0;  // bytes a sample
  uint32_t w = 0, k = 1;
  uint32_t ho = 0, wo = 0, batch = 0;  // the output: ho x wo pixels a sample
  // Direct staging: the map is a zero frame (h rows) around `src` at (y0, x0) and lies nowhere
  // in HBM (addr, sample unused): a stage is zeroed when its buffer last held another stretch
  // of the map (from `ub_zero`, zero_bytes of zeros in the UB) and src's rows are copied in.
  bool direct = false;
  uint64_t src = 0, src_sample = 0;  // src pixel (0, 0) of sample 0; bytes a sample (pixels px)
  uint32_t src_w = 0, src_h = 0, y0 = 0, x0 = 0, h = 0;
  uint32_t ub_zero = 0, zero_bytes = 0;
};
// The same matmul as emit_matmul for an A that ImplicitA describes (M = batch ho wo,
// Kt N = k k C; weights either way, w_by_column): blocks of flattened rows of one sample times
// groups of column tiles, each row block's stretch of the map staged in the UB once for its
// column groups (two stages, double-buffered), the weights loaded a contraction group at a
// time; the ACC sums
// the contraction tiles in emit_matmul's order, so every output is bit for bit the same.
// Epilogue pieces are the output rows' valid runs in a block. Returns the tiling as text, or
// "" when no staging fits the UB (the caller gathers instead).
std::string emit_matmul_implicit(ProgramBuilder& b, const Matmul& op, const ImplicitA& a,
                                 uint64_t ub_lo, uint64_t ub_hi, uint32_t acc_rows,
                                 const Epilogue& epi);

// C[M][Ct N] (fp32, rows Ct N 4 bytes apart) = A[M][Kt N] (bf16) x B[Kt N][Ct N] (bf16), all in
// HBM: emit_matmul with whole-ACC blocks allowed (the time model decides) and an epilogue that
// stores the ACC's fp32 rows through the UB arena [0, ub_bytes). The GEMM benchmark's program
// (bench/gemm.cc). Returns the tiling as text.
std::string emit_gemm(ProgramBuilder& b, uint32_t M, uint32_t Kt, uint32_t Ct, uint64_t a,
                      uint64_t w, uint64_t c, uint64_t ub_bytes, uint32_t acc_rows);

// Zeroes HBM [addr, addr + bytes) (bytes even) by DMA from `zero_bytes` zero bytes kept in the
// UB at `ub_zero` (the source walk repeats them with stride 0).
void emit_zero_hbm(ProgramBuilder& b, uint32_t ub_zero, uint32_t zero_bytes, uint64_t addr,
                   uint64_t bytes);

// dst[c][r] = src[r][c] (bf16) for r < rows, c < cols: src rows `src_pitch` bytes apart (the
// first `read` >= cols elements of each row are loaded as one contiguous run), dst rows
// `dst_pitch` bytes apart. Staged through the UB arena [ub_lo, ub_hi) in blocks of rows: rows
// in as contiguous runs, the element walk UB to UB, out as runs of the block's length;
// double-buffered.
void emit_transpose(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint64_t src, uint32_t rows,
                    uint32_t cols, uint32_t read, uint32_t src_pitch, uint64_t dst,
                    uint32_t dst_pitch);

// The same transpose on the MXU, as a TPU does it: each N x N tile loaded transposed
// (MXU.LDW t) and multiplied by the identity (N bf16 rows at `ub_identity`), the ACC rows
// stored back as bf16 by the VPU: exact for finite values (a -0 becomes +0). Needs rows and
// `read` multiples of N; returns false, emitting nothing, when it does not apply or fit.
bool emit_transpose_mxu(ProgramBuilder& b, uint64_t ub_lo, uint64_t ub_hi, uint32_t acc_rows,
                        uint32_t ub_identity, uint64_t src, uint32_t rows, uint32_t cols,
                        uint32_t read, uint32_t src_pitch, uint64_t dst, uint32_t dst_pitch);

}  // namespace tessera::compiler::lowering
