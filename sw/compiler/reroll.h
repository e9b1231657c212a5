// Loop compression (docs/compiler.md, "Loop compression"): rewrites a straight-line program
// into REPEAT loops (docs/isa.md, "Loops") that execute exactly the same instruction sequence.
// A step is ~2 M instructions, most of them per-vector VPU sequences that differ only in their
// UB addresses; fetched as written they were 83% of the step's HBM reads.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/isa.h"

namespace tessera::compiler {

struct RerollStats {
  uint64_t before = 0, after = 0;  // instructions in and out
  uint64_t loops = 0;              // REPEATs emitted
};

// Greedy, left to right: at each instruction the body length (1..REPEAT_MAX_LEN) that saves the
// most instructions, its iterations being the same instructions with every stepped field
// (isa::is_stepped) an arithmetic progression. REPEATs already in `program` (and their bodies)
// are kept as they are; HALT is never in a body. `marks` (sorted instruction indices, e.g. the
// start of each phase) are never inside a new loop, and on return hold their new indices (a
// mark inside the body of a REPEAT already in `program` moves to the end of that loop).
// isa::expand_repeats(result) == isa::expand_repeats(program), always.
std::vector<isa::Instruction> reroll(const std::vector<isa::Instruction>& program,
                                     std::vector<uint64_t>* marks = nullptr,
                                     RerollStats* stats = nullptr);

}  // namespace tessera::compiler
