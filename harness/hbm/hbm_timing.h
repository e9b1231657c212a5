// HBM2 timing parameters of one pseudo-channel and the command record that the device model, the
// timing checker and the command trace share. All values are in core-clock cycles (the core
// clock is the HBM command clock, tCK = 1 ns); the defaults are the design brief's baseline:
// pseudo-channel mode at 2000 Mb/s, 64-bit pseudo-channel, BL4 = 32 B in 2 cycles, 4 bank groups
// x 4 banks, 1 KiB rows. A command prints in the common trace form `cycle cmd pc bg bank row col`
// with `-` for the fields it does not carry: `120 ACT 0 1 2 0x1a3 -`, `134 RD 0 1 2 - 0x1f`.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "tessera/chip_params.h"

namespace tessera::hbm {

namespace P = ::tessera::chip_params;

struct HbmTiming {
  // Organization (rtl/pkg/tpu_pkg.sv through chip_params.h, as every value here).
  int bank_groups = P::HBM_BANK_GROUPS;
  int banks_per_group = P::HBM_BANKS_PER_GROUP;
  int row_bytes = P::HBM_ROW_BYTES;          // one row of one bank
  int pc_width_bits = P::HBM_PC_WIDTH_BITS;  // data bus of one pseudo-channel
  int burst_length = P::HBM_BURST_LENGTH;    // BL4
  int burst_cycles = P::HBM_BURST_CYCLES;    // cycles one burst occupies the data bus
  // Latencies and minimum spacings.
  int cl = P::HBM_CL;          // RD to first read data
  int cwl = P::HBM_CWL;        // WR to first write data
  int trcd = P::HBM_TRCD;      // ACT to RD/WR, same bank
  int trp = P::HBM_TRP;        // PRE to ACT, same bank
  int tras = P::HBM_TRAS;      // ACT to PRE, same bank
  int trc = P::HBM_TRC;        // ACT to ACT, same bank
  int twr = P::HBM_TWR;        // end of write data to PRE, same bank
  int trtp = P::HBM_TRTP;      // RD to PRE, same bank
  int tccd_s = P::HBM_TCCD_S;  // RD to RD / WR to WR, different bank groups
  int tccd_l = P::HBM_TCCD_L;  // RD to RD / WR to WR, same bank group
  int trrd_s = P::HBM_TRRD_S;  // ACT to ACT, different bank groups
  int trrd_l = P::HBM_TRRD_L;  // ACT to ACT, same bank group
  int tfaw = P::HBM_TFAW;      // window that holds at most four ACTs
  int twtr_s = P::HBM_TWTR_S;  // end of write data to RD, different bank groups
  int twtr_l = P::HBM_TWTR_L;  // end of write data to RD, same bank group
  int trefi = P::HBM_TREFI;    // average refresh interval
  int trfc = P::HBM_TRFC;      // REF to ACT or REF
  // Single-bank refresh (REFSB, JESD235 HBM2; values of Ramulator 2's HBM2_2Gbps preset): the
  // bank refreshed is busy tRFCSB, the others keep serving; a pseudo-channel takes banks()
  // REFSBs in the time of one REF, each bank once in every set of banks() REFSBs.
  int trfcsb = P::HBM_TRFCSB;  // REFSB to ACT or REFSB, same bank; REFSB to REF
  int trrefd = P::HBM_TRREFD;  // REFSB to REFSB or ACT, any bank
  // JEDEC lets a controller postpone at most 8 REFs: two REFs (and cycle 0 and the first REF)
  // are never more than (max_postponed_refs + 1) x tREFI apart.
  int max_postponed_refs = 8;

  // The tests' distinct set (tpu_pkg's HBM_ALT_*; the Vtpu_hbm_ctrl_alt build): every value
  // unlike the baseline's and each other's, tRC > tRAS + tRP, tFAW > 4 x tRRD_S, a short tREFI.
  static HbmTiming alternate() {
    HbmTiming t;
    t.cl = P::HBM_ALT_CL;
    t.cwl = P::HBM_ALT_CWL;
    t.trcd = P::HBM_ALT_TRCD;
    t.trp = P::HBM_ALT_TRP;
    t.tras = P::HBM_ALT_TRAS;
    t.trc = P::HBM_ALT_TRC;
    t.twr = P::HBM_ALT_TWR;
    t.trtp = P::HBM_ALT_TRTP;
    t.tccd_s = P::HBM_ALT_TCCD_S;
    t.tccd_l = P::HBM_ALT_TCCD_L;
    t.trrd_s = P::HBM_ALT_TRRD_S;
    t.trrd_l = P::HBM_ALT_TRRD_L;
    t.tfaw = P::HBM_ALT_TFAW;
    t.twtr_s = P::HBM_ALT_TWTR_S;
    t.twtr_l = P::HBM_ALT_TWTR_L;
    t.trefi = P::HBM_ALT_TREFI;
    t.trfc = P::HBM_ALT_TRFC;
    t.trfcsb = P::HBM_ALT_TRFCSB;
    t.trrefd = P::HBM_ALT_TRREFD;
    return t;
  }

  int banks() const { return bank_groups * banks_per_group; }
  int burst_bytes() const { return pc_width_bits / 8 * burst_length; }
  int columns_per_row() const { return row_bytes / burst_bytes(); }
  // Cycles from a WR to the end of its data on the bus (where tWR and tWTR start).
  int write_data_end() const { return cwl + burst_cycles; }
  // The longest legal gap between two refreshes of a bank (REF, or REFSB of that bank): 9 x tREFI.
  uint64_t max_refresh_gap() const {
    return static_cast<uint64_t>(max_postponed_refs + 1) * static_cast<uint64_t>(trefi);
  }

  // Throws std::invalid_argument naming the first field that cannot describe a device.
  void validate() const {
    auto at_least = [](const char* name, int value, int min) {
      if (value < min) {
        throw std::invalid_argument(std::string("HbmTiming: ") + name + " = " +
                                    std::to_string(value) + ", needs at least " +
                                    std::to_string(min));
      }
    };
    at_least("bank_groups", bank_groups, 1);
    at_least("banks_per_group", banks_per_group, 1);
    at_least("pc_width_bits", pc_width_bits, 8);
    at_least("burst_length", burst_length, 1);
    at_least("burst_cycles", burst_cycles, 1);
    at_least("row_bytes", row_bytes, burst_bytes());
    if (row_bytes % burst_bytes() != 0) {
      throw std::invalid_argument("HbmTiming: row_bytes = " + std::to_string(row_bytes) +
                                  " is not a whole number of bursts of " +
                                  std::to_string(burst_bytes()) + " B");
    }
    at_least("cl", cl, 0);
    at_least("cwl", cwl, 0);
    at_least("trcd", trcd, 0);
    at_least("trp", trp, 0);
    at_least("tras", tras, 0);
    at_least("trc", trc, 0);
    at_least("twr", twr, 0);
    at_least("trtp", trtp, 0);
    at_least("tccd_s", tccd_s, 0);
    at_least("tccd_l", tccd_l, 0);
    at_least("trrd_s", trrd_s, 0);
    at_least("trrd_l", trrd_l, 0);
    at_least("tfaw", tfaw, 0);
    at_least("twtr_s", twtr_s, 0);
    at_least("twtr_l", twtr_l, 0);
    at_least("trefi", trefi, 1);
    at_least("trfc", trfc, 0);
    at_least("trfcsb", trfcsb, 0);
    at_least("trrefd", trrefd, 0);
    at_least("max_postponed_refs", max_postponed_refs, 0);
  }
};

// kRef refreshes every bank (all closed); kRefSb one closed bank, named by bg and bank.
enum class HbmCmd { kAct, kRd, kWr, kPre, kRef, kRefSb };
constexpr int kHbmCmdCount = 6;

// One command on a pseudo-channel's command bus. Fields a command does not carry (row of RD,
// WR, PRE and REFSB; col of ACT, PRE and REFSB; bg, bank, row and col of the all-bank REF) are
// ignored.
struct HbmCommand {
  uint64_t cycle = 0;
  HbmCmd cmd = HbmCmd::kAct;
  int pc = 0;
  int bg = 0;
  int bank = 0;
  uint32_t row = 0;
  uint32_t col = 0;
};

inline bool has_bank(HbmCmd c) { return c != HbmCmd::kRef; }
inline bool has_row(HbmCmd c) { return c == HbmCmd::kAct; }
inline bool has_col(HbmCmd c) { return c == HbmCmd::kRd || c == HbmCmd::kWr; }

inline std::string to_string(HbmCmd c) {
  switch (c) {
    case HbmCmd::kAct:
      return "ACT";
    case HbmCmd::kRd:
      return "RD";
    case HbmCmd::kWr:
      return "WR";
    case HbmCmd::kPre:
      return "PRE";
    case HbmCmd::kRef:
      return "REF";
    case HbmCmd::kRefSb:
      return "REFSB";
  }
  return "?";
}

inline std::string hbm_hex(uint32_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), kDigits[v & 0xFu]);
    v >>= 4;
  } while (v != 0);
  return "0x" + s;
}

// The trace form `cycle cmd pc bg bank row col`; row and col in hex, `-` where not carried.
inline std::string to_string(const HbmCommand& c) {
  std::string s = std::to_string(c.cycle) + " " + to_string(c.cmd) + " " + std::to_string(c.pc);
  if (has_bank(c.cmd)) {
    s += " " + std::to_string(c.bg) + " " + std::to_string(c.bank);
  } else {
    s += " - -";
  }
  s += has_row(c.cmd) ? " " + hbm_hex(c.row) : std::string(" -");
  s += has_col(c.cmd) ? " " + hbm_hex(c.col) : std::string(" -");
  return s;
}

}  // namespace tessera::hbm
