// tessera: the project's command line. Subcommands:
//   fpu-check --op {add|bf16mul|mul|div|sqrt|f2bf|bf2f} FILE
//                                                  replay a TestFloat-style vector file
//                                                  through the arithmetic RTL
//   hbm-replay TRACE [--channels N] [--request-bytes B] [--json] [--cmd-trace FILE]
//                                                  replay a memory-request trace through the
//                                                  HBM2 memory system; bandwidth and latency
#include <CLI/CLI.hpp>
#include <iostream>

#include "sw/tools/fpu_check.h"
#include "sw/tools/hbm_replay.h"

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

  CLI11_PARSE(app, argc, argv);

  if (fpu->parsed()) {
    const auto op = tessera::tools::parse_fpu_op(op_name);
    return tessera::tools::run_fpu_check(*op, vector_file, std::cout, std::cerr);
  }
  if (hbm->parsed()) {
    return tessera::tools::run_hbm_replay(trace_file, replay, std::cout, std::cerr);
  }
  return 2;
}
