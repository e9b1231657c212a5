// hbm-replay: replays a memory-request trace through the HBM2 memory system (tpu_hbm on 1, 2 or
// 4 pseudo-channels, every channel on the device model and its timing checker) and reports
// bandwidth, read latency, row-hit rate and refresh time.
//
// Trace format (DRAMSim3's): one request a line, `<hex address> <READ|WRITE> <cycle>`, e.g.
// `0x1f40 READ 120` (the `0x` is optional, the command may be lower case, the cycle is decimal).
// Blank lines and lines whose first non-blank character is '#' are skipped. Cycles never
// decrease; every address is aligned to the request size and below the capacity (channels x
// 256 MiB). The whole file is parsed before anything is simulated: any malformed line stops
// the tool with `TRACE:LINE: reason` on stderr and exit status 2.
//
// A request at address a goes to port (a / request bytes) mod channels (so requests to one
// address keep their order) and is presented no earlier than its cycle, counted from the
// first cycle after reset. Writes carry data made from the address and the line number; every
// read is checked against a scoreboard.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

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

// Parses a trace for a memory of `channels` pseudo-channels (capacity channels x 256 MiB) and
// requests of `request_bytes` bytes (the alignment every address needs).
HbmTraceParseResult parse_hbm_trace(std::istream& in, int channels, int request_bytes);

struct HbmReplayOptions {
  int channels = 1;        // 1, 2 or 4: the built models
  int request_bytes = 32;  // 32 .. 512, a multiple of 32: a request of request_bytes / 32 bursts
  bool json = false;       // one JSON object on `out` instead of the human report
  std::string cmd_trace;   // if set: the device command trace (`cycle cmd pc bg bank row col`)
};

// What a replay measured.
struct HbmReplayReport {
  int channels = 0;
  int request_bytes = 0;
  uint64_t reads = 0, writes = 0, bytes = 0;
  uint64_t cycles = 0;  // first request accepted .. last response, both cycles included
  double bandwidth_gbps = 0, peak_gbps = 0, percent_of_peak = 0;
  bool have_reads = false;
  double avg_read_latency = 0;    // cycles, acceptance to the last burst's data
  uint64_t p99_read_latency = 0;  // nearest rank
  uint64_t acts = 0, column_commands = 0, row_hits = 0;
  double row_hit_rate = 0;      // row_hits / column_commands
  uint64_t refresh_cycles = 0;  // summed over the channels
};

void print_hbm_report(const HbmReplayReport& r, const std::string& trace, bool json,
                      std::ostream& out);

// Parses, runs and reports. Returns the exit status: 0 ran with every read matching and no
// timing violation; 1 a scoreboard mismatch, a timing or protocol violation or a hang; 2 bad
// options, an unreadable file or a malformed trace (nothing simulated).
int run_hbm_replay(const std::string& trace_path, const HbmReplayOptions& opt, std::ostream& out,
                   std::ostream& err);

}  // namespace tessera::tools
