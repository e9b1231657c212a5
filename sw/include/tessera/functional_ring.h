// N functional chips joined in a ring by their ICI links (docs/isa.md, "Multi-chip"): chip r's
// `next` link goes to chip (r + 1) mod N, its `prev` link to chip (r − 1) mod N (N = 1: both
// links down). run() starts every chip's program at once and interleaves them an instruction
// at a time, a chip running on until it ends or blocks on a remote WAIT. A race-free
// multi-chip program has one result whatever the interleaving: the RTL's, bit for bit.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/functional_model.h"

namespace tessera::functional {

struct RingResult {
  std::vector<RunResult> chips;  // per chip
  bool deadlock = false;         // some chips blocked for ever (every other chip had ended)
  std::string describe() const;  // one line per chip
  bool all_halted() const;
};

class FunctionalRing {
 public:
  FunctionalRing(int chips, const ChipConfig& config = {});
  int size() const { return static_cast<int>(chips_.size()); }
  FunctionalModel& chip(int r) { return *chips_.at(r); }

  // Runs program prog_addrs[r] on chip r (one address for all, or one per chip) until every
  // chip has ended, or the ones left are all blocked (deadlock), or `max_instructions` have
  // run on one chip (that chip's status kWatchdog, and the run stops).
  RingResult run(const std::vector<uint64_t>& prog_addrs, uint64_t max_instructions = 100'000'000);

 private:
  std::vector<std::unique_ptr<FunctionalModel>> chips_;
};

}  // namespace tessera::functional
