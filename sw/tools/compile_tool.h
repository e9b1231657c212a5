// tessera compile: compile a model's (default: the example CNN's) training (or evaluation) step for a chip
// configuration and print the compiler's stages (--dump) and statistics; --asm writes the
// program's assembly. Exit status 0, or 2 for a configuration the chip cannot run.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

namespace tessera::tools {

struct CompileOptions {
  int array = 16;
  uint32_t batch = 128;
  std::string model;  // a model description file (default: the example CNN)
  bool dump = false;
  bool evaluate = false;
  std::string asm_out;
  float label_smoothing = 0;  // the loss's (general-compiler models; tessera train's option)
};

int compile_step(const CompileOptions& opt, std::ostream& out, std::ostream& err);

}  // namespace tessera::tools
