// Performance views of one rtl training step (docs/performance.md, "Training step"): the
// per-phase cycle breakdown (decode-PC samples mapped to the compiler's phases, unit busy cycles
// and MACs from the counters' deltas), the MXU utilization against each phase's shape bound, a
// roofline plot, and a timeline of the step in the Chrome Trace Event format (open it in
// https://ui.perfetto.dev or chrome://tracing).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/compiler.h"
#include "tessera/driver.h"

namespace tessera::tools {

struct PhaseTiming {
  std::string name;
  uint64_t begin = 0, end = 0;  // cycles after the doorbell (decode entering / leaving)
  std::array<uint64_t, 3> busy{};
  uint64_t macs = 0, hbm_bytes = 0;
  uint64_t hbm_bus = 0, hbm_turns = 0, hbm_refs = 0;  // the HBM pins (driver::TraceSample)
  compiler::Roofline roof;                            // the compiler's unit bounds
};

// Maps the run's samples to the step's phases (`prog_addr`: where the program is loaded;
// `channels`: the chip's HBM pseudo-channels, for the HBM bound).
std::vector<PhaseTiming> phase_timings(const compiler::StepStats& stats, uint64_t prog_addr,
                                       const driver::RunReport& run, int channels);
// The per-phase table (text); `channels`: the chip's HBM pseudo-channels (the data bus's busy
// share is over all of them).
std::string phase_report(const std::vector<PhaseTiming>& phases, int n, int channels);
// Chrome Trace Event JSON: program phases, and per unit its UNIT_STATE intervals (instructions
// queued, busy, held by a WAIT, refused) at the sampling resolution. Cycles are shown as
// nanoseconds (a nominal 1 GHz clock).
void write_chrome_trace(const std::string& path, const std::vector<PhaseTiming>& phases,
                        const driver::RunReport& run);
// Roofline: each phase's MACs per HBM byte against MACs per cycle, under the MXU peak (N^2) and
// the HBM roof (`hbm_bytes_per_cycle`); PNG through gnuplot (throws if gnuplot fails).
void write_roofline(const std::string& png, const std::vector<PhaseTiming>& phases, int n,
                    double hbm_bytes_per_cycle);

}  // namespace tessera::tools
