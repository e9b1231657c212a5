// HBM2 device model: what the controller's pins reach in simulation. One HbmChannelModel per
// pseudo-channel is stepped once per core cycle with the pins the controller drives (a command,
// a beat of write data) and answers with the read-data pins. Every command goes through the
// HbmTimingChecker first (a violation throws with the cycle, the rule and both commands); write
// data is taken exactly CWL cycles after its WR and read data returned exactly CL cycles after
// its RD, one 16-byte beat per cycle (BL4 on the 64-bit bus: a 32-byte burst in 2 cycles).
// Missing or unexpected write data, a read and a write beat on the data bus in the same cycle,
// and rows or columns out of range are protocol errors (HbmProtocolError: cycle and reason).
// Storage is sparse (written bursts only), so a 16-pseudo-channel device spans 4 GiB.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "harness/hbm/hbm_burst.h"
#include "harness/hbm/hbm_timing.h"
#include "harness/hbm/hbm_timing_checker.h"

namespace tessera::hbm {


class HbmProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HbmPinsIn {
  bool cmd_valid = false;
  HbmCmd cmd = HbmCmd::kPre;
  int bg = 0, bank = 0;
  uint32_t row = 0, col = 0;
  bool wdata_valid = false;  // a beat of write data this cycle
  Beat wdata{};
  uint16_t wstrb = 0xFFFF;  // byte k of the beat is written when bit k is set (DM = ~wstrb)
};

struct HbmPinsOut {
  bool rdata_valid = false;  // a beat of read data this cycle
  Beat rdata{};
};

class HbmChannelModel {
 public:
  // rows_per_bank: 16384 makes a pseudo-channel 256 MiB (16 banks x 16 Ki rows x 1 KiB).
  explicit HbmChannelModel(const HbmTiming& timing = HbmTiming{}, int pc = 0,
                           uint32_t rows_per_bank = 16384);

  // One cycle; cycles must increase by one from call to call (the first may be any value).
  HbmPinsOut step(uint64_t cycle, const HbmPinsIn& in);
  // End of simulation at `cycle`: pending data and the refresh interval are checked.
  void finish(uint64_t cycle);
  void set_trace(std::ostream* trace) { checker_.set_trace(trace); }

  // Backdoor access (loading and checking memory without simulated time).
  void poke(int bg, int bank, uint32_t row, uint32_t col, const Burst& data);
  Burst peek(int bg, int bank, uint32_t row, uint32_t col) const;

  uint64_t capacity_bytes() const;
  size_t stored_bursts() const { return storage_.size(); }
  uint64_t reads_of_unwritten() const { return reads_of_unwritten_; }  // returned as zeros
  uint64_t bursts_read() const { return bursts_read_; }
  uint64_t bursts_written() const { return bursts_written_; }
  const HbmTimingChecker& checker() const { return checker_; }

 private:
  struct Transfer {  // a data-bus beat due at `cycle`
    uint64_t cycle;
    uint64_t key;
    int beat;
  };
  uint64_t key(int bg, int bank, uint32_t row, uint32_t col, uint64_t cycle) const;
  [[noreturn]] void fail(uint64_t cycle, const std::string& why) const;

  HbmTiming timing_;
  int pc_;
  uint32_t rows_per_bank_;
  HbmTimingChecker checker_;
  std::unordered_map<uint64_t, Burst> storage_;
  std::deque<Transfer> reads_, writes_;  // in due order (RD and WR each issue in order)
  std::array<uint32_t, 64> open_row_{};  // per bank, valid while the checker says it is open
  bool started_ = false;
  uint64_t last_cycle_ = 0;
  uint64_t reads_of_unwritten_ = 0, bursts_read_ = 0, bursts_written_ = 0;
};

// A whole device: `pcs` pseudo-channels side by side (16 for 4 GiB at 256 MiB each).
class HbmDevice {
 public:
  HbmDevice(int pcs, const HbmTiming& timing = HbmTiming{}, uint32_t rows_per_bank = 16384);
  HbmChannelModel& channel(int pc) { return channels_.at(static_cast<size_t>(pc)); }
  int pcs() const { return static_cast<int>(channels_.size()); }
  uint64_t capacity_bytes() const;

 private:
  std::vector<HbmChannelModel> channels_;
};

}  // namespace tessera::hbm
