// The ring all-reduce as a chip program (docs/multichip.md): every chip of a ring of P chips
// holds a gradient vector of fp32 at the same HBM address; after the program every chip holds
// the element-wise sum, bit-identical on all chips. Reduce-scatter then all-gather: the vector
// is P equal chunks; in reduce-scatter step s (0 … P−2) chip r sends chunk (r − s) mod P to
// its `next` neighbour's unified buffer — step 0 from its HBM, later steps the partial sum it
// has just added, straight from its UB — and adds the chunk (r − s − 1) mod P it receives to
// its own copy on the VPU, in pieces that fit the UB, pipelined so that link transfers, HBM
// loads and stores and the adds overlap (sends run ahead as far as the receive slots allow,
// own pieces are loaded ahead of their adds, the pieces of all steps go in one skewed order:
// docs/multichip.md); in
// all-gather step s chip r copies the finished chunk (r + 1 − s) mod P into the next chip's HBM
// (step 0 straight from the UB as the last reduce-scatter step's sums are stored, later steps
// from its HBM). Summation order (fixed): chunk c is summed along the ring starting at chip
// c, ((g_c + g_{c+1}) + g_{c+2}) + … + g_{c−1} (indices mod P), each add fp32 RNE on the VPU.
// The program may start while a neighbour is still busy with its own work: a chip sends into
// its neighbour's receive slots only after the neighbour has granted them (a credit per slot
// at the start, one per slot consumed), so the UB scratch may be in use until the block starts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/isa.h"

namespace tessera::compiler {

struct AllReduceSpec {
  int chips = 2;          // P >= 1 (1: the program only halts)
  int rank = 0;           // this chip's ring position 0 … P−1
  int n = 16;             // VPU lanes
  uint32_t hbm_addr = 0;  // the vector (fp32), 32-byte aligned, same on every chip
  uint32_t elems = 0;     // its length: a multiple of P·N (allreduce_padded_elems)
  uint32_t ub_base = 0;   // UB scratch the program may use: [ub_base, ub_base + ub_bytes)
  uint32_t ub_bytes = 0;
  uint32_t piece_bytes = 0;  // bytes per piece (0: 4 KiB, or less when the scratch is small)
  // Reduce-scatter alone: the program ends when chip r holds the sum of chunk (r + 1) mod P in
  // its HBM (its other chunks keep its own gradients); no all-gather.
  bool reduce_scatter_only = false;
};

// One region of a ring all-gather: a DMA walk over this chip's HBM (up to 4 loops of
// (count 1 … 65535, byte stride), elements of elem_bytes), copied to the same addresses on
// `next`.
struct GatherRegion {
  uint32_t addr = 0;
  int elem_bytes = 4;
  std::vector<std::pair<uint32_t, int32_t>> loops;
};

// Ring all-gather of P chunks, each a list of regions: chip r starts with chunk (r + 1) mod P
// current (what a reduce-scatter leaves it) and in step s (0 … P−2) copies chunk
// (r + 1 − s) mod P into next's HBM, then signals it (RC2); from step 1 on it first waits for
// the chunk prev sent. Ends when every chunk has arrived. Uses RC2 only (counted from zero).
std::vector<isa::Instruction> ring_allgather_program(
    int chips, int rank, const std::vector<std::vector<GatherRegion>>& chunks);

// The length to allocate for `elems` fp32 so that P chunks of whole N-lane vectors cover it
// (the padding must hold zeros, or anything: it is summed like the rest and ignored).
uint32_t allreduce_padded_elems(uint32_t elems, int chips, int n);

// The program for chip spec.rank (HALT at the end). Throws std::invalid_argument naming the
// field when the spec is impossible (alignment, UB scratch too small for two pieces, …).
std::vector<isa::Instruction> ring_allreduce_program(const AllReduceSpec& spec);

// Bytes the program moves over each link (payload, both phases or the reduce-scatter alone)
// — for bandwidth figures.
uint64_t allreduce_link_bytes(const AllReduceSpec& spec);

}  // namespace tessera::compiler
