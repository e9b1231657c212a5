// fuzz_program: binary program images (16-byte instructions, little-endian words) through the
// ISA decoder (sw/isa/isa.cc), the disassembler (sw/asm/assembler.cc) and the functional model
// (sw/functional/functional_model.cc) on a small chip (N = 4, 16 KiB UB, 64 ACC rows, 1 MiB
// HBM) with an instruction and a work budget.
// Properties: a legal word decodes to an instruction that encodes to the same words and
// disassembles to text that assembles to them; an image that disassembles round-trips through
// the canonical text byte for byte; decode errors name the offset; the model ends halted,
// faulted (with a fault code) or at the watchdog, and never throws. A sanitizer report, an
// uncaught exception, a hang or a huge allocation is a finding.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "tessera/asm.h"
#include "tessera/functional_model.h"
#include "tessera/isa.h"

namespace {

namespace as = tessera::assembler;
namespace isa = tessera::isa;
namespace fm = tessera::functional;

constexpr int kN = 4;
constexpr uint64_t kMaxInstructions = 2048;
// The model's work (DMA elements, MXU multiply-accumulates, VPU lanes) a run may do: a legal
// program may run for hours (a DMA.COPY of 65535^4 elements), which is not a parser's finding.
constexpr uint64_t kMaxWork = 1 << 20;

struct OverBudget {};

// Charges each instruction's work before the model executes it; throws OverBudget past
// kMaxWork. Tracks the DMA loop registers that DMA.LOOP sets and DMA.COPY walks.
class WorkBudget {
 public:
  void charge(const isa::Instruction& i) {
    uint64_t w = 1;
    switch (i.op) {
      case isa::Opcode::kDmaLoop: {
        auto& l = loops_[static_cast<int>(i.walk)];
        l[2 * i.pair] = i.c0;
        l[2 * i.pair + 1] = i.c1;
        break;
      }
      case isa::Opcode::kDmaCopy:
        w = std::max(elements(0), elements(1)) * (i.elem_bytes + 1);
        break;
      case isa::Opcode::kMxuLdw:
        w = kN * kN;
        break;
      case isa::Opcode::kMxuMm:
        w = uint64_t{i.rows} * kN * kN;
        break;
      default:
        w = kN;
        break;
    }
    if (w > kMaxWork - used_) throw OverBudget{};
    used_ += w;
  }

 private:
  uint64_t elements(int walk) const {
    uint64_t n = 1;
    for (uint64_t c : loops_[walk]) n *= c;
    return n;
  }
  uint64_t loops_[2][4] = {{1, 1, 1, 1}, {1, 1, 1, 1}};
  uint64_t used_ = 0;
};

isa::Words words_at(const uint8_t* p) {
  isa::Words w;
  for (int k = 0; k < 4; ++k) {
    w[k] = 0;
    for (int b = 0; b < 4; ++b) w[k] |= uint32_t{p[4 * k + b]} << (8 * b);
  }
  return w;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> image(data, data + size);
  const as::AsmOptions opt{kN};

  // The disassembler over the whole image, and the canonical text back to the same bytes.
  const as::DisasmResult d = as::disassemble(image, opt);
  if (d.ok()) {
    const as::AsmResult r = as::assemble(d.text, opt);
    FUZZ_CHECK(r.ok(), "disassembly does not assemble: " +
                           as::format_error("disasm", r.errors.at(0)) + "\n" + d.text);
    FUZZ_CHECK(r.bytes() == image, "disassembly assembles to other bytes:\n" + d.text);
  } else {
    FUZZ_CHECK(d.text.empty(), "text despite errors");
    for (const std::string& e : d.errors) {
      FUZZ_CHECK(starts_with(e, "offset 0x") || starts_with(e, "size "), e);
    }
  }

  // Each instruction alone: decode, encode, disassemble, assemble.
  const size_t count = size / isa::kInstructionBytes;
  std::vector<isa::Instruction> program;
  for (size_t k = 0; k < count; ++k) {
    const isa::Words w = words_at(data + k * isa::kInstructionBytes);
    const isa::Decoded dec = isa::decode(w, kN);
    if (!dec.ok()) {
      FUZZ_CHECK(!dec.reason.empty(), "an illegal word without a reason");
      continue;
    }
    FUZZ_CHECK(isa::encode(dec.inst) == w, isa::opcode_mnemonic(dec.inst.op));
    const std::string line = as::disassemble(dec.inst);
    const as::AsmResult r = as::assemble(line, opt);
    FUZZ_CHECK(r.ok() && r.instructions.size() == 1 && r.instructions[0] == dec.inst, line);
    program.push_back(dec.inst);
  }
  // REPEAT bodies of the legal instructions: counted, and unrolled when that is small.
  try {
    const uint64_t executed = isa::executed_count(program);
    if (executed <= 4096) {
      FUZZ_CHECK(isa::expand_repeats(program).size() == executed, "expand_repeats size");
    }
  } catch (const std::invalid_argument&) {
    // a body past the end or holding a REPEAT or HALT: the message names the index
  }

  // The image run on the functional model from address 0.
  fm::ChipConfig cfg;
  cfg.n = kN;
  cfg.ub_bytes = 16 * 1024;
  cfg.acc_rows = tessera::chip_params::SMALL_ACC_ROWS;
  cfg.hbm_bytes = 1 << 20;
  fm::FunctionalModel model(cfg);
  if (size > 0) model.hbm().write(0, data, std::min<uint64_t>(size, cfg.hbm_bytes));
  WorkBudget budget;
  model.set_trace_hook([&](uint64_t, const isa::Instruction& i) { budget.charge(i); });
  try {
    const fm::RunResult res = model.run(0, kMaxInstructions);
    FUZZ_CHECK(res.status != fm::RunStatus::kFaulted || res.fault_code != isa::FAULT_NONE,
               res.describe());
    FUZZ_CHECK(!res.describe().empty(), "describe");
  } catch (const OverBudget&) {
    // a legal program that would run too long for a fuzz input
  }
  return 0;
}
