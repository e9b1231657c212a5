// N functional chips in a ring (tessera/functional_ring.h).
#include "tessera/functional_ring.h"

#include <stdexcept>

namespace tessera::functional {

std::string RingResult::describe() const {
  std::string s;
  for (size_t r = 0; r < chips.size(); ++r) {
    s += "chip " + std::to_string(r) + ": " + chips[r].describe() + "\n";
  }
  if (deadlock) s += "deadlock: the blocked chips wait on remote counters no chip can signal\n";
  return s;
}

bool RingResult::all_halted() const {
  for (const RunResult& c : chips) {
    if (c.status != RunStatus::kHalted) return false;
  }
  return !deadlock;
}

FunctionalRing::FunctionalRing(int chips, const ChipConfig& config) {
  if (chips < 1) throw std::invalid_argument("FunctionalRing: chips must be at least 1");
  for (int r = 0; r < chips; ++r) chips_.push_back(std::make_unique<FunctionalModel>(config));
  if (chips == 1) return;
  for (int r = 0; r < chips; ++r) {
    chips_[r]->connect(isa::Link::kNext, chips_[(r + 1) % chips].get());
    chips_[r]->connect(isa::Link::kPrev, chips_[(r + chips - 1) % chips].get());
  }
}

RingResult FunctionalRing::run(const std::vector<uint64_t>& prog_addrs, uint64_t max_instructions) {
  const int n = size();
  if (prog_addrs.size() != 1 && prog_addrs.size() != static_cast<size_t>(n)) {
    throw std::invalid_argument("FunctionalRing::run: one program address, or one per chip");
  }
  for (int r = 0; r < n; ++r) chips_[r]->start(prog_addrs[prog_addrs.size() == 1 ? 0 : r]);
  std::vector<bool> ended(n, false);
  RingResult out;
  for (;;) {
    bool progress = false, all_ended = true;
    for (int r = 0; r < n; ++r) {
      if (ended[r]) continue;
      FunctionalModel& c = *chips_[r];
      for (;;) {
        if (c.result().instructions >= max_instructions) {
          out.chips.clear();
          for (auto& m : chips_) out.chips.push_back(m->result());
          out.chips[r].status = RunStatus::kWatchdog;
          out.chips[r].stop_pc = c.pc();
          return out;
        }
        const FunctionalModel::Step s = c.step();
        if (s == FunctionalModel::Step::kEnded) {
          ended[r] = true;
          progress = true;
          break;
        }
        if (s == FunctionalModel::Step::kBlocked) break;
        progress = true;
      }
      all_ended = all_ended && ended[r];
    }
    if (all_ended) break;
    if (!progress) {
      out.deadlock = true;
      break;
    }
  }
  for (auto& m : chips_) out.chips.push_back(m->result());
  return out;
}

}  // namespace tessera::functional
