// The ISA encoder/decoder (sw/isa), the assembler and disassembler (sw/asm) and the
// tessera asm / disasm tool functions (sw/tools/asm_tool). No Verilator models.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "sw/asm/assembler.h"
#include "sw/tools/asm_tool.h"
#include "tessera/asm.h"
#include "tessera/isa.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

using isa::Decoded;
using isa::DecodeError;
using isa::Instruction;
using isa::Opcode;
using isa::Words;

const Opcode kOpcodes[] = {Opcode::kNop,    Opcode::kHalt,   Opcode::kFence,   Opcode::kIrq,
                           Opcode::kWait,   Opcode::kSignal, Opcode::kDmaLoop, Opcode::kDmaCopy,
                           Opcode::kMxuLdw, Opcode::kMxuMm,  Opcode::kVpuLd,   Opcode::kVpuSt,
                           Opcode::kVpuOp,  Opcode::kVpuLi,  Opcode::kRepeat};
constexpr size_t kOpcodeCount = sizeof kOpcodes / sizeof kOpcodes[0];

// A random legal instruction of opcode `op` (fields the opcode lacks stay zero).
Instruction random_legal(Opcode op, std::mt19937_64& g, uint32_t n = 16) {
  const auto u32 = [&] { return static_cast<uint32_t>(g()); };
  const auto u16nz = [&] { return static_cast<uint16_t>(1 + g() % 65535); };
  const auto r4 = [&] { return static_cast<uint8_t>(g() % 16); };
  Instruction i;
  i.op = op;
  switch (op) {
    case Opcode::kNop:
    case Opcode::kHalt:
    case Opcode::kFence:
      break;
    case Opcode::kIrq:
      i.code = u32();
      break;
    case Opcode::kRepeat:
      i.count = u16nz();
      i.len = static_cast<uint8_t>(1 + g() % isa::REPEAT_MAX_LEN);
      break;
    case Opcode::kWait:
      i.value = u32();
      i.step = static_cast<int32_t>(u32());
      [[fallthrough]];
    case Opcode::kSignal:
      i.unit = static_cast<isa::Unit>(g() % 3);
      i.sc = r4();
      if (op == Opcode::kSignal) i.reads = g() % 2 == 0;
      break;
    case Opcode::kDmaLoop:
      i.walk = static_cast<isa::Walk>(g() % 2);
      i.pair = static_cast<uint8_t>(g() % 2);
      i.c0 = u16nz();
      i.c1 = u16nz();
      i.s0 = static_cast<int32_t>(u32());
      i.s1 = static_cast<int32_t>(u32());
      break;
    case Opcode::kDmaCopy:
      i.src_space = static_cast<isa::Space>(g() % 2);
      i.dst_space = static_cast<isa::Space>(g() % 2);
      i.elem_bytes = static_cast<uint8_t>(g() % 16);
      i.src = u32();
      i.dst = u32();
      break;
    case Opcode::kMxuLdw:
      i.transpose = g() % 2 == 0;
      i.addr = u32();
      i.stride = static_cast<int32_t>(u32());
      break;
    case Opcode::kMxuMm:
      i.acc_mode = static_cast<isa::AccMode>(g() % 2);
      i.addr = u32();
      i.stride = static_cast<int32_t>(u32());
      i.rows = u16nz();
      i.acc_row = static_cast<uint16_t>(g());
      i.acc_stride = static_cast<uint16_t>(1 + g() % 256);
      break;
    case Opcode::kVpuLd:
      i.kind = static_cast<isa::Kind>(g() % 3);
      i.vd = r4();
      i.addr = u32();
      i.step = static_cast<int32_t>(u32());
      break;
    case Opcode::kVpuSt:
      i.kind = static_cast<isa::Kind>(g() % 3);
      i.vs = r4();
      i.addr = u32();
      i.step = static_cast<int32_t>(u32());
      break;
    case Opcode::kVpuOp: {
      i.funct = static_cast<isa::Funct>(g() % isa::VF_COUNT);
      const isa::FunctOperands u = isa::funct_operands(i.funct);
      i.vd = r4();
      if (u.va) i.va = r4();
      if (u.vb) i.vb = r4();
      if (u.vc) i.vc = r4();
      if (u.imm) i.imm = static_cast<uint32_t>(g() % n);
      break;
    }
    case Opcode::kVpuLi:
      i.vd = r4();
      i.imm = u32();
      i.step = static_cast<int32_t>(u32());
      break;
  }
  return i;
}

std::string words_hex(const Words& w) {
  char b[64];
  std::snprintf(b, sizeof b, "%08x %08x %08x %08x", w[0], w[1], w[2], w[3]);
  return b;
}

TEST(Isa, RandomLegalInstructionsRoundTripExactly) {
  std::mt19937_64 g(test::test_seed());
  for (Opcode op : kOpcodes) {
    for (int k = 0; k < 2000; ++k) {
      const Instruction i = random_legal(op, g);
      const Words w = isa::encode(i);
      EXPECT_EQ(w[0] & 0xFF, static_cast<uint32_t>(op));
      const Decoded d = isa::decode(w);
      ASSERT_TRUE(d.ok()) << isa::opcode_mnemonic(op) << " " << words_hex(w) << ": " << d.reason;
      ASSERT_EQ(d.inst, i) << words_hex(w);
      ASSERT_EQ(isa::encode(d.inst), w);
    }
  }
}

TEST(Isa, LegalWordPatternsReencodeExactly) {
  std::mt19937_64 g(test::test_seed());
  int legal = 0;
  for (int k = 0; k < 200000; ++k) {
    Words w = {static_cast<uint32_t>(g()), static_cast<uint32_t>(g()), static_cast<uint32_t>(g()),
               static_cast<uint32_t>(g())};
    // Mostly known opcodes with few reserved bits set, so that many patterns are legal.
    w[0] = (w[0] & ~0xFFu) | static_cast<uint32_t>(kOpcodes[g() % kOpcodeCount]);
    const Instruction probe = [&] {
      Instruction i;
      i.op = static_cast<Opcode>(w[0] & 0xFF);
      return i;
    }();
    // Keep only the bits a random legal instruction of this opcode could have set.
    Words m = {0xFFu, 0, 0, 0};
    std::mt19937_64 g2(g());
    for (int t = 0; t < 64; ++t) {
      const Words e = isa::encode(random_legal(probe.op, g2));
      for (int q = 0; q < 4; ++q) m[q] |= e[q];
    }
    if (g() % 4 != 0) {
      for (int q = 0; q < 4; ++q) w[q] &= m[q];
    }
    const Decoded d = isa::decode(w);
    if (!d.ok()) continue;
    ++legal;
    ASSERT_EQ(isa::encode(d.inst), w) << words_hex(w);
  }
  std::cout << legal << " of 200000 random patterns were legal" << std::endl;
  EXPECT_GT(legal, 100000);
}

struct IllegalCase {
  Words w;
  DecodeError error;
  const char* reason_part;
};

TEST(Isa, EveryIllegalCaseIsRejectedWithItsReason) {
  const uint32_t kOp = isa::OP_VPU_OP;
  const auto vop = [&](uint32_t f, uint32_t vd, uint32_t va, uint32_t vb, uint32_t vc) {
    return kOp | f << 8 | vd << 16 | va << 20 | vb << 24 | vc << 28;
  };
  const std::vector<IllegalCase> cases = {
      {{0x05, 0, 0, 0}, DecodeError::kUnknownOpcode, "unknown opcode 0x5"},
      {{isa::OP_REPEAT, 0, 4, 0}, DecodeError::kFieldRange, "count is 0"},
      {{isa::OP_REPEAT, 3, 0, 0}, DecodeError::kFieldRange, "len 0 is not 1..32"},
      {{isa::OP_REPEAT, 3, 33, 0}, DecodeError::kFieldRange, "len 33 is not 1..32"},
      {{isa::OP_REPEAT, 0x10003, 4, 0}, DecodeError::kReservedBits, "w1 (0x10000)"},
      {{isa::OP_REPEAT | 0x100, 3, 4, 0}, DecodeError::kReservedBits, "w0 (0x100)"},
      {{isa::OP_REPEAT, 3, 4, 1}, DecodeError::kReservedBits, "w3"},
      {{0x12, 0, 0, 0}, DecodeError::kUnknownOpcode, "unknown opcode 0x12"},
      {{0x44, 0, 0, 0}, DecodeError::kUnknownOpcode, "unknown opcode 0x44"},
      {{0xFF, 0, 0, 0}, DecodeError::kUnknownOpcode, "unknown opcode 0xff"},
      {{isa::OP_ICI_SEND, 0, 0, 0}, DecodeError::kReservedOpcode, "ICI.SEND"},
      {{isa::OP_ICI_RECV, 0, 0, 0}, DecodeError::kReservedOpcode, "ICI.RECV"},
      {{isa::OP_NOP | 0x100, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x100)"},
      {{isa::OP_HALT, 1, 0, 0}, DecodeError::kReservedBits, "w1"},
      {{isa::OP_FENCE, 0, 0, 0x80000000u}, DecodeError::kReservedBits, "w3 (0x80000000)"},
      {{isa::OP_IRQ, 5, 1, 0}, DecodeError::kReservedBits, "w2"},
      {{isa::OP_WAIT | 0x800, 1, 0, 0}, DecodeError::kReservedBits, "w0 (0x800)"},
      {{isa::OP_WAIT, 1, 2, 3}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_SIGNAL, 1, 0, 0}, DecodeError::kReservedBits, "w1"},
      {{isa::OP_SIGNAL | 0x20000, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x20000)"},
      {{isa::OP_DMA_LOOP | 0x10400, 0, 1, 0}, DecodeError::kReservedBits, "w0 (0x400)"},
      {{isa::OP_DMA_LOOP | 0x10000, 0, 0x10001, 0}, DecodeError::kReservedBits, "w2 (0x10000)"},
      {{isa::OP_DMA_COPY | 0x20000, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x20000)"},
      {{isa::OP_DMA_COPY | 0x2C00, 0, 0, 0}, DecodeError::kFieldRange, "link 3"},
      {{isa::OP_SIGNAL | 0xC00, 0, 0, 0}, DecodeError::kFieldRange, "link 3"},
      {{isa::OP_SIGNAL | 0x500, 0, 0, 0}, DecodeError::kFieldRange, "only the DMA"},
      {{isa::OP_DMA_COPY | 0x2000, 0, 0, 7}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_MXU_LDW | 0x200, 0, 32, 0}, DecodeError::kReservedBits, "w0"},
      {{isa::OP_MXU_LDW, 0, 32, 1}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_MXU_MM | 0x200, 0, 32, 1}, DecodeError::kReservedBits, "w0 (0x200)"},
      {{isa::OP_VPU_LD | 0x100000, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x100000)"},
      {{isa::OP_VPU_LD, 0, 1, 1}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_VPU_LI, 0, 1, 1}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_VPU_ST | 0x10000, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x10000)"},
      {{vop(0, 1, 2, 3, 0), 0, 0, 4}, DecodeError::kReservedBits, "w3"},
      {{isa::OP_VPU_LI | 0x100, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x100)"},
      {{isa::OP_VPU_LI | 0x100000, 0, 0, 0}, DecodeError::kReservedBits, "w0 (0x100000)"},
      {{isa::OP_WAIT | 0x300, 1, 0, 0}, DecodeError::kFieldRange, "unit 3"},
      {{isa::OP_SIGNAL | 0x300, 0, 0, 0}, DecodeError::kFieldRange, "unit 3"},
      {{isa::OP_DMA_LOOP, 4, 1, 4}, DecodeError::kFieldRange, "c0 is 0"},
      {{isa::OP_DMA_LOOP | 0x10000, 4, 0, 4}, DecodeError::kFieldRange, "c1 is 0"},
      {{isa::OP_MXU_MM, 0, 32, 0x00050000}, DecodeError::kFieldRange, "rows is 0"},
      {{isa::OP_VPU_LD | 0x300, 0, 0, 0}, DecodeError::kFieldRange, "kind 3"},
      {{isa::OP_VPU_ST | 0x300, 0, 0, 0}, DecodeError::kFieldRange, "kind 3"},
      {{vop(33, 0, 0, 0, 0), 0, 0, 0}, DecodeError::kFieldRange, "funct 33"},
      {{vop(29, 1, 2, 3, 4), 65536, 0, 0}, DecodeError::kFieldRange, "seleqh imm 65536"},
      {{vop(31, 1, 2, 3, 4), 16, 0, 0}, DecodeError::kFieldRange, "max4 imm 16"},
      {{vop(30, 1, 2, 3, 4), 1, 0, 0}, DecodeError::kUnusedOperand, "addmax does not use imm"},
      {{vop(27, 1, 2, 0, 0), 1024, 0, 0}, DecodeError::kFieldRange, "bfx imm 1024"},
      {{vop(28, 1, 2, 3, 0), 32, 0, 0}, DecodeError::kFieldRange, "shlor shift 32"},
      {{vop(27, 1, 2, 3, 0), 5, 0, 0}, DecodeError::kUnusedOperand, "bfx does not use vb"},
      {{vop(28, 1, 2, 3, 4), 5, 0, 0}, DecodeError::kUnusedOperand, "shlor does not use vc"},
      {{vop(255, 0, 0, 0, 0), 0, 0, 0}, DecodeError::kFieldRange, "funct 255"},
      {{vop(23, 1, 2, 0, 0), 16, 0, 0}, DecodeError::kFieldRange, "bcast lane 16"},
      {{vop(4, 1, 2, 3, 0), 0, 0, 0}, DecodeError::kUnusedOperand, "sqrt does not use vb"},
      {{vop(0, 1, 2, 3, 4), 0, 0, 0}, DecodeError::kUnusedOperand, "add does not use vc"},
      {{vop(0, 1, 2, 3, 0), 1, 0, 0}, DecodeError::kUnusedOperand, "add does not use imm"},
      {{vop(10, 1, 2, 3, 4), 1, 0, 0}, DecodeError::kUnusedOperand, "sel does not use imm"},
      {{vop(23, 1, 2, 3, 0), 1, 0, 0}, DecodeError::kUnusedOperand, "bcast does not use vb"},
      {{vop(21, 1, 2, 0, 5), 0, 0, 0}, DecodeError::kUnusedOperand, "rsum does not use vc"},
  };
  for (const auto& c : cases) {
    const Decoded d = isa::decode(c.w);
    EXPECT_FALSE(d.ok()) << words_hex(c.w);
    EXPECT_EQ(d.error, c.error) << words_hex(c.w) << ": " << d.reason;
    EXPECT_NE(d.reason.find(c.reason_part), std::string::npos)
        << words_hex(c.w) << ": '" << d.reason << "' lacks '" << c.reason_part << "'";
  }
  // bcast's lane limit is N's.
  EXPECT_TRUE(isa::decode({vop(23, 1, 2, 0, 0), 16, 0, 0}, 32).ok());
  EXPECT_TRUE(isa::decode({vop(23, 1, 2, 0, 0), 15, 0, 0}, 16).ok());
}

// ----------------------------------------------------------------------------------------------
// Assembler

Instruction make(Opcode op) {
  Instruction i;
  i.op = op;
  return i;
}

TEST(Assembler, EveryMnemonicAssemblesToItsFields) {
  const std::string text =
      "nop\n"
      "halt\n"
      "fence\n"
      "irq 7\n"
      "wait vpu, sc15, 3\n"
      "signal mxu, sc2\n"
      "signal mxu, sc3, reads\n"
      "dma.loop dst, 1, 28, -2, 65535, 0x38\n"
      "dma.copy ub, hbm, 4, 0x100, 0x10000\n"
      "mxu.ldw 0x4000, -32\n"
      "mxu.ldw 0x4000, -32, t\n"
      "mxu.mm acc, 0x0, 32, 676, 12\n"
      "mxu.mm acc, 0x0, 32, 676, 12, 4\n"
      "vpu.ld bf16, v3, 0x40\n"
      "vpu.st acc, v15, 1023\n"
      "vpu.op sel, v1, v2, v3, v4\n"
      "vpu.op bcast, v5, v6, v0, v0, 15\n"
      "vpu.li v9, -1\n"
      "wait dma, rc4, 2\n"
      "signal dma, rc5, prev\n"
      "dma.copy hbm, ub, 2, 0x20, 0x40, next\n"
      "repeat 1000, 3\n"
      "vpu.ld f32, v1, 0x80, 64\n"
      "vpu.li v2, 0x00000001, -3\n"
      "wait vpu, sc2, 7, 1\n";
  const assembler::AsmResult r = assembler::assemble(text);
  ASSERT_TRUE(r.ok()) << assembler::format_error("t.s", r.errors[0]);
  std::vector<Instruction> want;
  want.push_back(make(Opcode::kNop));
  want.push_back(make(Opcode::kHalt));
  want.push_back(make(Opcode::kFence));
  Instruction i = make(Opcode::kIrq);
  i.code = 7;
  want.push_back(i);
  i = make(Opcode::kWait);
  i.unit = isa::Unit::kVpu;
  i.sc = 15;
  i.value = 3;
  want.push_back(i);
  i = make(Opcode::kSignal);
  i.unit = isa::Unit::kMxu;
  i.sc = 2;
  want.push_back(i);
  i.sc = 3;
  i.reads = true;
  want.push_back(i);
  i.reads = false;
  i = make(Opcode::kDmaLoop);
  i.walk = isa::Walk::kDst;
  i.pair = 1;
  i.c0 = 28;
  i.s0 = -2;
  i.c1 = 65535;
  i.s1 = 0x38;
  want.push_back(i);
  i = make(Opcode::kDmaCopy);
  i.src_space = isa::Space::kUb;
  i.dst_space = isa::Space::kHbm;
  i.elem_bytes = 4;
  i.src = 0x100;
  i.dst = 0x10000;
  want.push_back(i);
  i = make(Opcode::kMxuLdw);
  i.addr = 0x4000;
  i.stride = -32;
  want.push_back(i);
  i.transpose = true;
  want.push_back(i);
  i = make(Opcode::kMxuMm);
  i.acc_mode = isa::AccMode::kAcc;
  i.stride = 32;
  i.rows = 676;
  i.acc_row = 12;
  want.push_back(i);
  i.acc_stride = 4;
  want.push_back(i);
  i = make(Opcode::kVpuLd);
  i.kind = isa::Kind::kUbBf16;
  i.vd = 3;
  i.addr = 0x40;
  want.push_back(i);
  i = make(Opcode::kVpuSt);
  i.kind = isa::Kind::kAcc;
  i.vs = 15;
  i.addr = 1023;
  want.push_back(i);
  i = make(Opcode::kVpuOp);
  i.funct = isa::Funct::kSel;
  i.vd = 1;
  i.va = 2;
  i.vb = 3;
  i.vc = 4;
  want.push_back(i);
  i = make(Opcode::kVpuOp);
  i.funct = isa::Funct::kBcast;
  i.vd = 5;
  i.va = 6;
  i.imm = 15;
  want.push_back(i);
  i = make(Opcode::kVpuLi);
  i.vd = 9;
  i.imm = 0xFFFFFFFFu;
  want.push_back(i);
  i = make(Opcode::kWait);  // multi-chip forms (docs/isa.md, "Multi-chip")
  i.sc = 4;
  i.value = 2;
  i.remote = true;
  want.push_back(i);
  i = make(Opcode::kSignal);
  i.sc = 5;
  i.link = isa::Link::kPrev;
  want.push_back(i);
  i = make(Opcode::kDmaCopy);
  i.elem_bytes = 2;
  i.src_space = isa::Space::kHbm;
  i.dst_space = isa::Space::kUb;
  i.src = 0x20;
  i.dst = 0x40;
  i.link = isa::Link::kNext;
  want.push_back(i);
  i = make(Opcode::kRepeat);  // a loop (docs/isa.md, "Loops") and the stepped fields
  i.count = 1000;
  i.len = 3;
  want.push_back(i);
  i = make(Opcode::kVpuLd);
  i.vd = 1;
  i.addr = 0x80;
  i.step = 64;
  want.push_back(i);
  i = make(Opcode::kVpuLi);
  i.vd = 2;
  i.imm = 1;
  i.step = -3;
  want.push_back(i);
  i = make(Opcode::kWait);
  i.unit = isa::Unit::kVpu;
  i.sc = 2;
  i.value = 7;
  i.step = 1;
  want.push_back(i);
  ASSERT_EQ(r.instructions.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(r.instructions[k], want[k]) << "line " << k + 1;
  }
  // Words and bytes: little-endian, w0 first.
  const auto words = r.words();
  const auto bytes = r.bytes();
  ASSERT_EQ(words.size(), 4 * want.size());
  ASSERT_EQ(bytes.size(), 16 * want.size());
  EXPECT_EQ(words[4 * 3 + 0], isa::OP_IRQ);
  EXPECT_EQ(words[4 * 3 + 1], 7u);
  EXPECT_EQ(bytes[16 * 3 + 4], 7u);
}

TEST(Assembler, EveryFunctNameAssembles) {
  for (uint32_t f = 0; f < isa::VF_COUNT; ++f) {
    const auto fn = static_cast<isa::Funct>(f);
    const isa::FunctOperands u = isa::funct_operands(fn);
    std::string line = std::string("vpu.op ") + isa::funct_name(fn) + ", v1, " +
                       (u.va ? "v2" : "v0") + ", " + (u.vb ? "v3" : "v0") + ", " +
                       (u.vc ? "v4" : "v0") + (u.imm ? ", 5" : "");
    const auto r = assembler::assemble(line);
    ASSERT_TRUE(r.ok()) << line << ": " << r.errors[0].reason;
    EXPECT_EQ(r.instructions[0].funct, fn);
    EXPECT_EQ(assembler::disassemble(r.instructions[0]), line);
  }
}

TEST(Assembler, CaseCommentsBlankLinesAndNumbers) {
  const std::string text =
      "# a program\n"
      "\n"
      "   DMA.Copy  HBM , Ub,2,0X10,  16   # comment, with commas\n"
      "\tWAIT Dma,SC3,0x0\n"
      "mxu.mm SET, 0xFfE0, 0xFFFFFFE0, 1, 0   #\n"
      "Vpu.Op MAX, V2, V1, V0, V0\n"
      "dma.loop src, 0, 1, -2147483648, 1, 2147483647\n"
      "vpu.li v0, 0x80000000\n"
      "vpu.li v0, -2147483648\n"
      "irq 4294967295\n";
  const auto r = assembler::assemble(text);
  ASSERT_TRUE(r.ok()) << assembler::format_error("t.s", r.errors[0]);
  ASSERT_EQ(r.instructions.size(), 8u);
  EXPECT_EQ(r.instructions[0].src, 0x10u);
  EXPECT_EQ(r.instructions[0].dst, 16u);
  EXPECT_EQ(r.instructions[0].dst_space, isa::Space::kUb);
  EXPECT_EQ(r.instructions[1].sc, 3);
  EXPECT_EQ(r.instructions[2].addr, 0xFFE0u);
  EXPECT_EQ(r.instructions[2].stride, -32);  // a signed field written as its 32-bit pattern
  EXPECT_EQ(r.instructions[3].funct, isa::Funct::kMax);
  EXPECT_EQ(r.instructions[4].s0, INT32_MIN);
  EXPECT_EQ(r.instructions[4].s1, INT32_MAX);
  EXPECT_EQ(r.instructions[5].imm, 0x80000000u);
  EXPECT_EQ(r.instructions[6].imm, 0x80000000u);
  EXPECT_EQ(r.instructions[7].code, 0xFFFFFFFFu);
  EXPECT_EQ(assembler::detail::parse_integer("-0x10"), -16);
  EXPECT_EQ(assembler::detail::parse_integer("0x"), std::nullopt);
  EXPECT_EQ(assembler::detail::parse_integer("12a"), std::nullopt);
  EXPECT_EQ(assembler::detail::parse_integer("99999999999999999999"), std::nullopt);
}

TEST(Assembler, TheDocumentationExampleAssembles) {
  const std::string text = R"(
dma.loop   src, 0, 28, 2, 26, 56      # loops 0 and 1 of the source walk
dma.copy   hbm, ub, 2, 0x10000, 0x0
signal     dma, sc0
wait       mxu, sc0, 1
mxu.ldw    0x4000, 32
mxu.mm     set, 0x0, 32, 676, 0
signal     mxu, sc1
wait       vpu, sc1, 1
vpu.ld     acc, v1, 0
vpu.op     max, v2, v1, v0, v0       # relu: max(x, 0) with v0 = 0
vpu.st     bf16, v2, 0x8000
halt
)";
  const auto r = assembler::assemble(text);
  ASSERT_TRUE(r.ok()) << assembler::format_error("doc.s", r.errors[0]);
  EXPECT_EQ(r.instructions.size(), 12u);
}

struct ErrorCase {
  std::string line;
  int column;
  const char* reason;
};

TEST(Assembler, ErrorsNameLineAndColumn) {
  const std::vector<ErrorCase> cases = {
      {"vpu.op add, v1, v16, v0, v0", 17, "expected a vector register v0..v15, got 'v16'"},
      {"  frob v1", 3, "unknown mnemonic 'frob'"},
      {"wait gpu, sc0, 1", 6, "expected a unit dma|mxu|vpu, got 'gpu'"},
      {"signal dma, sc16", 13, "expected a sync counter sc0..sc15, got 'sc16'"},
      {"dma.copy hbm, sram, 2, 0, 0", 15, "expected a space hbm|ub, got 'sram'"},
      {"dma.copy hbm, ub, 2, 0x10000", 1, "dma.copy expects 5 or 6 operands"},
      {"dma.copy hbm, ub, 2, 0x0, 0x0, left", 32, "expected a link local|next|prev"},
      {"signal dma, rc1", 13, "needs a link: next|prev"},
      {"signal dma, sc1, next", 13, "counts the neighbour's rcN"},
      {"signal vpu, rc1, prev", 8, "only the dma signals"},
      {"dma.loop src, 0, 0, 2, 1, 0", 18, "count c0 must be in 1..65535, got '0'"},
      {"dma.loop src, 2, 1, 2, 1, 0", 15, "pair must be in 0..1, got '2'"},
      {"mxu.ldw -16, 32", 9, "addr must be in 0..4294967295, got '-16'"},
      {"mxu.mm set, 0x0, 32, 0, 0", 22, "rows must be in 1..65535, got '0'"},
      {"mxu.mm add, 0x0, 32, 1, 0", 8, "expected an acc_mode set|acc, got 'add'"},
      {"mxu.mm set, 0x0, 32, 1, 0, 0", 28, "acc_stride must be in 1..256, got '0'"},
      {"mxu.mm set, 0x0, 32, 1, 0, 257", 28, "acc_stride must be in 1..256, got '257'"},
      {"mxu.ldw 0x0, 32, x", 18, "expected a transpose flag t, got 'x'"},
      {"vpu.ld f16, v1, 0", 8, "expected a kind f32|bf16|acc, got 'f16'"},
      {"vpu.op sqrt, v1, v2, v3, v0", 22, "vpu.op sqrt does not use vb: write v0"},
      {"vpu.op fma, v1, v2, v3, v0", 8, "expected a funct add|sub"},
      {"vpu.op bcast, v1, v2, v0, v0, 16", 31, "bcast lane must be below N = 16, got '16'"},
      {"vpu.op add, v1, v2, v3, v0, 1", 29, "vpu.op add does not use imm"},
      {"halt now", 6, "halt takes 0 operands"},
      {"irq 0x1g", 5, "expected a number (code), got '0x1g'"},
      {"wait dma, sc0,, 1", 15, "empty operand"},
      {"ici.send", 1, "reserved for the multi-chip work"},
      {"vpu.li v1, 0x100000000", 12, "imm must be in"},
  };
  for (const auto& c : cases) {
    const auto r = assembler::assemble("nop\n" + c.line + "\n");
    ASSERT_EQ(r.errors.size(), 1u) << c.line;
    EXPECT_TRUE(r.instructions.empty());
    const auto& e = r.errors[0];
    EXPECT_EQ(e.line, 2) << c.line;
    EXPECT_EQ(e.column, c.column) << c.line << ": " << e.reason;
    EXPECT_NE(e.reason.find(c.reason), std::string::npos) << c.line << ": " << e.reason;
  }
  const auto r = assembler::assemble("nop\n\nvpu.op add, v1, v16, v0, v0\n");
  EXPECT_EQ(assembler::format_error("prog.s", r.errors.at(0)),
            "prog.s:3:17: expected a vector register v0..v15, got 'v16'");
}

TEST(Assembler, CollectsEveryErrorUpToTwentyAndEmitsNothing) {
  std::string text = "nop\nbad1\nhalt\nwait dma, sc0, -1\n";
  auto r = assembler::assemble(text);
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[1].line, 4);
  EXPECT_EQ(r.errors[1].column, 16);
  EXPECT_TRUE(r.instructions.empty());
  EXPECT_TRUE(r.bytes().empty());
  // Several errors on one line are all reported.
  r = assembler::assemble("vpu.op add, v16, v17, v0, v0\n");
  ASSERT_EQ(r.errors.size(), 2u);
  EXPECT_EQ(r.errors[0].column, 13);
  EXPECT_EQ(r.errors[1].column, 18);
  std::string many;
  for (int k = 0; k < 50; ++k) many += "oops\n";
  r = assembler::assemble(many);
  EXPECT_EQ(r.errors.size(), assembler::kMaxAsmErrors);
}

TEST(Assembler, TextBinaryTextBinaryRoundTrip) {
  std::mt19937_64 g(test::test_seed());
  std::vector<Instruction> prog;
  for (int k = 0; k < 3000; ++k) prog.push_back(random_legal(kOpcodes[g() % kOpcodeCount], g));
  for (Opcode op : kOpcodes) prog.push_back(random_legal(op, g));
  std::string text;
  for (const auto& i : prog) text += assembler::disassemble(i) + "\n";
  const auto r1 = assembler::assemble(text);
  ASSERT_TRUE(r1.ok()) << assembler::format_error("rt.s", r1.errors[0]);
  ASSERT_EQ(r1.instructions.size(), prog.size());
  for (size_t k = 0; k < prog.size(); ++k) {
    ASSERT_EQ(r1.instructions[k], prog[k])
        << "line " << k + 1 << ": " << assembler::disassemble(prog[k]);
  }
  const auto d1 = assembler::disassemble(r1.bytes());
  ASSERT_TRUE(d1.ok()) << d1.errors[0];
  EXPECT_EQ(d1.text, text);
  const auto r2 = assembler::assemble(d1.text);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2.bytes(), r1.bytes());
}

TEST(Disassembler, CanonicalFormAndIllegalWords) {
  const auto r = assembler::assemble(
      "DMA.COPY HBM, UB, 2, 65536, 0\nVPU.LD ACC, V1, 0x10\nvpu.li v2, 1065353216\n"
      "mxu.mm acc, 64, -32, 3, 7\nwait vpu, sc1, 0x10\n");
  ASSERT_TRUE(r.ok());
  const auto d = assembler::disassemble(r.bytes());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d.text,
            "dma.copy hbm, ub, 2, 0x10000, 0x0\n"
            "vpu.ld acc, v1, 16\n"
            "vpu.li v2, 0x3f800000\n"
            "mxu.mm acc, 0x40, -32, 3, 7\n"
            "wait vpu, sc1, 16\n");
  std::vector<uint8_t> bytes = r.bytes();
  bytes[16 * 2 + 1] = 0x01;  // vpu.li with a reserved bit in w0
  bytes[16 * 4] = 0x50;      // ICI.SEND
  const auto bad = assembler::disassemble(bytes);
  ASSERT_EQ(bad.errors.size(), 2u);
  EXPECT_TRUE(bad.text.empty());
  EXPECT_NE(bad.errors[0].find("offset 0x20: vpu.li: reserved bits set in w0"), std::string::npos)
      << bad.errors[0];
  EXPECT_NE(bad.errors[1].find("offset 0x40: reserved opcode 0x50"), std::string::npos)
      << bad.errors[1];
  bytes.pop_back();
  EXPECT_FALSE(assembler::disassemble(bytes).ok());
}

std::string temp_path(const std::string& name) {
  return ::testing::TempDir() + "/" + test::current_test_name() + "." + name;
}

TEST(AsmTool, AssemblesAndDisassemblesFiles) {
  const std::string src = temp_path("s"), bin = temp_path("bin");
  {
    std::ofstream f(src);
    f << "vpu.li v1, 0x3f800000\nsignal vpu, sc0\nwait vpu, sc0, 1\nhalt\n";
  }
  std::ostringstream out, err;
  ASSERT_EQ(tools::run_asm(src, bin, {}, err), 0) << err.str();
  std::ifstream b(bin, std::ios::binary | std::ios::ate);
  EXPECT_EQ(static_cast<int>(b.tellg()), 64);
  ASSERT_EQ(tools::run_disasm(bin, {}, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "vpu.li v1, 0x3f800000\nsignal vpu, sc0\nwait vpu, sc0, 1\nhalt\n");
}

TEST(AsmTool, ReportsErrorsAsFileLineColumnAndExitsTwo) {
  const std::string src = temp_path("s"), bin = temp_path("bin");
  {
    std::ofstream f(src);
    f << "nop\n  vpu.ld f32, v1, 0x10000000000\nhalt\nsignal cpu, sc0\n";
  }
  std::remove(bin.c_str());
  std::ostringstream err;
  EXPECT_EQ(tools::run_asm(src, bin, {}, err), 2);
  EXPECT_EQ(err.str(), src + ":2:19: addr must be in 0..4294967295, got '0x10000000000'\n" + src +
                           ":4:8: expected a unit dma|mxu|vpu, got 'cpu'\n");
  EXPECT_FALSE(std::ifstream(bin).good()) << "nothing is written when there are errors";
  std::ostringstream out, err2;
  EXPECT_EQ(tools::run_asm(src + ".missing", bin, {}, err2), 2);
  EXPECT_EQ(tools::run_disasm(src + ".missing", {}, out, err2), 2);
  {
    std::ofstream f(bin, std::ios::binary);
    f << std::string(16, '\xEE');
  }
  std::ostringstream err3;
  EXPECT_EQ(tools::run_disasm(bin, {}, out, err3), 2);
  EXPECT_NE(err3.str().find(bin + ": offset 0x0: unknown opcode 0xee"), std::string::npos)
      << err3.str();
}

}  // namespace
}  // namespace tessera
