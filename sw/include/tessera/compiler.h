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
  uint64_t macs = 0;                   // MXU.MM rows x N x N
  uint64_t dma_elements = 0;           // elements the DMA moves (a word a cycle on runs)
  uint64_t hbm_bytes = 0;              // HBM bytes the DMA reads and writes
  struct Phase {
    std::string name;
    uint64_t first_instruction = 0, instructions = 0;  // in the program
    uint64_t mxu_bound = 0;  // MXU.MM rows + N per MXU.LDW: the phase's MXU shape bound
    uint64_t vpu = 0;        // VPU instructions (one lane-vector each: the VPU bound)
    uint64_t dma = 0;        // DMA instructions
    uint64_t macs = 0;
    uint64_t dma_elements = 0;
    uint64_t hbm_bytes = 0;
  };
  std::vector<Phase> phases;
};

}  // namespace tessera::compiler
