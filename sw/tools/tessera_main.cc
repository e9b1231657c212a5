// tessera: the project's command line. Subcommands:
//   fpu-check --op {add|bf16mul|mul|div|sqrt|f2bf|bf2f} FILE
//                                                  replay a TestFloat-style vector file
//                                                  through the arithmetic RTL
//   hbm-replay TRACE [--channels N] [--request-bytes B] [--json] [--cmd-trace FILE]
//                                                  replay a memory-request trace through the
//                                                  HBM2 memory system; bandwidth and latency
//   asm IN.s -o OUT.bin [--n N]                     assemble a program (docs/isa.md syntax)
//   disasm IN.bin [--n N]                           print a program image as canonical text
//   run PROGRAM [--backend rtl|functional] [--load ADDR=FILE ...] [--dump ADDR:BYTES=FILE ...]
//                                                  run a program to HALT; print the counters
#include <CLI/CLI.hpp>
#include <iostream>

#include "sw/tools/asm_tool.h"
#include "sw/tools/fpu_check.h"
#include "sw/tools/hbm_replay.h"
#include "sw/tools/run_tool.h"

int main(int argc, char** argv) {
  CLI::App app{"tessera: a TPU-style training accelerator, simulated cycle by cycle"};
  app.require_subcommand(1);

  std::string op_name, vector_file;
  auto* fpu = app.add_subcommand("fpu-check", "replay an IEEE vector file through the RTL");
  fpu->add_option("--op", op_name, "operation: add, bf16mul, mul, div, sqrt, f2bf, bf2f")
      ->required()
      ->check(CLI::IsMember({"add", "bf16mul", "mul", "div", "sqrt", "f2bf", "bf2f"}));
  fpu->add_option("file", vector_file, "vector file: operand(s) expected [flags], hex")->required();

  std::string trace_file;
  tessera::tools::HbmReplayOptions replay;
  auto* hbm = app.add_subcommand(
      "hbm-replay",
      "replay a memory-request trace (address READ|WRITE cycle) through the HBM2 "
      "memory system: bandwidth, read latency, row hits, refresh");
  hbm->add_option("trace", trace_file,
                  "trace: one request a line, <hex address> <READ|WRITE> "
                  "<cycle>")
      ->required();
  hbm->add_option("--channels", replay.channels, "pseudo-channels (and ports): 1, 2 or 4")
      ->capture_default_str();
  hbm->add_option("--request-bytes", replay.request_bytes,
                  "bytes per request: 32 .. 512, a multiple of 32")
      ->capture_default_str();
  hbm->add_flag("--json", replay.json, "print one JSON object instead of the report");
  hbm->add_option("--cmd-trace", replay.cmd_trace,
                  "write every device command to FILE: cycle cmd pc bg bank row col");

  std::string asm_in, asm_out, disasm_in;
  tessera::assembler::AsmOptions asm_opts;
  auto* as = app.add_subcommand("asm", "assemble a program into its binary image (docs/isa.md)");
  as->add_option("input", asm_in, "assembly text")->required();
  as->add_option("-o,--output", asm_out, "binary program image to write")->required();
  as->add_option("--n", asm_opts.n, "array size N (bcast lanes must be below it)")
      ->capture_default_str();
  auto* dis = app.add_subcommand("disasm", "print a binary program image as canonical assembly");
  dis->add_option("input", disasm_in, "binary program image")->required();
  dis->add_option("--n", asm_opts.n, "array size N")->capture_default_str();

  tessera::tools::RunOptions run_opt;
  auto* run = app.add_subcommand("run", "run a program (.s assembled, else binary) to HALT");
  run->add_option("program", run_opt.program, "program: assembly (.s, .asm) or binary image")
      ->required();
  run->add_option("--backend", run_opt.backend, "rtl (cycle-accurate) or functional")
      ->check(CLI::IsMember({"rtl", "functional"}))
      ->capture_default_str();
  run->add_option("--load", run_opt.loads, "ADDR=FILE: copy FILE into HBM at ADDR first");
  run->add_option("--dump", run_opt.dumps, "ADDR:BYTES=FILE: write HBM to FILE after HALT");
  run->add_option("--prog-addr", run_opt.prog_addr, "HBM address of the program")
      ->capture_default_str();
  run->add_option("--timeout", run_opt.timeout, "watchdog: cycles (rtl) or instructions")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  if (run->parsed()) return tessera::tools::run_program(run_opt, std::cout, std::cerr);

  if (as->parsed()) return tessera::tools::run_asm(asm_in, asm_out, asm_opts, std::cerr);
  if (dis->parsed()) return tessera::tools::run_disasm(disasm_in, asm_opts, std::cout, std::cerr);

  if (fpu->parsed()) {
    const auto op = tessera::tools::parse_fpu_op(op_name);
    return tessera::tools::run_fpu_check(*op, vector_file, std::cout, std::cerr);
  }
  if (hbm->parsed()) {
    return tessera::tools::run_hbm_replay(trace_file, replay, std::cout, std::cerr);
  }
  return 2;
}
