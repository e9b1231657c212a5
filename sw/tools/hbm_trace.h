// The hbm-replay trace format and its parser, apart from the simulation (sw/tools/hbm_replay.h)
// so that the parser builds without the verilated memory system (the fuzz targets, fuzz/).
//
// Trace format (DRAMSim3's): one request a line, `<hex address> <READ|WRITE> <cycle>`, e.g.
// `0x1f40 READ 120` (the `0x` is optional, the command may be lower case, the cycle is decimal).
// Blank lines and lines whose first non-blank character is '#' are skipped. Cycles never
// decrease; every address is aligned to the request size and below the capacity (channels x
// 256 MiB).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <istream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/chip_params.h"

namespace tessera::tools {

struct HbmTraceRequest {
  int line = 0;       // 1-based line in the trace
  uint64_t addr = 0;  // byte address, aligned to the request size
  bool write = false;
  uint64_t cycle = 0;  // presented no earlier than this cycle after reset
};

struct HbmTraceError {
  int line = 0;
  std::string reason;
};

struct HbmTraceParseResult {
  std::vector<HbmTraceRequest> requests;
  std::vector<HbmTraceError> errors;  // in line order; empty if the trace is well formed
};

namespace hbm_trace_detail {

constexpr uint64_t kChannelBytes = chip_params::HBM_PC_BYTES;  // one pseudo-channel

inline std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// Parses a hex address (optional 0x) of at most 64 bits.
inline bool parse_address(const std::string& tok, uint64_t& value, std::string& why) {
  std::string t = tok;
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) t = t.substr(2);
  const bool hexdigits = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!hexdigits) {
    why = "address '" + tok + "' is not hexadecimal";
    return false;
  }
  const size_t first = t.find_first_not_of('0');
  if (first != std::string::npos && t.size() - first > 16) {
    why = "address '" + tok + "' does not fit in 64 bits";
    return false;
  }
  value = first == std::string::npos ? 0 : std::stoull(t.substr(first), nullptr, 16);
  return true;
}

// Parses a non-negative decimal cycle.
// Trace cycles are simulated one by one, idle or not: 10^8 cycles take about half an hour.
constexpr uint64_t kMaxTraceCycle = 100'000'000;

inline bool parse_cycle(const std::string& tok, uint64_t& value, std::string& why) {
  if (!tok.empty() && tok[0] == '-') {
    why = "cycle '" + tok + "' is negative";
    return false;
  }
  const bool digits = !tok.empty() && std::all_of(tok.begin(), tok.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
  if (!digits) {
    why = "cycle '" + tok + "' is not a decimal number";
    return false;
  }
  const size_t first = tok.find_first_not_of('0');
  if (first != std::string::npos && tok.size() - first > 19) {
    why = "cycle '" + tok + "' is too large";
    return false;
  }
  value = first == std::string::npos ? 0 : std::stoull(tok.substr(first));
  if (value > kMaxTraceCycle) {
    why = "cycle " + tok + " is beyond the replay limit of " + std::to_string(kMaxTraceCycle) +
          " cycles (every cycle up to it would be simulated)";
    return false;
  }
  return true;
}

}  // namespace hbm_trace_detail

// Parses a trace for a memory of `channels` pseudo-channels (capacity channels x 256 MiB) and
// requests of `request_bytes` bytes (the alignment every address needs).
inline HbmTraceParseResult parse_hbm_trace(std::istream& in, int channels, int request_bytes) {
  using hbm_trace_detail::hex;
  using hbm_trace_detail::kChannelBytes;
  using hbm_trace_detail::parse_address;
  using hbm_trace_detail::parse_cycle;
  HbmTraceParseResult res;
  const uint64_t capacity = kChannelBytes * static_cast<uint64_t>(channels);
  std::string text;
  int lineno = 0;
  uint64_t prev_cycle = 0;
  int prev_line = 0;
  while (std::getline(in, text)) {
    ++lineno;
    std::istringstream words(text);
    std::vector<std::string> toks;
    for (std::string w; words >> w;) toks.push_back(w);
    if (toks.empty() || toks[0][0] == '#') continue;
    auto fail = [&](const std::string& why) { res.errors.push_back({lineno, why}); };
    if (toks.size() != 3) {
      fail("expected 3 fields '<hex address> <READ|WRITE> <cycle>', got " +
           std::to_string(toks.size()));
      continue;
    }
    HbmTraceRequest r;
    r.line = lineno;
    std::string why;
    if (!parse_address(toks[0], r.addr, why)) {
      fail(why);
      continue;
    }
    std::string cmd = toks[1];
    for (char& c : cmd) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (cmd != "READ" && cmd != "WRITE") {
      fail("unknown command '" + toks[1] + "' (expected READ or WRITE)");
      continue;
    }
    r.write = cmd == "WRITE";
    if (!parse_cycle(toks[2], r.cycle, why)) {
      fail(why);
      continue;
    }
    if (r.addr % static_cast<uint64_t>(request_bytes) != 0) {
      fail("address " + hex(r.addr) + " is not aligned to the request size (" +
           std::to_string(request_bytes) + " bytes)");
      continue;
    }
    if (r.addr >= capacity || capacity - r.addr < static_cast<uint64_t>(request_bytes)) {
      fail("address " + hex(r.addr) + " is beyond the memory's capacity (" + hex(capacity) +
           " bytes on " + std::to_string(channels) + " pseudo-channel(s))");
      continue;
    }
    if (prev_line != 0 && r.cycle < prev_cycle) {
      fail("cycle " + std::to_string(r.cycle) + " is before cycle " + std::to_string(prev_cycle) +
           " of line " + std::to_string(prev_line) + " (cycles must not decrease)");
      continue;
    }
    prev_cycle = r.cycle;
    prev_line = lineno;
    res.requests.push_back(r);
  }
  return res;
}

}  // namespace tessera::tools
