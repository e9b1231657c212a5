// fpu-check's vector files (TestFloat style) and their parser, apart from the RTL runner
// (sw/tools/fpu_check.h) so that the parser builds without the verilated arithmetic (the fuzz
// targets, fuzz/). One case a line, hex words separated by blanks: the operand(s), the expected
// result, then optional flags (ignored). '#' starts a comment; blank lines are skipped.
#pragma once

#include <cctype>
#include <cstdint>
#include <istream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace tessera::tools {

enum class FpuOp { kAdd, kBf16Mul, kFp32ToBf16, kBf16ToFp32, kMul, kDiv, kSqrt };

std::optional<FpuOp> parse_fpu_op(const std::string& name);
const char* fpu_op_name(FpuOp op);

struct FpuCase {
  int line = 0;
  uint32_t a = 0, b = 0;  // b unused by one-operand ops
  uint32_t expected = 0;
};

struct FpuParseResult {
  std::vector<FpuCase> cases;
  std::vector<std::string> errors;  // "line N: reason"
};

namespace fpu_vectors_detail {

inline int operand_count(FpuOp op) {
  return (op == FpuOp::kAdd || op == FpuOp::kBf16Mul || op == FpuOp::kMul || op == FpuOp::kDiv) ? 2
                                                                                                : 1;
}
inline int operand_bits(FpuOp op) {
  return (op == FpuOp::kBf16Mul || op == FpuOp::kBf16ToFp32) ? 16 : 32;
}
inline int result_bits(FpuOp op) { return op == FpuOp::kFp32ToBf16 ? 16 : 32; }

// Parses one hex word of at most `bits` bits; returns false with a reason otherwise.
inline bool parse_hex(const std::string& tok, int bits, uint32_t& value, std::string& why) {
  std::string t = tok;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t = t.substr(2);
  if (t.empty() || t.size() > static_cast<size_t>(bits / 4)) {
    why = "'" + tok + "' is not a " + std::to_string(bits) + "-bit hex word";
    return false;
  }
  for (char c : t) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) {
      why = "'" + tok + "' is not hexadecimal";
      return false;
    }
  }
  value = static_cast<uint32_t>(std::stoul(t, nullptr, 16));
  return true;
}

}  // namespace fpu_vectors_detail

// Every case of the file for `op`; a malformed line is an error naming it and is not a case.
inline FpuParseResult parse_fpu_vectors(std::istream& in, FpuOp op) {
  using fpu_vectors_detail::operand_bits;
  using fpu_vectors_detail::operand_count;
  using fpu_vectors_detail::parse_hex;
  using fpu_vectors_detail::result_bits;
  FpuParseResult res;
  const int nops = operand_count(op);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
    std::istringstream words(line);
    std::vector<std::string> toks;
    for (std::string w; words >> w;) toks.push_back(w);
    if (toks.empty()) continue;
    const size_t want = static_cast<size_t>(nops) + 1;
    if (toks.size() < want || toks.size() > want + 1) {
      res.errors.push_back("line " + std::to_string(lineno) + ": expected " + std::to_string(nops) +
                           " operand(s), a result and optional flags, got " +
                           std::to_string(toks.size()) + " words");
      continue;
    }
    FpuCase c;
    c.line = lineno;
    std::string why;
    uint32_t flags = 0;
    bool ok = parse_hex(toks[0], operand_bits(op), c.a, why);
    if (ok && nops == 2) ok = parse_hex(toks[1], operand_bits(op), c.b, why);
    if (ok) ok = parse_hex(toks[nops], result_bits(op), c.expected, why);
    if (ok && toks.size() == want + 1) ok = parse_hex(toks[want], 32, flags, why);
    if (!ok) {
      res.errors.push_back("line " + std::to_string(lineno) + ": " + why);
      continue;
    }
    res.cases.push_back(c);
  }
  return res;
}

}  // namespace tessera::tools
