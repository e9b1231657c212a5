// tessera-wave-filter MODE: a GTKWave translate filter process (docs/testing.md, "Waveforms").
// GTKWave writes each value of a filtered trace as one line of hex digits on stdin and shows the
// line this program answers. MODE (the argument, or the program's name tessera-wave-MODE):
//   bf16    16-bit lanes as decimal numbers, lane 0 (the lowest bits) first: "-0.125 | 3 | nan"
//   fp32    32-bit lanes likewise
//   insn    128-bit lanes (w0 in the lowest bits) as the assembler's text of the instruction
//   u32     32-bit lanes as unsigned decimal (counters), lane 0 first
//   hbmcmd  an HBM command pin value (0 idle, else 1 + the controller's cmd_o) by name
// A number is printed with the fewest significant digits that read back to the same value.
// A value with x or z digits is echoed as it came.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "tessera/asm.h"
#include "tessera/isa.h"

namespace {

// IEEE decoding from the fields (not the host's float type: the test compares against that).
double ieee_value(uint32_t bits, int exp_bits, int man_bits) {
  const uint32_t man = bits & ((1u << man_bits) - 1);
  const uint32_t e = (bits >> man_bits) & ((1u << exp_bits) - 1);
  const bool neg = (bits >> (exp_bits + man_bits)) & 1;
  const int bias = (1 << (exp_bits - 1)) - 1;
  double v;
  if (e == (1u << exp_bits) - 1)
    v = man ? NAN : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(man), 1 - bias - man_bits);
  else
    v = std::ldexp(static_cast<double>(man | (1u << man_bits)),
                   static_cast<int>(e) - bias - man_bits);
  return neg ? -v : v;
}

// The value's text: the fewest %g digits whose value rounds back to `v` at the format's
// precision (man_bits + 1 significant bits, round to nearest even).
std::string number(uint32_t bits, int exp_bits, int man_bits) {
  const double v = ieee_value(bits, exp_bits, man_bits);
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0" : "0";
  char buf[48];
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    const double back = std::strtod(buf, nullptr);
    // round `back` to man_bits + 1 significant bits
    int ex;
    const double m = std::frexp(back, &ex);
    const double scaled = std::nearbyint(std::ldexp(m, man_bits + 1));
    if (std::ldexp(scaled, ex - man_bits - 1) == v) break;
  }
  return buf;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The hex text as lanes of `lane_bits` (a multiple of 4), lane 0 from the rightmost digits.
// false if a digit is not hex (x, z).
bool lanes(const std::string& hex, int lane_bits, std::vector<std::vector<uint32_t>>& out) {
  const int digits = lane_bits / 4;
  std::string h = hex;
  while (h.size() % digits) h.insert(h.begin(), '0');
  out.clear();
  for (size_t end = h.size(); end > 0; end -= digits) {
    std::vector<uint32_t> words((lane_bits + 31) / 32, 0);
    for (int d = 0; d < digits; ++d) {  // d: digit from the lane's right end
      const int v = hex_digit(h[end - 1 - d]);
      if (v < 0) return false;
      words[static_cast<size_t>(d / 8)] |= static_cast<uint32_t>(v) << (4 * (d % 8));
    }
    out.push_back(words);
  }
  return true;
}

std::string translate(const std::string& mode, const std::string& hex) {
  std::vector<std::vector<uint32_t>> l;
  std::string out;
  const auto join = [&](const std::string& s) { out += (out.empty() ? "" : " | ") + s; };
  if (mode == "hbmcmd") {
    static const char* kNames[] = {"-", "ACT", "RD", "WR", "PRE", "REF", "REFSB"};
    if (!lanes(hex, 4, l)) return hex;
    const uint32_t v = l[0][0];
    return v < 7 ? kNames[v] : hex;
  }
  const int bits = mode == "bf16" ? 16 : mode == "fp32" || mode == "u32" ? 32 : 128;
  if (!lanes(hex, bits, l)) return hex;
  for (const auto& w : l) {
    if (mode == "bf16") {
      join(number(w[0], 8, 7));
    } else if (mode == "fp32") {
      join(number(w[0], 8, 23));
    } else if (mode == "u32") {
      join(std::to_string(w[0]));
    } else {
      const tessera::isa::Decoded d = tessera::isa::decode({w[0], w[1], w[2], w[3]});
      join(d.ok() ? tessera::assembler::disassemble(d.inst) : "illegal: " + d.reason);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode.empty()) {
    const std::string self = argv[0];
    const size_t at = self.rfind("tessera-wave-");
    if (at != std::string::npos) mode = self.substr(at + 13);
  }
  if (mode != "bf16" && mode != "fp32" && mode != "insn" && mode != "hbmcmd" && mode != "u32") {
    std::cerr
        << "usage: tessera-wave-filter bf16|fp32|u32|insn|hbmcmd (a GTKWave translate filter: "
           "hex values in on stdin, text out)\n";
    return 2;
  }
  std::string line;
  while (std::getline(std::cin, line)) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    std::cout << translate(mode, line) << std::endl;  // GTKWave waits for each answer
  }
  return 0;
}
