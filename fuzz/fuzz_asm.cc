// fuzz_asm: the assembler (sw/asm/assembler.cc) on arbitrary text.
// Properties: errors are at a line of the text and a column >= 1, at most kMaxAsmErrors, and
// then no instruction is produced; a text that assembles disassembles to the canonical text,
// which assembles to the same bytes and disassembles to itself (docs/isa.md: they round-trip
// exactly). Any exception, a sanitizer report or a hang is a finding.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "tessera/asm.h"

namespace as = tessera::assembler;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  // bcast's lane limit depends on N: the default and the smallest array.
  for (uint32_t n : {tessera::isa::kDefaultN, 4u}) {
    const as::AsmOptions opt{n};
    const as::AsmResult r = as::assemble(text, opt);
    if (!r.ok()) {
      FUZZ_CHECK(r.instructions.empty(), "instructions despite errors");
      FUZZ_CHECK(r.errors.size() <= as::kMaxAsmErrors, std::to_string(r.errors.size()));
      for (const as::AsmError& e : r.errors) {
        FUZZ_CHECK(e.line >= 1 && e.line <= lines && e.column >= 1, as::format_error("in", e));
        FUZZ_CHECK(!e.reason.empty(), as::format_error("in", e));
      }
      continue;
    }
    const std::vector<uint8_t> bytes = r.bytes();
    FUZZ_CHECK(bytes.size() == r.instructions.size() * tessera::isa::kInstructionBytes, "size");
    const as::DisasmResult d = as::disassemble(bytes, opt);
    FUZZ_CHECK(d.ok(), "an assembled program does not disassemble: " + d.errors.at(0));
    FUZZ_CHECK(static_cast<size_t>(std::count(d.text.begin(), d.text.end(), '\n')) ==
                   r.instructions.size(),
               d.text);
    const as::AsmResult r2 = as::assemble(d.text, opt);
    FUZZ_CHECK(r2.ok(), "the canonical text does not assemble: " +
                            as::format_error("canonical", r2.errors.at(0)) + "\n" + d.text);
    FUZZ_CHECK(r2.bytes() == bytes, "the canonical text assembles to other bytes:\n" + d.text);
    FUZZ_CHECK(as::disassemble(r2.bytes(), opt).text == d.text, "canonical text not stable");
  }
  return 0;
}
