// The Tessera instruction set in C++ (docs/isa.md is the specification; the numbers come from
// rtl/pkg/tpu_isa_pkg.sv through the generated tessera/isa_gen.h). An Instruction holds the
// opcode and every field, typed; fields an opcode does not have are zero in every legal
// Instruction, so decode(encode(i)) == i and encode(decode(w)) == w exactly.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/isa_gen.h"

namespace tessera::isa {

using Words = std::array<uint32_t, 4>;  // w0 .. w3 (w0 at the lowest address)

constexpr uint32_t kInstructionBytes = 16;
constexpr uint32_t kDefaultN = 16;

enum class Opcode : uint8_t {
  kNop = OP_NOP,
  kHalt = OP_HALT,
  kFence = OP_FENCE,
  kIrq = OP_IRQ,
  kRepeat = OP_REPEAT,
  kWait = OP_WAIT,
  kSignal = OP_SIGNAL,
  kDmaLoop = OP_DMA_LOOP,
  kDmaCopy = OP_DMA_COPY,
  kMxuLdw = OP_MXU_LDW,
  kMxuMm = OP_MXU_MM,
  kVpuLd = OP_VPU_LD,
  kVpuSt = OP_VPU_ST,
  kVpuOp = OP_VPU_OP,
  kVpuLi = OP_VPU_LI,
};

enum class Unit : uint8_t { kDma = UNIT_DMA, kMxu = UNIT_MXU, kVpu = UNIT_VPU };
enum class Space : uint8_t { kHbm = 0, kUb = 1 };
// Where a DMA.COPY writes / a SIGNAL counts (docs/isa.md, "Multi-chip"): this chip, or a ring
// neighbour over its ICI link.
enum class Link : uint8_t { kLocal = LINK_LOCAL, kNext = LINK_NEXT, kPrev = LINK_PREV };
enum class Walk : uint8_t { kSrc = 0, kDst = 1 };
enum class AccMode : uint8_t { kSet = 0, kAcc = 1 };
enum class Kind : uint8_t { kUbF32 = KIND_UB_F32, kUbBf16 = KIND_UB_BF16, kAcc = KIND_ACC };

enum class Funct : uint8_t {
  kAdd = VF_ADD,
  kSub = VF_SUB,
  kMul = VF_MUL,
  kDiv = VF_DIV,
  kSqrt = VF_SQRT,
  kMin = VF_MIN,
  kMax = VF_MAX,
  kCmpEq = VF_CMPEQ,
  kCmpLt = VF_CMPLT,
  kCmpLe = VF_CMPLE,
  kSel = VF_SEL,
  kI2F = VF_I2F,
  kF2I = VF_F2I,
  kF2Bf = VF_F2BF,
  kIAdd = VF_IADD,
  kIAnd = VF_IAND,
  kIOr = VF_IOR,
  kIXor = VF_IXOR,
  kShl = VF_SHL,
  kShr = VF_SHR,
  kSra = VF_SRA,
  kRSum = VF_RSUM,
  kRMax = VF_RMAX,
  kBcast = VF_BCAST,
  kSelEq = VF_SELEQ,
  kSelNe = VF_SELNE,
  kSelLt = VF_SELLT,
  kBfx = VF_BFX,
  kShlOr = VF_SHLOR,
  kSelEqH = VF_SELEQH,
  kAddMax = VF_ADDMAX,
  kMax4 = VF_MAX4,
  kArgMax4 = VF_ARGMAX4,
};

// Which operands of VPU.OP a funct reads (docs/isa.md, VPU): vd is always written; an operand a
// funct does not use must be encoded as 0 (v0, imm 0), else the instruction is illegal.
struct FunctOperands {
  bool va, vb, vc, imm;
};
FunctOperands funct_operands(Funct f);
const char* funct_name(Funct f);  // "add", "sub", ... (the assembly names)
// Why `imm` is illegal for VPU.OP `f` beyond its operand use ("" if it is legal): bfx takes a
// shift in imm[4:0] and a width - 1 in imm[9:5], shlor a shift in imm[4:0], nothing above;
// seleqh a bf16 (imm < 2^16), max4 and argmax4 a register (imm < 16).
// (bcast's lane limit depends on N: decode and the assembler check it themselves.)
std::string funct_imm_problem(Funct f, uint32_t imm);

struct Instruction {
  Opcode op = Opcode::kNop;
  // WAIT, SIGNAL
  Unit unit = Unit::kDma;
  uint8_t sc = 0;            // 0..15
  uint32_t value = 0;        // WAIT
  bool remote = false;       // WAIT: on remote counter RCsc (incremented by the neighbours)
  Link link = Link::kLocal;  // SIGNAL: RCsc of that neighbour (DMA only); DMA.COPY: the
                             // destination walk is in that neighbour's memory
  // SIGNAL (w0 bit 16): count once the unit has read every operand of its earlier
  // instructions, their writes possibly still in flight (docs/isa.md, Sync); a remote SIGNAL
  // waits for completion whatever the flag
  bool reads = false;
  // IRQ
  uint32_t code = 0;
  // REPEAT: the next `len` instructions (the body, 1..REPEAT_MAX_LEN) execute `count` times
  uint16_t count = 0;  // 1..65535
  uint8_t len = 0;
  // VPU.LD / VPU.ST (addr), VPU.LI (imm), WAIT (value): added to that field once per iteration
  // of the REPEAT body the instruction is in (iteration i uses field + i * step, mod 2^32)
  int32_t step = 0;
  // DMA.LOOP
  Walk walk = Walk::kSrc;
  uint8_t pair = 0;         // 0: loops 0 and 1; 1: loops 2 and 3
  uint16_t c0 = 0, c1 = 0;  // 1..65535
  int32_t s0 = 0, s1 = 0;   // signed byte strides
  // DMA.COPY
  Space src_space = Space::kHbm, dst_space = Space::kHbm;
  uint8_t elem_bytes = 0;  // 4-bit field; values other than 2 and 4 are a DMA fault, not illegal
  uint32_t src = 0, dst = 0;
  // MXU.LDW, MXU.MM; VPU.LD / VPU.ST (addr: UB byte address or ACC row)
  AccMode acc_mode = AccMode::kSet;
  bool transpose = false;  // MXU.LDW: the tile is the transpose of the N rows read
  uint32_t addr = 0;
  int32_t stride = 0;    // signed byte stride between UB rows
  uint16_t rows = 0;     // MXU.MM: 1..65535
  uint16_t acc_row = 0;  // MXU.MM
  // MXU.MM: output row t goes to ACC row acc_row + t * acc_stride (1..256; w0[23:16] holds
  // acc_stride - 1, so 0 there is the consecutive rows of a plain MXU.MM)
  uint16_t acc_stride = 1;
  // VPU
  Kind kind = Kind::kUbF32;
  Funct funct = Funct::kAdd;
  uint8_t vd = 0, vs = 0, va = 0, vb = 0, vc = 0;  // 0..15
  uint32_t imm = 0;                                // VPU.OP (bcast lane), VPU.LI (lane pattern)

  bool operator==(const Instruction& o) const;
  bool operator!=(const Instruction& o) const { return !(*this == o); }
};

// Packs the fields into the four words. The fields must be legal (see decode); values are
// masked to their widths.
Words encode(const Instruction& inst);
// A program as it lies in HBM: each instruction's four words, little-endian, in order.
std::vector<uint8_t> encode_program(const std::vector<Instruction>& program);

enum class DecodeError : uint8_t {
  kNone,
  kUnknownOpcode,   // no such opcode
  kReservedOpcode,  // ICI.SEND / ICI.RECV: reserved, illegal until the multi-chip work
  kReservedBits,    // a reserved bit is set
  kFieldRange,      // a field's value is out of range (unit 3, kind 3, count 0, funct >= 24, ...)
  kUnusedOperand,   // VPU.OP: an operand the funct does not use is not zero
};

struct Decoded {
  Instruction inst;
  DecodeError error = DecodeError::kNone;
  std::string reason;  // empty when legal
  bool ok() const { return error == DecodeError::kNone; }
};

// Decodes one instruction; every illegal case of docs/isa.md (fault ILLEGAL_INSTRUCTION) is an
// error with its reason. `n` is the array size (bcast's lane must be < n).
Decoded decode(const Words& w, uint32_t n = kDefaultN);

const char* opcode_mnemonic(Opcode op);  // "nop", "dma.copy", ... (lower case)

// REPEAT bodies. `at_iteration` is the instruction as iteration `i` of a body executes it (the
// stepped field moved, step 0). `expand_repeats` unrolls every REPEAT of a program into the
// instructions it executes (the REPEATs themselves left out: a straight-line program that
// executes the same instructions); it throws std::invalid_argument (naming the index) for a REPEAT
// whose body runs past the end or holds a REPEAT or HALT, as the chip would fault on them.
Instruction at_iteration(const Instruction& inst, uint32_t i);
bool is_stepped(Opcode op);  // VPU.LD, VPU.ST, VPU.LI, WAIT: the opcodes with a step
// The field a step moves (addr, imm or value), or nullptr for an opcode without one.
uint32_t* stepped_field(Instruction& inst);
const uint32_t* stepped_field(const Instruction& inst);
std::vector<Instruction> expand_repeats(const std::vector<Instruction>& program);
// The number of instructions a program executes (expand_repeats(program).size(), counted).
uint64_t executed_count(const std::vector<Instruction>& program);
bool is_known_opcode(uint8_t op);

}  // namespace tessera::isa
