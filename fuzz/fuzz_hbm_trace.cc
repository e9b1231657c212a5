// fuzz_hbm_trace: the hbm-replay trace parser (sw/tools/hbm_trace.h, parse_hbm_trace: what
// `tessera hbm-replay` reads before it simulates anything) on arbitrary text, for 1, 2 and 4
// pseudo-channels and 32-, 64- and 512-byte requests. Only the parser: the verilated memory
// system is not linked.
// Properties: every request is on a line of the text, in line order, aligned to the request
// size, within the capacity (channels x 256 MiB), at a cycle no later than the replay limit and
// no earlier than the request before it; every error names a line of the text, in order. Any
// exception or sanitizer report is a finding.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>

#include "fuzz/fuzz_check.h"
#include "sw/tools/hbm_trace.h"
#include "tessera/chip_params.h"

namespace tt = tessera::tools;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const int lines = 1 + static_cast<int>(std::count(text.begin(), text.end(), '\n'));
  const struct { int channels, request_bytes; } kShapes[] = {{1, 32}, {2, 64}, {4, 512}};
  for (const auto& s : kShapes) {
    std::istringstream in(text);
    const tt::HbmTraceParseResult r = tt::parse_hbm_trace(in, s.channels, s.request_bytes);
    const uint64_t capacity = tessera::chip_params::HBM_PC_BYTES * s.channels;
    int prev_line = 0;
    uint64_t prev_cycle = 0;
    for (const tt::HbmTraceRequest& q : r.requests) {
      const std::string where = "line " + std::to_string(q.line);
      FUZZ_CHECK(q.line > prev_line && q.line <= lines, where);
      FUZZ_CHECK(q.addr % s.request_bytes == 0, where);
      FUZZ_CHECK(q.addr + s.request_bytes <= capacity, where);
      FUZZ_CHECK(q.cycle >= prev_cycle && q.cycle <= tt::hbm_trace_detail::kMaxTraceCycle, where);
      prev_line = q.line;
      prev_cycle = q.cycle;
    }
    int prev_error = 0;
    for (const tt::HbmTraceError& e : r.errors) {
      FUZZ_CHECK(e.line > prev_error && e.line <= lines && !e.reason.empty(), e.reason);
      prev_error = e.line;
    }
  }
  return 0;
}
