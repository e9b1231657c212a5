#include "sw/tools/asm_tool.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace tessera::tools {

int run_asm(const std::string& in_path, const std::string& out_path,
            const assembler::AsmOptions& options, std::ostream& err) {
  errno = 0;
  std::ifstream in(in_path, std::ios::binary);
  if (!in) {
    err << in_path << ": cannot read the file: " << std::strerror(errno ? errno : ENOENT) << "\n";
    return 2;
  }
  std::stringstream text;
  text << in.rdbuf();
  const assembler::AsmResult r = assembler::assemble(text.str(), options);
  if (!r.ok()) {
    for (const auto& e : r.errors) err << assembler::format_error(in_path, e) << "\n";
    if (r.errors.size() >= assembler::kMaxAsmErrors) {
      err << in_path << ": too many errors, stopped after " << assembler::kMaxAsmErrors << "\n";
    }
    return 2;
  }
  const std::vector<uint8_t> bytes = r.bytes();
  std::ofstream out(out_path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    err << out_path << ": cannot write the file\n";
    return 2;
  }
  return 0;
}

int run_disasm(const std::string& in_path, const assembler::AsmOptions& options, std::ostream& out,
               std::ostream& err) {
  errno = 0;
  std::ifstream in(in_path, std::ios::binary);
  if (!in) {
    err << in_path << ": cannot read the file: " << std::strerror(errno ? errno : ENOENT) << "\n";
    return 2;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  const assembler::DisasmResult r = assembler::disassemble(bytes, options);
  if (!r.ok()) {
    for (const auto& e : r.errors) err << in_path << ": " << e << "\n";
    return 2;
  }
  out << r.text;
  return 0;
}

}  // namespace tessera::tools
