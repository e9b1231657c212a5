// fuzz_fpu_vectors: fpu-check's vector file parser (sw/tools/fpu_vectors.h, parse_fpu_vectors:
// what `tessera fpu-check` reads before it runs a case) on arbitrary text, for every FpuOp.
// Only the parser: the verilated arithmetic is not linked.
// Properties: every case is on a line of the text, in line order, its operands and expected
// result within the operation's widths (16 bits for bf16, 32 for fp32); every error names a line
// ("line N: reason") of the text. Any exception or sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz/fuzz_check.h"
#include "sw/tools/fpu_vectors.h"

namespace tt = tessera::tools;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  for (tt::FpuOp op :
       {tt::FpuOp::kAdd, tt::FpuOp::kBf16Mul, tt::FpuOp::kFp32ToBf16, tt::FpuOp::kBf16ToFp32,
        tt::FpuOp::kMul, tt::FpuOp::kDiv, tt::FpuOp::kSqrt}) {
    std::istringstream in(text);
    const tt::FpuParseResult r = tt::parse_fpu_vectors(in, op);
    const uint64_t operand_max = (1ull << tt::fpu_vectors_detail::operand_bits(op)) - 1;
    const uint64_t result_max = (1ull << tt::fpu_vectors_detail::result_bits(op)) - 1;
    const bool two = tt::fpu_vectors_detail::operand_count(op) == 2;
    int prev = 0;
    for (const tt::FpuCase& c : r.cases) {
      const std::string where = "line " + std::to_string(c.line);
      FUZZ_CHECK(c.line > prev && c.line <= lines, where);
      FUZZ_CHECK(c.a <= operand_max && c.b <= (two ? operand_max : 0), where);
      FUZZ_CHECK(c.expected <= result_max, where);
      prev = c.line;
    }
    for (const std::string& e : r.errors) {
      FUZZ_CHECK(starts_with(e, "line "), e);
      const int line = std::atoi(e.c_str() + 5);
      FUZZ_CHECK(line >= 1 && line <= lines, e);
    }
  }
  return 0;
}
