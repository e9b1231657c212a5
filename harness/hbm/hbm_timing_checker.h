// HbmTimingChecker: checks the command stream of ONE HBM2 pseudo-channel against the JEDEC
// timing and state rules, command by command, and throws HbmTimingViolation on the first
// command that breaks any of them. The minimum spacings are one table (spacing_rules()): each
// rule is {name, level, from-command, to-command, minimum as a function of HbmTiming} and is
// checked against the latest earlier from-command at its level (tFAW: the 4th latest ACT). The
// refresh interval (at most 9 x tREFI between two refreshes of a bank — a REF refreshes all, a
// REFSB the one it names — and from cycle 0 to the first) is a maximum and is checked on every
// command and at finish(). State rules: no ACT to an open bank, no RD/WR to a closed bank, no REF
// while a bank is open, no REFSB to an open bank, each bank one REFSB in every set of banks()
// REFSBs (a REF starts a new set), commands in cycle order and at most one per cycle (the
// command bus carries one). A PRE of a closed bank is a no-op: allowed, and it starts no tRP. A
// command that throws is not recorded, so the checker stays usable.
#pragma once

#include <array>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "harness/hbm/hbm_timing.h"

namespace tessera::hbm {

// A protocol violation: what() has one line per broken rule, each naming the rule, the required
// and the actual spacing and both commands in the trace form; rules() lists the rule names.
class HbmTimingViolation : public std::runtime_error {
 public:
  HbmTimingViolation(std::vector<std::string> rules, const std::string& what)
      : std::runtime_error(what), rules_(std::move(rules)) {}
  const std::vector<std::string>& rules() const { return rules_; }

 private:
  std::vector<std::string> rules_;
};

// Where a spacing rule looks for the earlier command.
enum class HbmRuleLevel {
  kBank,             // the same bank
  kBankGroup,        // the same bank group, any bank in it
  kOtherBankGroups,  // any bank of a different bank group (the _S rules)
  kPseudoChannel,    // anywhere in the pseudo-channel (tFAW, tRFC, tRREFD, REF)
};

std::string to_string(HbmRuleLevel level);

// `to` must come at least min_cycles(timing) cycles after the nth latest `from` at `level`.
struct HbmSpacingRule {
  const char* name;
  HbmRuleLevel level;
  HbmCmd from;
  HbmCmd to;
  int (*min_cycles)(const HbmTiming&);
  int nth;  // 1: the latest `from`; tFAW: 4 (a fifth ACT must clear the window of the last four)
};

class HbmTimingChecker {
 public:
  // Throws std::invalid_argument if the timing cannot describe a device.
  explicit HbmTimingChecker(const HbmTiming& timing = HbmTiming{}, int pc = 0);

  // Checks `cmd` against every rule, then records it; throws HbmTimingViolation (and records
  // nothing) if it breaks any. With a trace sink set, the command is traced first.
  void issue(const HbmCommand& cmd);
  // The end of a run at `cycle` (not before the last command): checks the refresh interval.
  void finish(uint64_t cycle);
  // One line per issued command in the trace form; nullptr turns tracing off.
  void set_trace(std::ostream* trace) { trace_ = trace; }

  // The minimum-spacing rules, in the order they are checked.
  static const std::vector<HbmSpacingRule>& spacing_rules();

  const HbmTiming& timing() const { return timing_; }
  int pc() const { return pc_; }
  bool bank_open(int bg, int bank) const { return banks_.at(bank_index(bg, bank)).open; }
  uint64_t commands_issued() const { return commands_issued_; }

 private:
  static constexpr int kHistoryDepth = 4;
  // The last kHistoryDepth commands of one type at one place, newest first through nth().
  class History {
   public:
    void push(const HbmCommand& cmd);
    const HbmCommand* nth(int n) const;  // 1 = newest; nullptr if fewer than n
    int size() const { return count_; }

   private:
    std::array<HbmCommand, kHistoryDepth> ring_{};
    int head_ = 0;
    int count_ = 0;
  };
  using ByCmd = std::array<History, kHbmCmdCount>;
  struct BankState {
    bool open = false;
    bool precharged_once = false;
    HbmCommand act;  // the ACT that opened the bank (valid while open)
    HbmCommand pre;  // the last PRE that closed it (valid if precharged_once)
  };
  struct Violation {
    std::string rule;
    std::string text;
  };
  // A bank's last refresh: the REF or REFSB (none: cycle 0), and whether a REFSB of the current
  // set gave it.
  struct Refresh {
    std::optional<HbmCommand> by;
    bool in_set = false;
    uint64_t cycle() const { return by ? by->cycle : 0; }
  };

  int bank_index(int bg, int bank) const { return bg * timing_.banks_per_group + bank; }
  void check_address(const HbmCommand& cmd) const;
  void check_order(const HbmCommand& cmd) const;
  void check_refresh_interval(uint64_t cycle, const HbmCommand* cmd,
                              std::vector<Violation>* out) const;
  void check_state(const HbmCommand& cmd, std::vector<Violation>* out) const;
  void check_spacing(const HbmCommand& cmd, std::vector<Violation>* out) const;
  const HbmCommand* earlier(const HbmSpacingRule& rule, const HbmCommand& cmd) const;
  void record(const HbmCommand& cmd);

  HbmTiming timing_;
  int pc_;
  std::ostream* trace_ = nullptr;
  std::vector<BankState> banks_;
  std::vector<ByCmd> bank_history_;
  std::vector<ByCmd> group_history_;
  ByCmd pc_history_;
  std::vector<Refresh> refreshed_;  // per bank
  size_t oldest_ = 0;               // the bank refreshed longest ago (lowest index among equals)
  int set_size_ = 0;                // REFSBs in the current set
  bool has_last_ = false;
  HbmCommand last_;  // the last command recorded (any type, no-op PREs included)
  uint64_t commands_issued_ = 0;
};

}  // namespace tessera::hbm
