// The Tessera assembler and disassembler (docs/isa.md, "Assembly syntax"). One instruction a
// line, '#' comments, case-insensitive mnemonics and names, decimal or 0x-hex numbers (a leading
// '-' where the field is signed). Errors are values with a 1-based line and column; every error
// of a text is collected (up to kMaxAsmErrors) and no words are produced when there is one.
// The disassembler prints the canonical form (lower case, one space after the mnemonic, ", "
// between operands, hex addresses and bases, every field), and assembling that text gives the
// same words back.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/isa.h"

namespace tessera::assembler {

constexpr size_t kMaxAsmErrors = 20;

struct AsmOptions {
  uint32_t n = isa::kDefaultN;  // array size N: bcast's lane must be below it
};

struct AsmError {
  int line = 0;    // 1-based
  int column = 0;  // 1-based, the first character of the offending token
  std::string reason;
};

struct AsmResult {
  std::vector<isa::Instruction> instructions;  // empty when there are errors
  std::vector<AsmError> errors;
  bool ok() const { return errors.empty(); }
  std::vector<uint32_t> words() const;  // w0..w3 of each instruction in order
  std::vector<uint8_t> bytes() const;   // the words little-endian: the program as it lies in HBM
};

AsmResult assemble(std::string_view text, const AsmOptions& options = {});

// "FILE:LINE:COL: reason"
std::string format_error(const std::string& file, const AsmError& e);

// The canonical text of one instruction (no newline).
std::string disassemble(const isa::Instruction& inst);

struct DisasmResult {
  std::string text;                 // one canonical line per instruction
  std::vector<std::string> errors;  // "offset 0x20: reason"; text is empty when there are any
  bool ok() const { return errors.empty(); }
};

// A program image (little-endian words, a multiple of 16 bytes) to canonical text.
DisasmResult disassemble(const std::vector<uint8_t>& bytes, const AsmOptions& options = {});

}  // namespace tessera::assembler
