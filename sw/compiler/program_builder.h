// ProgramBuilder: emits a Tessera program instruction by instruction and inserts the sync that
// makes it race-free (docs/isa.md, "Race-free programs"), so the lowering code only says what
// each instruction reads and writes. Every UB granule and ACC row remembers its last writer and,
// per unit, its last reader since that write; an instruction that conflicts with an earlier one
// on another unit gets a `WAIT` on the producer unit's counter, and the producer gets a `SIGNAL`
// after the producing instruction (the first one already emitted after it, or a new one). One
// counter per signalling unit (SC0 DMA, SC1 MXU, SC2 VPU) keeps the "one signalling unit per
// counter" rule and makes "counter >= k" mean "the unit's k-th SIGNAL has executed".
//
// Footprints are bounding ranges (a strided DMA walk counts as its whole span): conservative,
// never missing a conflict. HBM is touched only by the DMA, whose instructions take effect in
// program order, so HBM needs no tracking.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/isa.h"

namespace tessera::compiler {

using isa::Instruction;
using isa::Unit;

// A memory footprint on chip: UB bytes [lo, hi) or ACC rows [lo, hi).
struct Footprint {
  enum class Space { kUb, kAcc } space = Space::kUb;
  uint64_t lo = 0, hi = 0;
  bool write = false;
};

// Loop setting of one DMA walk, innermost first (count, byte stride); at most 4 loops.
struct DmaWalk {
  isa::Space space = isa::Space::kHbm;
  uint64_t base = 0;
  std::vector<std::pair<uint32_t, int32_t>> loops;  // {count, stride}, loop 0 first
  uint64_t elements() const;
  // The lowest and one past the highest byte the walk touches with elements of `e` bytes.
  void span(int e, uint64_t& lo, uint64_t& hi) const;
};

// The cycles a DMA.COPY of elements of `e` bytes takes at the DMA's peak (tpu_dma): one
// extractor step a cycle, each moving the elements that are in one source run and one
// destination run, where a walk's runs are the consecutive elements of its innermost loop that
// lie in one 32-byte word (one element each when that loop is not contiguous).
uint64_t dma_run_cycles(const DmaWalk& src, const DmaWalk& dst, int e);
// The 32-byte words a DMA walk touches one after another: on the HBM side each is a burst at
// the pins (a source run in another word than the one before is a read, the destination's
// write-combining buffer writes a word when the next elements land in another), so HBM bytes
// = 32 x this, whatever the elements used of each word.
uint64_t dma_words(const DmaWalk& w, int e);
// The reads of a DMA source walk: a run in a word among the copy's last DMA_READ_SLOTS words
// read (round-robin slots, rtl/dma/tpu_dma.sv) reads nothing, any other run one word.
uint64_t dma_read_words(const DmaWalk& w, int e);
// The MXU's shape bound of an MXU.MM of `rows` rows at array size n: a row of w = max(1, 2n/32)
// UB words in w cycles, or the next tile's n weight rows (n w words on their own UB port),
// loading beside it. The compiler's statistics and its tiling's time model both use it.
inline uint64_t mxu_tile_cycles(uint32_t n, uint64_t rows) {
  const uint64_t words = std::max<uint64_t>(1, 2 * uint64_t{n} / 32);  // UB words a row
  return std::max<uint64_t>(rows * words, n * words + 1);
}

// The UB bytes of a VPU.LD / VPU.ST of a UB kind at array size n: 4N (fp32) or 2N (bf16).
inline uint64_t vpu_bytes(isa::Kind kind, int n) {
  return kind == isa::Kind::kUbF32 ? 4ull * n : 2ull * n;
}
// The VPU's issue cycles for one of its instructions at array size n: one, and for a UB load or
// store of w 32-byte words ceil(w / 2) — its two UB ports take two words a cycle (tpu_ub_port).
inline uint64_t vpu_issue_cycles(const isa::Instruction& i, int n) {
  if ((i.op != isa::Opcode::kVpuLd && i.op != isa::Opcode::kVpuSt) || i.kind == isa::Kind::kAcc)
    return 1;
  const uint64_t words = std::max<uint64_t>(1, vpu_bytes(i.kind, n) / 32);
  return (words + 1) / 2;
}

struct BuilderStats {
  uint64_t instructions = 0, waits = 0, signals = 0;
  std::array<uint64_t, 3> per_unit{};  // DMA, MXU, VPU instructions (sync included)
  uint64_t vpu_wide_cycles = 0;  // the VPU's UB accesses' issue cycles beyond one each
  // the VPU's bound: vpu_issue_cycles of its instructions (a sync instruction one)
  uint64_t vpu_cycles() const { return per_unit[2] + vpu_wide_cycles; }
  uint64_t mxu_rows = 0;      // activation rows streamed by MXU.MM (one cycle each at best)
  uint64_t mxu_cycles = 0;    // the MXU's shape bound: max(rows w, N w + 1) an MM, w words a row
  uint64_t dma_elements = 0;  // elements moved by DMA.COPY (a word a cycle on contiguous runs)
  uint64_t dma_cycles = 0;    // DMA.COPY at the DMA's peak, one run a cycle (dma_run_cycles)
  uint64_t hbm_bytes = 0;     // HBM bytes at the pins: DMA.COPY's bursts x 32 (dma_read_words, dma_words)
  uint64_t ici_flits = 0;     // flits DMA.COPY sends a neighbour (a destination word each)
};

class ProgramBuilder {
 public:
  ProgramBuilder(int n, uint64_t ub_bytes, uint32_t acc_rows);

  int n() const { return n_; }

  // DMA: sets the loop registers the walks need (skipping ones already holding the value) and
  // copies; elements of `e` bytes (2 or 4).
  void dma_copy(const DmaWalk& src, const DmaWalk& dst, int e);
  // MXU
  void mxu_ldw(uint32_t addr, int32_t stride, bool transpose = false);  // transpose: W = rows^T
  // Output row t to ACC row acc_row + t acc_stride (1: consecutive rows).
  void mxu_mm(bool accumulate, uint32_t addr, int32_t stride, uint32_t rows, uint32_t acc_row,
              uint32_t acc_stride = 1);
  // VPU
  void vpu_ld(isa::Kind kind, int vd, uint32_t addr);
  void vpu_st(isa::Kind kind, int vs, uint32_t addr);
  void vpu_op(isa::Funct f, int vd, int va, int vb = 0, int vc = 0, uint32_t imm = 0);
  void vpu_li(int vd, uint32_t bits);
  void vpu_lif(int vd, float value);

  // The WAITs that `unit` would need now to access `fp`, inserted now: a group of instructions
  // that should run back to back on one unit (the MXU's tiles of several items) waits once
  // for everything it will touch, instead of pausing between its instructions for producers
  // that finish one by one.
  void await(Unit unit, const std::vector<Footprint>& fp);
  // Ends a group of work on `unit`: a SIGNAL now, so later consumers of anything the unit has
  // done so far wait exactly for it (without it they wait for the first SIGNAL after the
  // producer, which the builder emits on demand, possibly much later than needed). `reads`:
  // SIGNAL ..., reads — it counts once the unit has read its operands (the MXU: without
  // draining the array), so it serves only consumers that overwrite UB the unit read; the
  // others wait for a later full SIGNAL (emitted on demand if there is none).
  void signal(Unit unit, bool reads = false);
  void irq(uint32_t code);
  // A block the builder does not track (the ring all-reduce, with its own counters SC3..SC5
  // and remote ones), fenced on both sides: everything before it has completed when it
  // starts, and it has completed before anything after it starts. The DMA loop registers are
  // unknown after it (the next copy sets its loops). What it executes is counted in the
  // statistics like the builder's own instructions.
  void fenced_block(const std::vector<Instruction>& block);
  // HALT; the program is complete.
  std::vector<Instruction> finish();

  const BuilderStats& stats() const { return stats_; }
  size_t size() const { return program_.size(); }

 private:
  struct Record {
    int writer_unit = -1;
    uint64_t writer_seq = 0;
    std::array<int64_t, 3> reader_seq{{-1, -1, -1}};
  };
  void emit(const Instruction& inst, Unit unit, const std::vector<Footprint>& fp);
  // `reads_ok`: the consumer overwrites UB the producer read, so a reads-only SIGNAL serves
  void depend(Unit consumer, int producer, uint64_t seq, bool reads_ok);
  std::vector<Record>& records(Footprint::Space s) {
    return s == Footprint::Space::kUb ? ub_ : acc_;
  }
  void set_loops(isa::Walk walk, const DmaWalk& w);
  void count_block(const std::vector<Instruction>& block);  // fenced_block's statistics
  // The statistics of one DMA.COPY (to a neighbour when link is not local) and one MXU.MM.
  void count_copy(const DmaWalk& src, const DmaWalk& dst, int e, isa::Link link);
  void count_mm(uint32_t rows);
  void check_ub(uint64_t lo, uint64_t hi, const char* what) const;

  int n_;
  uint64_t ub_bytes_;
  uint32_t acc_rows_;
  static constexpr uint64_t kGranule = 16;  // UB bytes tracked together
  std::vector<Record> ub_, acc_;
  std::array<uint64_t, 3> seq_{};                    // memory instructions emitted per unit
  std::array<std::vector<uint64_t>, 3> signal_at_;   // per unit: the seq each SIGNAL covers
  std::array<std::vector<bool>, 3> signal_reads_;    // ... and whether it is reads-only
  std::array<std::array<uint32_t, 3>, 3> waited_{};  // [consumer][producer] count waited for
  std::array<std::array<std::pair<uint32_t, int32_t>, 4>, 2> loop_regs_;  // [walk][loop]
  std::vector<Instruction> program_;
  BuilderStats stats_;
};

}  // namespace tessera::compiler
