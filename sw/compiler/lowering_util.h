// Helpers shared by the step compiler (DenseStackStep) and its lowerings: UB arenas, DMA walks,
// linear copies, the seeded Glorot initializer, the Adam set-up and the per-phase statistics.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sw/compiler/program_builder.h"
#include "sw/compiler/reroll.h"
#include "sw/compiler/vpu_math.h"
#include "tessera/compiler.h"

namespace tessera::compiler::lowering {

// Shorthands of the operand kinds and address spaces every lowering names.
constexpr isa::Kind kF32 = isa::Kind::kUbF32;
constexpr isa::Kind kBf16 = isa::Kind::kUbBf16;
constexpr isa::Kind kAcc = isa::Kind::kAcc;
constexpr isa::Space kHbm = isa::Space::kHbm;
constexpr isa::Space kUb = isa::Space::kUb;

inline uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

// UB space of one phase: a bump allocator over [begin, end).
class UbArena {
 public:
  UbArena(uint64_t begin, uint64_t end, int n, const char* phase)
      : next_(begin), end_(end), align_(std::max<uint64_t>(4ull * n, 64)), phase_(phase) {}
  uint32_t take(uint64_t bytes) {
    next_ = (next_ + align_ - 1) / align_ * align_;
    const uint64_t at = next_;
    next_ += bytes;
    if (next_ > end_)
      throw std::invalid_argument(std::string("the ") + phase_ + " phase needs more UB than the " +
                                  std::to_string(end_) + "-byte unified buffer holds (" +
                                  std::to_string(next_) + " bytes); use a smaller batch or a " +
                                  "larger chip");
    return static_cast<uint32_t>(at);
  }
  uint64_t free() const {
    const uint64_t a = (next_ + align_ - 1) / align_ * align_;
    return a < end_ ? end_ - a : 0;
  }

 private:
  uint64_t next_, end_, align_;
  const char* phase_;
};

inline DmaWalk walk(isa::Space s, uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  DmaWalk w;
  w.space = s;
  w.base = base;
  w.loops = std::move(loops);
  return w;
}
inline DmaWalk hbm(uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  return walk(isa::Space::kHbm, base, std::move(loops));
}
inline DmaWalk ub(uint64_t base, std::vector<std::pair<uint32_t, int32_t>> loops) {
  return walk(isa::Space::kUb, base, std::move(loops));
}
// A contiguous copy of `count` elements of `e` bytes (split into loops of <= 65535).
inline void copy_linear(ProgramBuilder& b, isa::Space ss, uint64_t src, isa::Space ds, uint64_t dst,
                        uint64_t count, int e) {
  while (count) {
    uint64_t c0 = std::min<uint64_t>(count, 65535), c1 = 1;
    if (count > 65535) {
      c0 = 4096;
      c1 = std::min<uint64_t>(count / 4096, 65535);
    }
    const uint64_t n = c0 * c1;
    std::vector<std::pair<uint32_t, int32_t>> loops{{static_cast<uint32_t>(c0), e}};
    if (c1 > 1) loops.push_back({static_cast<uint32_t>(c1), static_cast<int32_t>(c0 * e)});
    b.dma_copy(walk(ss, src, loops), walk(ds, dst, loops), e);
    src += n * e;
    dst += n * e;
    count -= n;
  }
}

// splitmix64: a fixed generator (the same numbers on every platform and standard library).
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
inline std::vector<float> glorot(uint64_t& state, size_t count, double fan_in, double fan_out) {
  const double limit = std::sqrt(6.0 / (fan_in + fan_out));
  std::vector<float> v(count);
  for (auto& x : v) {
    const double u = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    x = static_cast<float>((2.0 * u - 1.0) * limit);
  }
  return v;
}

// setup: b1^t, b2^t advanced one step in the UB rows at `powers` (and `powers` + 4N), and
// lr_t = lr * (sqrt(1 - b2^t) / (1 - b1^t)) into the row `lr_t`; lr an immediate, or (nullopt)
// the row `lr_t` holds it on entry (a scheduled rate the host writes). Uses V1..V5.
inline void emit_adam_powers(ProgramBuilder& b, std::optional<float> lr, float beta1, float beta2,
                             uint32_t powers, uint32_t lr_t) {
  using Fn = isa::Funct;
  const uint32_t row4n = 4 * static_cast<uint32_t>(b.n());
  b.vpu_ld(isa::Kind::kUbF32, 1, powers);
  b.vpu_ld(isa::Kind::kUbF32, 2, powers + row4n);
  b.vpu_lif(3, beta1);
  b.vpu_op(Fn::kMul, 1, 1, 3);
  b.vpu_lif(3, beta2);
  b.vpu_op(Fn::kMul, 2, 2, 3);
  b.vpu_st(isa::Kind::kUbF32, 1, powers);
  b.vpu_st(isa::Kind::kUbF32, 2, powers + row4n);
  b.vpu_lif(3, 1.0f);
  b.vpu_op(Fn::kSub, 4, 3, 2);
  b.vpu_op(Fn::kSqrt, 4, 4);
  b.vpu_op(Fn::kSub, 5, 3, 1);
  b.vpu_op(Fn::kDiv, 4, 4, 5);
  if (lr)
    b.vpu_lif(3, *lr);
  else
    b.vpu_ld(isa::Kind::kUbF32, 3, lr_t);
  b.vpu_op(Fn::kMul, 4, 3, 4);
  b.vpu_st(isa::Kind::kUbF32, 4, lr_t);
}

// The phases of a step as it is emitted, and at the end the loop-compressed program with its
// statistics (StepStats: per phase and in all).
class StepPhases {
 public:
  StepPhases(ProgramBuilder& b, StepStats& stats) : b_(b), stats_(stats) {}
  void begin(const std::string& name) {
    stats_.phases.push_back({name, b_.size(), 0});
    start_.push_back(b_.stats());
  }
  const std::string& current() const { return stats_.phases.back().name; }
  // Loop compression (no loop crosses a phase) and the statistics; `mxu_bound`: the MXU's shape
  // bound (BuilderStats::mxu_cycles).
  std::vector<isa::Instruction> finish(uint64_t& mxu_bound) {
    const uint64_t N = static_cast<uint64_t>(b_.n());
    std::vector<uint64_t> marks;
    for (const auto& ph : stats_.phases) marks.push_back(ph.first_instruction);
    std::vector<isa::Instruction> program = reroll(b_.finish(), &marks);
    for (size_t p = 0; p < stats_.phases.size(); ++p) stats_.phases[p].first_instruction = marks[p];
    const BuilderStats& bs = b_.stats();
    for (size_t p = 0; p < stats_.phases.size(); ++p) {
      const bool last = p + 1 == stats_.phases.size();
      const uint64_t end = last ? program.size() : stats_.phases[p + 1].first_instruction;
      const BuilderStats& s0 = start_[p];
      const BuilderStats& s1 = last ? bs : start_[p + 1];
      StepStats::Phase& ph = stats_.phases[p];
      ph.instructions = end - ph.first_instruction;
      ph.executed = isa::executed_count(std::vector<isa::Instruction>(
          program.begin() + static_cast<std::ptrdiff_t>(ph.first_instruction),
          program.begin() + static_cast<std::ptrdiff_t>(end)));
      ph.mxu_bound = s1.mxu_cycles - s0.mxu_cycles;
      ph.vpu = s1.vpu_cycles() - s0.vpu_cycles();
      ph.dma = s1.per_unit[0] - s0.per_unit[0];
      ph.macs = (s1.mxu_rows - s0.mxu_rows) * N * N;
      ph.dma_elements = s1.dma_elements - s0.dma_elements;
      ph.dma_cycles = s1.dma_cycles - s0.dma_cycles;
      ph.hbm_bytes = s1.hbm_bytes - s0.hbm_bytes;
      ph.ici_flits = s1.ici_flits - s0.ici_flits;
    }
    stats_.instructions = program.size();
    stats_.executed = isa::executed_count(program);
    stats_.loops = static_cast<uint64_t>(
        std::count_if(program.begin(), program.end(),
                      [](const isa::Instruction& i) { return i.op == isa::Opcode::kRepeat; }));
    stats_.waits = bs.waits;
    stats_.signals = bs.signals;
    stats_.dma = bs.per_unit[0];
    stats_.mxu = bs.per_unit[1];
    stats_.vpu = bs.per_unit[2];
    stats_.vpu_cycles = bs.vpu_cycles();
    stats_.macs = bs.mxu_rows * N * N;
    stats_.dma_elements = bs.dma_elements;
    stats_.dma_cycles = bs.dma_cycles;
    stats_.hbm_bytes = bs.hbm_bytes;
    stats_.ici_flits = bs.ici_flits;
    mxu_bound = bs.mxu_cycles;
    return program;
  }

 private:
  ProgramBuilder& b_;
  StepStats& stats_;
  std::vector<BuilderStats> start_;
};

}  // namespace tessera::compiler::lowering
