// The types every compiled step shares (the step compiler itself: tessera/dense_step.h;
// docs/compiler.md): what a step computes, its statistics, and its place in a data-parallel
// ring. The compiler depends on the ISA and the chip parameters only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/chip.h"
#include "tessera/isa.h"

namespace tessera::compiler {

// A training step, or the forward pass alone (evaluate / predict: loss, correct count and the
// softmax probabilities; no update, the weights and optimizer state are only read).
enum class StepKind { kTrain, kEvaluate };

// Data parallelism (docs/multichip.md): the same step on every chip of a ring of `replicas`,
// each with its own shard of the global batch (replicas x batch); `rank` is the chip's ring
// position. `split_update` with one replica compiles the data-parallel program's split
// (gradients to HBM, then the update) without the collectives — bit-identical to the fused
// single-chip step (a test of the split).
struct Replication {
  int replicas = 1;
  int rank = 0;
  bool split_update = false;
  bool split() const { return replicas > 1 || split_update; }
};

// A compiled step's statistics (tessera compile, the cycle report).
struct StepStats {
  uint64_t instructions = 0;  // in the program (REPEAT bodies once)
  uint64_t executed = 0;      // executed in a step (REPEAT bodies count times; REPEATs not)
  uint64_t loops = 0;         // REPEAT loops in the program (docs/compiler.md, stage 6)
  uint64_t waits = 0, signals = 0;
  uint64_t dma = 0, mxu = 0, vpu = 0;  // instructions per unit (sync included)
  uint64_t vpu_cycles = 0;             // the VPU's issue cycles (a wide UB access several)
  uint64_t macs = 0;                   // MXU.MM rows x N x N
  uint64_t dma_elements = 0;           // elements the DMA moves (a word a cycle on runs)
  uint64_t dma_cycles = 0;             // the DMA's cycles at its peak (one run a cycle)
  uint64_t hbm_bytes = 0;              // HBM bytes the DMA moves at the pins (32 a burst)
  uint64_t ici_flits = 0;              // flits the DMA sends a neighbour (32 payload bytes)
  struct Phase {
    std::string name;
    uint64_t first_instruction = 0, instructions = 0;  // in the program
    uint64_t executed = 0;  // instructions executed (REPEAT bodies count times): the decode bound
    // The MXU's shape bound: per MXU.MM max(rows x UB words a row, N + 1) — a row a cycle, the
    // next tile's weights loading beside the stream (docs/architecture.md, "MXU unit").
    uint64_t mxu_bound = 0;
    // The VPU bound: its issue cycles — one an instruction (one lane-vector each), a UB load or
    // store of w 32-byte words ceil(w / 2) (its two UB ports; more than one only at N > 16).
    uint64_t vpu = 0;
    uint64_t dma = 0;        // DMA instructions
    uint64_t macs = 0;
    uint64_t dma_elements = 0;
    uint64_t dma_cycles = 0;  // the DMA bound: its copies at one run a cycle
    uint64_t hbm_bytes = 0;
    uint64_t ici_flits = 0;  // over the ICI link to a neighbour
  };
  std::vector<Phase> phases;
};

// HBM bytes a pseudo-channel's pins carry a cycle at most: a burst of the bus width x the
// burst length in its cycles (docs/memory.md; 16).
inline constexpr uint64_t kHbmBytesPerCycle = uint64_t{chip_params::HBM_PC_WIDTH_BITS} *
                                              chip_params::HBM_BURST_LENGTH / 8 /
                                              chip_params::HBM_BURST_CYCLES;

// A phase's roofline: the largest of its units' bounds — the MXU's shape bound, the VPU's
// operations, the DMA's cycles at its peak, the HBM bytes (the DMA's and the phase's stored
// instructions, which the sequencer fetches) at the pins' peak over `channels` pseudo-channels,
// the flits sent to a neighbour at the ICI link's peak (a 40-byte flit in ceil(40 / 16) = 3
// cycles: docs/multichip.md), and the sequencer's decode (one instruction a cycle for every
// unit) — and the unit that sets it.
struct Roofline {
  uint64_t mxu = 0, vpu = 0, dma = 0, hbm = 0, ici = 0, seq = 0;
  uint64_t bound() const;
  const char* unit() const;  // "MXU", "VPU", "DMA", "HBM", "ICI" or "SEQ" (the first largest)
};
Roofline roofline(const StepStats::Phase& p, int channels);
// The link cycles of one flit (its FlitW bits over ICI_LINK_BYTES a cycle: 3).
uint64_t ici_flit_cycles();
// The HBM pins' cycles for the DMA's bytes and the stored instructions the sequencer fetches,
// at kHbmBytesPerCycle a pseudo-channel.
uint64_t hbm_cycles(uint64_t dma_bytes, uint64_t instructions, int channels);

}  // namespace tessera::compiler
