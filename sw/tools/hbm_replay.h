// hbm-replay: replays a memory-request trace through the HBM2 memory system (tpu_hbm on 1, 2 or
// 4 pseudo-channels, every channel on the device model and its timing checker) and reports
// bandwidth, read latency, row-hit rate and refresh time.
//
// Trace format: sw/tools/hbm_trace.h (`<hex address> <READ|WRITE> <cycle>` lines, DRAMSim3's),
// which also holds the parser. The whole file is parsed before anything is simulated: any
// malformed line stops the tool with `TRACE:LINE: reason` on stderr and exit status 2.
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

#include "sw/tools/hbm_trace.h"

namespace tessera::tools {

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
  uint64_t unused_acts = 0;     // rows opened and closed with no column command (HbmChannelStats)
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
