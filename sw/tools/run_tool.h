// tessera run: assemble (a .s/.asm file) or take a binary program, load it and data files into
// a device's HBM, run it to HALT on the rtl or functional backend, dump memory regions to files
// and print the performance counters. Exit status: 0 halted; 1 a chip fault (cause, PC, address,
// cycle on stderr); 3 the watchdog (what each unit was doing); 2 bad input (assembler errors
// with line and column, unreadable files, malformed --load/--dump, unsupported configuration).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

namespace tessera::tools {

struct RunOptions {
  std::string program;  // path: .s / .asm assembled, anything else raw binary
  std::string backend = "functional";
  int array = 4;                    // N: the chip of driver::chip_for_array(N)
  std::vector<std::string> loads;   // "ADDR=FILE"
  std::vector<std::string> dumps;   // "ADDR:BYTES=FILE"
  uint64_t prog_addr = 0x0F000000;  // where the program is loaded in HBM
  uint64_t timeout = 10'000'000;    // cycles (rtl) or instructions (functional)
  std::string waves;                // rtl: dump the chip into this FST file (layout beside it)
  uint64_t waves_from = 0, waves_to = UINT64_MAX;  // the cycles dumped, from the doorbell
};

// After a run that dumped `fst`: writes the chip layout beside it (FILE.gtkw) and says how to
// open it. Returns false (with the reason on err) if the layout could not be written.
bool write_chip_layout(const std::string& fst, std::ostream& out, std::ostream& err);

int run_program(const RunOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
