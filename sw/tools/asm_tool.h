// tessera asm / tessera disasm: thin file wrappers over the assembler (sw/include/tessera/asm.h).
#pragma once

#include <iosfwd>
#include <string>

#include "tessera/asm.h"

namespace tessera::tools {

// Assembles `in_path` into the binary program image `out_path` (little-endian words).
// Returns 0 on success, 2 when the file cannot be read or written or has errors (each printed
// to `err` as FILE:LINE:COL: reason; nothing is written then).
int run_asm(const std::string& in_path, const std::string& out_path,
            const assembler::AsmOptions& options, std::ostream& err);

// Prints the canonical text of the program image `in_path` to `out`. Returns 0 on success, 2
// when the file cannot be read or holds an illegal instruction (FILE: offset 0x..: reason).
int run_disasm(const std::string& in_path, const assembler::AsmOptions& options, std::ostream& out,
               std::ostream& err);

}  // namespace tessera::tools
