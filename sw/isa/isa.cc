// Encoding and decoding of Tessera instructions (docs/isa.md, "Instruction format").
#include "tessera/isa.h"

#include <cstdio>
#include <stdexcept>

namespace tessera::isa {
namespace {

constexpr uint32_t bits(uint32_t w, int hi, int lo) {
  return (w >> lo) & ((hi - lo == 31) ? 0xFFFFFFFFu : ((1u << (hi - lo + 1)) - 1));
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%x", v);
  return buf;
}

Decoded fail(DecodeError e, std::string why) {
  Decoded d;
  d.error = e;
  d.reason = std::move(why);
  return d;
}

// The bits of each word that an opcode defines; every other bit is reserved (must be 0).
struct FieldMasks {
  uint32_t w[4];
};

FieldMasks field_masks(Opcode op) {
  switch (op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      return {{0xFFu, 0, 0, 0}};
    case Opcode::kIrq:
      return {{0xFFu, 0xFFFFFFFFu, 0, 0}};
    case Opcode::kRepeat:
      return {{0xFFu, 0xFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kWait:
      return {{0xF7FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kSignal:
      return {{0x1FFFFu, 0, 0, 0}};
    case Opcode::kDmaLoop:
      return {{0xFFFF03FFu, 0xFFFFFFFFu, 0xFFFFu, 0xFFFFFFFFu}};
    case Opcode::kDmaCopy:
      return {{0xFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kMxuLdw:
      return {{0x1FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kMxuMm:
      return {{0xFF01FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu}};
    case Opcode::kVpuLd:
      return {{0xF03FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kVpuSt:
      return {{0xF003FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
    case Opcode::kVpuOp:
      return {{0xFFFFFFFFu, 0xFFFFFFFFu, 0, 0}};
    case Opcode::kVpuLi:
      return {{0xF00FFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0}};
  }
  return {{0xFFu, 0, 0, 0}};
}

}  // namespace

FunctOperands funct_operands(Funct f) {
  switch (f) {
    case Funct::kSqrt:
    case Funct::kI2F:
    case Funct::kF2I:
    case Funct::kF2Bf:
    case Funct::kRSum:
    case Funct::kRMax:
      return {true, false, false, false};
    case Funct::kSel:
    case Funct::kAddMax:
      return {true, true, true, false};
    case Funct::kBcast:
    case Funct::kBfx:
      return {true, false, false, true};
    case Funct::kSelEq:
    case Funct::kSelNe:
    case Funct::kSelLt:
    case Funct::kSelEqH:
    case Funct::kMax4:
    case Funct::kArgMax4:
      return {true, true, true, true};
    case Funct::kShlOr:
      return {true, true, false, true};
    default:
      return {true, true, false, false};
  }
}

const char* funct_name(Funct f) {
  static const char* const kNames[] = {
      "add", "sub",  "mul",  "div",   "sqrt",  "min",   "max",   "cmpeq", "cmplt", "cmple",
      "sel", "i2f",  "f2i",  "f2bf",  "iadd",  "iand",  "ior",   "ixor",  "shl",   "shr",
      "sra", "rsum", "rmax", "bcast", "seleq", "selne", "sellt", "bfx",   "shlor",
      "seleqh", "addmax", "max4", "argmax4"};
  static_assert(sizeof kNames / sizeof kNames[0] == VF_COUNT, "a name for every funct");
  const auto i = static_cast<unsigned>(f);
  return i < VF_COUNT ? kNames[i] : "?";
}

std::string funct_imm_problem(Funct f, uint32_t imm) {
  if (f == Funct::kBfx && imm >= (1u << 10))
    return "bfx imm " + std::to_string(imm) + " has bits above 9 (shift in 4:0, width - 1 in 9:5)";
  if (f == Funct::kShlOr && imm >= 32)
    return "shlor shift " + std::to_string(imm) + " is not below 32";
  if (f == Funct::kSelEqH && imm >= (1u << 16))
    return "seleqh imm " + std::to_string(imm) + " is not a bf16 (bits above 15)";
  if ((f == Funct::kMax4 || f == Funct::kArgMax4) && imm >= 16)
    return std::string(funct_name(f)) + " imm " + std::to_string(imm) +
           " names no register (the fourth operand: 0..15)";
  return "";
}

const char* opcode_mnemonic(Opcode op) {
  switch (op) {
    case Opcode::kNop:
      return "nop";
    case Opcode::kHalt:
      return "halt";
    case Opcode::kFence:
      return "fence";
    case Opcode::kIrq:
      return "irq";
    case Opcode::kRepeat:
      return "repeat";
    case Opcode::kWait:
      return "wait";
    case Opcode::kSignal:
      return "signal";
    case Opcode::kDmaLoop:
      return "dma.loop";
    case Opcode::kDmaCopy:
      return "dma.copy";
    case Opcode::kMxuLdw:
      return "mxu.ldw";
    case Opcode::kMxuMm:
      return "mxu.mm";
    case Opcode::kVpuLd:
      return "vpu.ld";
    case Opcode::kVpuSt:
      return "vpu.st";
    case Opcode::kVpuOp:
      return "vpu.op";
    case Opcode::kVpuLi:
      return "vpu.li";
  }
  return "?";
}

bool is_known_opcode(uint8_t op) {
  switch (op) {
    case OP_NOP:
    case OP_HALT:
    case OP_FENCE:
    case OP_IRQ:
    case OP_REPEAT:
    case OP_WAIT:
    case OP_SIGNAL:
    case OP_DMA_LOOP:
    case OP_DMA_COPY:
    case OP_MXU_LDW:
    case OP_MXU_MM:
    case OP_VPU_LD:
    case OP_VPU_ST:
    case OP_VPU_OP:
    case OP_VPU_LI:
      return true;
    default:
      return false;
  }
}

bool Instruction::operator==(const Instruction& o) const {
  return op == o.op && unit == o.unit && sc == o.sc && value == o.value && code == o.code &&
         walk == o.walk && pair == o.pair && c0 == o.c0 && c1 == o.c1 && s0 == o.s0 && s1 == o.s1 &&
         src_space == o.src_space && dst_space == o.dst_space && elem_bytes == o.elem_bytes &&
         src == o.src && dst == o.dst && acc_mode == o.acc_mode && transpose == o.transpose &&
         addr == o.addr && stride == o.stride && rows == o.rows && acc_row == o.acc_row &&
         acc_stride == o.acc_stride && kind == o.kind && funct == o.funct && vd == o.vd &&
         vs == o.vs && va == o.va && vb == o.vb && vc == o.vc && imm == o.imm &&
         remote == o.remote && link == o.link && reads == o.reads && count == o.count && len == o.len && step == o.step;
}

Words encode(const Instruction& i) {
  Words w = {static_cast<uint32_t>(i.op), 0, 0, 0};
  switch (i.op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      break;
    case Opcode::kIrq:
      w[1] = i.code;
      break;
    case Opcode::kRepeat:
      w[1] = i.count;
      w[2] = i.len;
      break;
    case Opcode::kWait:
      w[1] = i.value;
      w[2] = static_cast<uint32_t>(i.step);
      w[0] |= (static_cast<uint32_t>(i.unit) & 3u) << 8 | (i.remote ? 1u : 0u) << 10 |
              (i.sc & 0xFu) << 12;
      break;
    case Opcode::kSignal:
      w[0] |= (static_cast<uint32_t>(i.unit) & 3u) << 8 |
              (static_cast<uint32_t>(i.link) & 3u) << 10 | (i.sc & 0xFu) << 12 |
              (i.reads ? 1u : 0u) << 16;
      break;
    case Opcode::kDmaLoop:
      w[0] |= (static_cast<uint32_t>(i.walk) & 1u) << 8 | (i.pair & 1u) << 9 |
              static_cast<uint32_t>(i.c0) << 16;
      w[1] = static_cast<uint32_t>(i.s0);
      w[2] = i.c1;
      w[3] = static_cast<uint32_t>(i.s1);
      break;
    case Opcode::kDmaCopy:
      w[0] |= (static_cast<uint32_t>(i.src_space) & 1u) << 8 |
              (static_cast<uint32_t>(i.dst_space) & 1u) << 9 |
              (static_cast<uint32_t>(i.link) & 3u) << 10 | (i.elem_bytes & 0xFu) << 12;
      w[1] = i.src;
      w[2] = i.dst;
      break;
    case Opcode::kMxuLdw:
      w[0] |= static_cast<uint32_t>(i.transpose) << 8;
      w[1] = i.addr;
      w[2] = static_cast<uint32_t>(i.stride);
      break;
    case Opcode::kMxuMm:
      w[0] |= (static_cast<uint32_t>(i.acc_mode) & 1u) << 8 |
              ((static_cast<uint32_t>(i.acc_stride) - 1u) & 0xFFu) << 16;
      w[1] = i.addr;
      w[2] = static_cast<uint32_t>(i.stride);
      w[3] = static_cast<uint32_t>(i.rows) | static_cast<uint32_t>(i.acc_row) << 16;
      break;
    case Opcode::kVpuLd:
      w[0] |= (static_cast<uint32_t>(i.kind) & 3u) << 8 | (i.vd & 0xFu) << 16;
      w[1] = i.addr;
      w[2] = static_cast<uint32_t>(i.step);
      break;
    case Opcode::kVpuSt:
      w[0] |= (static_cast<uint32_t>(i.kind) & 3u) << 8 | (i.vs & 0xFu) << 20;
      w[1] = i.addr;
      w[2] = static_cast<uint32_t>(i.step);
      break;
    case Opcode::kVpuOp:
      w[0] |= static_cast<uint32_t>(i.funct) << 8 | (i.vd & 0xFu) << 16 | (i.va & 0xFu) << 20 |
              (i.vb & 0xFu) << 24 | (i.vc & 0xFu) << 28;
      w[1] = i.imm;
      break;
    case Opcode::kVpuLi:
      w[0] |= (i.vd & 0xFu) << 16;
      w[1] = i.imm;
      w[2] = static_cast<uint32_t>(i.step);
      break;
  }
  return w;
}

std::vector<uint8_t> encode_program(const std::vector<Instruction>& program) {
  std::vector<uint8_t> out;
  out.reserve(program.size() * kInstructionBytes);
  for (const Instruction& i : program) {
    for (uint32_t w : encode(i)) {
      for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(w >> (8 * k)));
    }
  }
  return out;
}

Decoded decode(const Words& w, uint32_t n) {
  const uint32_t opc = w[0] & 0xFFu;
  if (opc == OP_ICI_SEND || opc == OP_ICI_RECV) {
    return fail(DecodeError::kReservedOpcode,
                std::string("reserved opcode ") + hex(opc) +
                    (opc == OP_ICI_SEND ? " (ICI.SEND)" : " (ICI.RECV)") +
                    " is illegal until the multi-chip work");
  }
  if (!is_known_opcode(static_cast<uint8_t>(opc))) {
    return fail(DecodeError::kUnknownOpcode, "unknown opcode " + hex(opc));
  }
  const auto op = static_cast<Opcode>(opc);
  const FieldMasks m = field_masks(op);
  for (int k = 0; k < 4; ++k) {
    if (w[k] & ~m.w[k]) {
      return fail(DecodeError::kReservedBits, std::string(opcode_mnemonic(op)) +
                                                  ": reserved bits set in w" + std::to_string(k) +
                                                  " (" + hex(w[k] & ~m.w[k]) + ")");
    }
  }
  Decoded d;
  Instruction& i = d.inst;
  i.op = op;
  const auto range = [&](const std::string& why) {
    return fail(DecodeError::kFieldRange, std::string(opcode_mnemonic(op)) + ": " + why);
  };
  switch (op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      break;
    case Opcode::kIrq:
      i.code = w[1];
      break;
    case Opcode::kRepeat:
      i.count = static_cast<uint16_t>(w[1]);
      if (i.count == 0) return range("count is 0 (1..65535)");
      if (w[2] == 0 || w[2] > REPEAT_MAX_LEN) {
        return range("len " + std::to_string(w[2]) + " is not 1.." +
                     std::to_string(REPEAT_MAX_LEN));
      }
      i.len = static_cast<uint8_t>(w[2]);
      break;
    case Opcode::kWait:
      i.value = w[1];
      i.step = static_cast<int32_t>(w[2]);
      [[fallthrough]];
    case Opcode::kSignal: {
      const uint32_t unit = bits(w[0], 9, 8);
      if (unit == 3) return range("unit 3 is not a unit (0 dma, 1 mxu, 2 vpu)");
      i.unit = static_cast<Unit>(unit);
      i.sc = static_cast<uint8_t>(bits(w[0], 15, 12));
      if (op == Opcode::kWait) {
        i.remote = bits(w[0], 10, 10) != 0;
      } else {
        const uint32_t link = bits(w[0], 11, 10);
        if (link == 3) return range("link 3 is not a link (0 local, 1 next, 2 prev)");
        if (link != 0 && i.unit != Unit::kDma) {
          return range("only the DMA signals a neighbour's counter (unit dma with a link)");
        }
        i.link = static_cast<Link>(link);
        i.reads = bits(w[0], 16, 16) != 0;
      }
      break;
    }
    case Opcode::kDmaLoop:
      i.walk = static_cast<Walk>(bits(w[0], 8, 8));
      i.pair = static_cast<uint8_t>(bits(w[0], 9, 9));
      i.c0 = static_cast<uint16_t>(bits(w[0], 31, 16));
      i.s0 = static_cast<int32_t>(w[1]);
      i.c1 = static_cast<uint16_t>(bits(w[2], 15, 0));
      i.s1 = static_cast<int32_t>(w[3]);
      if (i.c0 == 0) return range("count c0 is 0 (1..65535)");
      if (i.c1 == 0) return range("count c1 is 0 (1..65535)");
      break;
    case Opcode::kDmaCopy:
      i.src_space = static_cast<Space>(bits(w[0], 8, 8));
      i.dst_space = static_cast<Space>(bits(w[0], 9, 9));
      i.elem_bytes = static_cast<uint8_t>(bits(w[0], 15, 12));
      i.src = w[1];
      i.dst = w[2];
      if (bits(w[0], 11, 10) == 3) return range("link 3 is not a link (0 local, 1 next, 2 prev)");
      i.link = static_cast<Link>(bits(w[0], 11, 10));
      break;
    case Opcode::kMxuLdw:
      i.transpose = bits(w[0], 8, 8) != 0;
      i.addr = w[1];
      i.stride = static_cast<int32_t>(w[2]);
      break;
    case Opcode::kMxuMm:
      i.acc_mode = static_cast<AccMode>(bits(w[0], 8, 8));
      i.addr = w[1];
      i.stride = static_cast<int32_t>(w[2]);
      i.rows = static_cast<uint16_t>(bits(w[3], 15, 0));
      i.acc_row = static_cast<uint16_t>(bits(w[3], 31, 16));
      i.acc_stride = static_cast<uint16_t>(bits(w[0], 23, 16) + 1);
      if (i.rows == 0) return range("rows is 0 (1..65535)");
      break;
    case Opcode::kVpuLd:
    case Opcode::kVpuSt: {
      const uint32_t kind = bits(w[0], 9, 8);
      if (kind == 3) return range("kind 3 is not a kind (0 f32, 1 bf16, 2 acc)");
      i.kind = static_cast<Kind>(kind);
      if (op == Opcode::kVpuLd) {
        i.vd = static_cast<uint8_t>(bits(w[0], 19, 16));
      } else {
        i.vs = static_cast<uint8_t>(bits(w[0], 23, 20));
      }
      i.addr = w[1];
      i.step = static_cast<int32_t>(w[2]);
      break;
    }
    case Opcode::kVpuOp: {
      const uint32_t f = bits(w[0], 15, 8);
      if (f >= VF_COUNT) {
        return range("funct " + std::to_string(f) + " is not a funct (0.." +
                     std::to_string(VF_COUNT - 1) + ")");
      }
      i.funct = static_cast<Funct>(f);
      i.vd = static_cast<uint8_t>(bits(w[0], 19, 16));
      i.va = static_cast<uint8_t>(bits(w[0], 23, 20));
      i.vb = static_cast<uint8_t>(bits(w[0], 27, 24));
      i.vc = static_cast<uint8_t>(bits(w[0], 31, 28));
      i.imm = w[1];
      const FunctOperands u = funct_operands(i.funct);
      const std::string fn = funct_name(i.funct);
      const auto unused = [&](const char* what) {
        return fail(DecodeError::kUnusedOperand,
                    "vpu.op " + fn + " does not use " + what + ": it must be 0");
      };
      if (!u.va && i.va) return unused("va");
      if (!u.vb && i.vb) return unused("vb");
      if (!u.vc && i.vc) return unused("vc");
      if (!u.imm && i.imm) return unused("imm");
      if (i.funct == Funct::kBcast && i.imm >= n) {
        return range("bcast lane " + std::to_string(i.imm) +
                     " is not below N = " + std::to_string(n));
      }
      if (const std::string why = funct_imm_problem(i.funct, i.imm); !why.empty())
        return range(why);
      break;
    }
    case Opcode::kVpuLi:
      i.vd = static_cast<uint8_t>(bits(w[0], 19, 16));
      i.imm = w[1];
      i.step = static_cast<int32_t>(w[2]);
      break;
  }
  return d;
}

bool is_stepped(Opcode op) {
  Instruction probe;
  probe.op = op;
  return stepped_field(probe) != nullptr;
}

uint32_t* stepped_field(Instruction& inst) {
  switch (inst.op) {
    case Opcode::kWait:
      return &inst.value;
    case Opcode::kVpuLi:
      return &inst.imm;
    case Opcode::kVpuLd:
    case Opcode::kVpuSt:
      return &inst.addr;
    default:
      return nullptr;
  }
}

const uint32_t* stepped_field(const Instruction& inst) {
  return stepped_field(const_cast<Instruction&>(inst));
}

Instruction at_iteration(const Instruction& inst, uint32_t i) {
  Instruction out = inst;
  if (uint32_t* f = stepped_field(out)) {
    *f += i * static_cast<uint32_t>(inst.step);
    out.step = 0;
  }
  return out;
}

uint64_t executed_count(const std::vector<Instruction>& program) {
  uint64_t n = 0;
  for (size_t k = 0; k < program.size(); ++k) {
    if (program[k].op != Opcode::kRepeat) {
      ++n;
      continue;
    }
    n += uint64_t(program[k].count) * program[k].len;
    k += program[k].len;
  }
  return n;
}

std::vector<Instruction> expand_repeats(const std::vector<Instruction>& program) {
  std::vector<Instruction> out;
  out.reserve(program.size());
  for (size_t k = 0; k < program.size(); ++k) {
    const Instruction& r = program[k];
    if (r.op != Opcode::kRepeat) {
      out.push_back(at_iteration(r, 0));
      continue;
    }
    const std::string where = "instruction " + std::to_string(k) + " (repeat)";
    if (r.len == 0 || r.len > REPEAT_MAX_LEN || r.count == 0)
      throw std::invalid_argument(where + ": count or len out of range");
    if (k + r.len >= program.size())
      throw std::invalid_argument(where + ": the body runs past the end of the program");
    for (size_t j = k + 1; j <= k + r.len; ++j) {
      if (program[j].op == Opcode::kRepeat || program[j].op == Opcode::kHalt)
        throw std::invalid_argument(where + ": its body holds a " + opcode_mnemonic(program[j].op) +
                                    " at " + std::to_string(j));
    }
    for (uint32_t it = 0; it < r.count; ++it) {
      for (size_t j = k + 1; j <= k + r.len; ++j) out.push_back(at_iteration(program[j], it));
    }
    k += r.len;
  }
  return out;
}

}  // namespace tessera::isa
