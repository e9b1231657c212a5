// tessera: the project's command line. Subcommands:
//   fpu-check --op {add|bf16mul|f2bf|bf2f} FILE   replay a TestFloat-style vector file
//                                                  through the arithmetic RTL
#include <CLI/CLI.hpp>
#include <iostream>

#include "sw/tools/fpu_check.h"

int main(int argc, char** argv) {
  CLI::App app{"tessera: a TPU-style training accelerator, simulated cycle by cycle"};
  app.require_subcommand(1);

  std::string op_name, vector_file;
  auto* fpu = app.add_subcommand("fpu-check", "replay an IEEE vector file through the RTL");
  fpu->add_option("--op", op_name, "operation: add, bf16mul, f2bf, bf2f")
      ->required()
      ->check(CLI::IsMember({"add", "bf16mul", "f2bf", "bf2f"}));
  fpu->add_option("file", vector_file, "vector file: operand(s) expected [flags], hex")->required();

  CLI11_PARSE(app, argc, argv);

  if (fpu->parsed()) {
    const auto op = tessera::tools::parse_fpu_op(op_name);
    return tessera::tools::run_fpu_check(*op, vector_file, std::cout, std::cerr);
  }
  return 2;
}
