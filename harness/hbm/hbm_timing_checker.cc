#include "harness/hbm/hbm_timing_checker.h"

#include <algorithm>
#include <ostream>

namespace tessera::hbm {
namespace {

int cmd_index(HbmCmd c) { return static_cast<int>(c); }

// "(bg 0 bank 1)", or "(all banks)" for REF.
std::string where(const HbmCommand& c) {
  if (!has_bank(c.cmd)) return "(all banks)";
  return "(bg " + std::to_string(c.bg) + " bank " + std::to_string(c.bank) + ")";
}

// "RD at cycle 20 (bg 0 bank 1)"
std::string describe(const HbmCommand& c) {
  return to_string(c.cmd) + " at cycle " + std::to_string(c.cycle) + " " + where(c);
}

// Both commands in the trace form.
std::string both(const HbmCommand& earlier, const HbmCommand& cmd) {
  return " (earlier: \"" + to_string(earlier) + "\", this: \"" + to_string(cmd) + "\")";
}

std::string ordinal(int n) {
  switch (n) {
    case 1:
      return "latest";
    case 2:
      return "2nd latest";
    case 3:
      return "3rd latest";
    default:
      return std::to_string(n) + "th latest";
  }
}

}  // namespace

std::string to_string(HbmRuleLevel level) {
  switch (level) {
    case HbmRuleLevel::kBank:
      return "bank";
    case HbmRuleLevel::kBankGroup:
      return "bank group";
    case HbmRuleLevel::kOtherBankGroups:
      return "other bank groups";
    case HbmRuleLevel::kPseudoChannel:
      return "pseudo-channel";
  }
  return "?";
}

const std::vector<HbmSpacingRule>& HbmTimingChecker::spacing_rules() {
  using L = HbmRuleLevel;
  using C = HbmCmd;
  using T = const HbmTiming&;
  static const std::vector<HbmSpacingRule> kRules = {
      // Bank: the same bank.
      {"tRCD", L::kBank, C::kAct, C::kRd, [](T t) { return t.trcd; }, 1},
      {"tRCD", L::kBank, C::kAct, C::kWr, [](T t) { return t.trcd; }, 1},
      {"tRAS", L::kBank, C::kAct, C::kPre, [](T t) { return t.tras; }, 1},
      {"tRP", L::kBank, C::kPre, C::kAct, [](T t) { return t.trp; }, 1},
      {"tRC", L::kBank, C::kAct, C::kAct, [](T t) { return t.trc; }, 1},
      {"tWR", L::kBank, C::kWr, C::kPre, [](T t) { return t.write_data_end() + t.twr; }, 1},
      {"tRTP", L::kBank, C::kRd, C::kPre, [](T t) { return t.trtp; }, 1},
      // A REFSB opens rows of its (closed) bank inside the device: like an ACT there, tRP after
      // its PRE and tRC after its last ACT; the bank is busy tRFCSB.
      {"tRP", L::kBank, C::kPre, C::kRefSb, [](T t) { return t.trp; }, 1},
      {"tRC", L::kBank, C::kAct, C::kRefSb, [](T t) { return t.trc; }, 1},
      {"tRFCSB", L::kBank, C::kRefSb, C::kAct, [](T t) { return t.trfcsb; }, 1},
      {"tRFCSB", L::kBank, C::kRefSb, C::kRefSb, [](T t) { return t.trfcsb; }, 1},
      // Bank group: the same bank group, any bank.
      {"tCCD_L", L::kBankGroup, C::kRd, C::kRd, [](T t) { return t.tccd_l; }, 1},
      {"tCCD_L", L::kBankGroup, C::kWr, C::kWr, [](T t) { return t.tccd_l; }, 1},
      {"tRRD_L", L::kBankGroup, C::kAct, C::kAct, [](T t) { return t.trrd_l; }, 1},
      {"tRRD_L", L::kBankGroup, C::kAct, C::kRefSb, [](T t) { return t.trrd_l; }, 1},
      {"tWTR_L", L::kBankGroup, C::kWr, C::kRd, [](T t) { return t.write_data_end() + t.twtr_l; },
       1},
      // Pseudo-channel, between different bank groups.
      {"tCCD_S", L::kOtherBankGroups, C::kRd, C::kRd, [](T t) { return t.tccd_s; }, 1},
      {"tCCD_S", L::kOtherBankGroups, C::kWr, C::kWr, [](T t) { return t.tccd_s; }, 1},
      {"tRRD_S", L::kOtherBankGroups, C::kAct, C::kAct, [](T t) { return t.trrd_s; }, 1},
      {"tRRD_S", L::kOtherBankGroups, C::kAct, C::kRefSb, [](T t) { return t.trrd_s; }, 1},
      {"tWTR_S", L::kOtherBankGroups, C::kWr, C::kRd,
       [](T t) { return t.write_data_end() + t.twtr_s; }, 1},
      // Pseudo-channel, any bank.
      {"tFAW", L::kPseudoChannel, C::kAct, C::kAct, [](T t) { return t.tfaw; }, 4},
      {"tRFC", L::kPseudoChannel, C::kRef, C::kAct, [](T t) { return t.trfc; }, 1},
      {"tRFC", L::kPseudoChannel, C::kRef, C::kRef, [](T t) { return t.trfc; }, 1},
      // REF needs every bank idle: tRP after the last PRE of any bank.
      {"tRP", L::kPseudoChannel, C::kPre, C::kRef, [](T t) { return t.trp; }, 1},
      {"tRFC", L::kPseudoChannel, C::kRef, C::kRefSb, [](T t) { return t.trfc; }, 1},
      {"tRFCSB", L::kPseudoChannel, C::kRefSb, C::kRef, [](T t) { return t.trfcsb; }, 1},
      {"tRREFD", L::kPseudoChannel, C::kRefSb, C::kRefSb, [](T t) { return t.trrefd; }, 1},
      {"tRREFD", L::kPseudoChannel, C::kRefSb, C::kAct, [](T t) { return t.trrefd; }, 1},
  };
  return kRules;
}

void HbmTimingChecker::History::push(const HbmCommand& cmd) {
  head_ = (head_ + 1) % kHistoryDepth;
  ring_[head_] = cmd;
  count_ = std::min(count_ + 1, kHistoryDepth);
}

const HbmCommand* HbmTimingChecker::History::nth(int n) const {
  if (n < 1 || n > count_) return nullptr;
  return &ring_[(head_ - (n - 1) + kHistoryDepth) % kHistoryDepth];
}

HbmTimingChecker::HbmTimingChecker(const HbmTiming& timing, int pc)
    : timing_(timing),
      pc_(pc),
      banks_(timing.banks()),
      bank_history_(timing.banks()),
      group_history_(timing.bank_groups),
      refreshed_(timing.banks()) {
  timing_.validate();
  for (const HbmSpacingRule& r : spacing_rules()) {
    if (r.nth < 1 || r.nth > kHistoryDepth) {
      throw std::logic_error(std::string("HbmTimingChecker: rule ") + r.name + " looks " +
                             std::to_string(r.nth) + " commands back, the history keeps " +
                             std::to_string(kHistoryDepth));
    }
  }
}

void HbmTimingChecker::check_order(const HbmCommand& cmd) const {
  if (!has_last_) return;
  if (cmd.cycle < last_.cycle) {
    throw HbmTimingViolation(
        {"command order"},
        "command order: " + describe(cmd) + " comes after " + describe(last_) + both(last_, cmd));
  }
  if (cmd.cycle == last_.cycle) {
    throw HbmTimingViolation(
        {"one command per cycle"},
        "one command per cycle: " + describe(cmd) + " is in the same cycle as " + describe(last_) +
            "; the command bus carries one command a cycle" + both(last_, cmd));
  }
}

void HbmTimingChecker::check_address(const HbmCommand& cmd) const {
  std::string problem;
  if (cmd.pc != pc_) {
    problem = "pseudo-channel " + std::to_string(cmd.pc) + " on the checker of pseudo-channel " +
              std::to_string(pc_);
  } else if (has_bank(cmd.cmd) && (cmd.bg < 0 || cmd.bg >= timing_.bank_groups)) {
    problem = "bank group " + std::to_string(cmd.bg) + " of " + std::to_string(timing_.bank_groups);
  } else if (has_bank(cmd.cmd) && (cmd.bank < 0 || cmd.bank >= timing_.banks_per_group)) {
    problem = "bank " + std::to_string(cmd.bank) + " of " + std::to_string(timing_.banks_per_group);
  } else if (has_col(cmd.cmd) && cmd.col >= static_cast<uint32_t>(timing_.columns_per_row())) {
    problem =
        "column " + std::to_string(cmd.col) + " of " + std::to_string(timing_.columns_per_row());
  }
  if (!problem.empty()) {
    throw HbmTimingViolation({"address"}, "address: " + to_string(cmd.cmd) + " at cycle " +
                                              std::to_string(cmd.cycle) + " names " + problem +
                                              " (this: \"" + to_string(cmd) + "\")");
  }
}

void HbmTimingChecker::check_refresh_interval(uint64_t cycle, const HbmCommand* cmd,
                                              std::vector<Violation>* out) const {
  const size_t oldest = oldest_;
  const Refresh& last = refreshed_[oldest];
  const uint64_t gap = cycle - last.cycle();
  const uint64_t limit = timing_.max_refresh_gap();
  if (gap <= limit) return;
  const int bg = static_cast<int>(oldest) / timing_.banks_per_group;
  const int bank = static_cast<int>(oldest) % timing_.banks_per_group;
  std::string text = "tREFI violated: ";
  text += cmd ? describe(*cmd) : "end of run at cycle " + std::to_string(cycle);
  text += " is " + std::to_string(gap) + " cycles after ";
  if (!last.by) {
    text += "cycle 0 with no REF yet";
  } else {
    text += describe(*last.by);
  }
  if (!last.by || last.by->cmd == HbmCmd::kRefSb) {
    text += ", the last refresh of bg " + std::to_string(bg) + " bank " + std::to_string(bank);
  }
  text += ", needs at most " + std::to_string(limit) + " (" +
          std::to_string(timing_.max_postponed_refs + 1) + " x tREFI: at most " +
          std::to_string(timing_.max_postponed_refs) + " REFs postponed)";
  if (last.by && cmd) {
    text += both(*last.by, *cmd);
  } else if (cmd) {
    text += " (this: \"" + to_string(*cmd) + "\")";
  } else if (last.by) {
    text += " (earlier: \"" + to_string(*last.by) + "\")";
  }
  out->push_back({"tREFI", text});
}

void HbmTimingChecker::check_state(const HbmCommand& cmd, std::vector<Violation>* out) const {
  switch (cmd.cmd) {
    case HbmCmd::kAct: {
      const BankState& b = banks_[bank_index(cmd.bg, cmd.bank)];
      if (b.open) {
        out->push_back({"ACT to open bank", "ACT to open bank: " + describe(cmd) + " while row " +
                                                hbm_hex(b.act.row) + " is open since " +
                                                describe(b.act) + both(b.act, cmd)});
      }
      break;
    }
    case HbmCmd::kRd:
    case HbmCmd::kWr: {
      const BankState& b = banks_[bank_index(cmd.bg, cmd.bank)];
      if (!b.open) {
        const std::string rule = to_string(cmd.cmd) + " to closed bank";
        std::string text = rule + ": " + describe(cmd) + " to a closed bank, ";
        if (b.precharged_once) {
          text += "closed by " + describe(b.pre) + both(b.pre, cmd);
        } else {
          text += "never activated (this: \"" + to_string(cmd) + "\")";
        }
        out->push_back({rule, text});
      }
      break;
    }
    case HbmCmd::kRef: {
      for (const BankState& b : banks_) {
        if (!b.open) continue;
        out->push_back({"REF with open bank",
                        "REF with open bank: " + describe(cmd) + " while bg " +
                            std::to_string(b.act.bg) + " bank " + std::to_string(b.act.bank) +
                            " is open since " + describe(b.act) + both(b.act, cmd)});
        break;  // the first open bank is enough to say why
      }
      break;
    }
    case HbmCmd::kRefSb: {
      const size_t i = static_cast<size_t>(bank_index(cmd.bg, cmd.bank));
      const BankState& b = banks_[i];
      if (b.open) {
        out->push_back({"REFSB to open bank", "REFSB to open bank: " + describe(cmd) +
                                                  " while row " + hbm_hex(b.act.row) +
                                                  " is open since " + describe(b.act) +
                                                  both(b.act, cmd)});
      }
      if (refreshed_[i].in_set) {
        const int left = timing_.banks() - set_size_;
        out->push_back(
            {"REFSB set", "REFSB set: " + describe(cmd) + " refreshes a bank this set of " +
                              std::to_string(timing_.banks()) + " REFSBs has refreshed, by " +
                              describe(*refreshed_[i].by) + ", while " + std::to_string(left) +
                              " bank(s) wait for theirs; each bank takes one REFSB a set" +
                              both(*refreshed_[i].by, cmd)});
      }
      break;
    }
    case HbmCmd::kPre:
      break;  // PRE of a closed bank is a no-op
  }
}

const HbmCommand* HbmTimingChecker::earlier(const HbmSpacingRule& rule,
                                            const HbmCommand& cmd) const {
  const int from = cmd_index(rule.from);
  if (rule.level == HbmRuleLevel::kPseudoChannel) return pc_history_[from].nth(rule.nth);
  if (!has_bank(cmd.cmd)) return nullptr;  // REF only has pseudo-channel rules
  switch (rule.level) {
    case HbmRuleLevel::kBank:
      return bank_history_[bank_index(cmd.bg, cmd.bank)][from].nth(rule.nth);
    case HbmRuleLevel::kBankGroup:
      return group_history_[cmd.bg][from].nth(rule.nth);
    case HbmRuleLevel::kOtherBankGroups: {
      // The nth latest among the other groups' histories, kept newest first in a small array
      // (this runs for every command the device sees: no allocation).
      std::array<const HbmCommand*, kHistoryDepth> best{};
      int found = 0;
      for (int bg = 0; bg < timing_.bank_groups; ++bg) {
        if (bg == cmd.bg) continue;
        const History& h = group_history_[bg][from];
        for (int n = 1; n <= h.size(); ++n) {
          const HbmCommand* c = h.nth(n);
          int at = std::min(found, rule.nth);
          while (at > 0 && best[at - 1]->cycle < c->cycle) --at;
          if (at >= rule.nth) break;  // older than the nth latest so far; so is the rest of h
          for (int k = std::min(found, rule.nth - 1); k > at; --k) best[k] = best[k - 1];
          best[at] = c;
          found = std::min(found + 1, rule.nth);
        }
      }
      return found < rule.nth ? nullptr : best[rule.nth - 1];
    }
    case HbmRuleLevel::kPseudoChannel:
      break;
  }
  return nullptr;
}

void HbmTimingChecker::check_spacing(const HbmCommand& cmd, std::vector<Violation>* out) const {
  for (const HbmSpacingRule& rule : spacing_rules()) {
    if (rule.to != cmd.cmd) continue;
    const HbmCommand* e = earlier(rule, cmd);
    if (!e) continue;
    const uint64_t gap = cmd.cycle - e->cycle;
    const uint64_t need = static_cast<uint64_t>(rule.min_cycles(timing_));
    if (gap >= need) continue;
    std::string text = std::string(rule.name) + " violated: " + describe(cmd) + " is " +
                       std::to_string(gap) + " cycles after " + describe(*e);
    if (rule.nth > 1) text += ", the " + ordinal(rule.nth) + " " + to_string(rule.from);
    text += ", needs " + std::to_string(need) + both(*e, cmd);
    out->push_back({rule.name, text});
  }
}

void HbmTimingChecker::record(const HbmCommand& cmd) {
  has_last_ = true;
  last_ = cmd;
  ++commands_issued_;
  const int type = cmd_index(cmd.cmd);
  if (!has_bank(cmd.cmd)) {  // REF: every bank refreshed, a new set of REFSBs begins
    pc_history_[type].push(cmd);
    for (Refresh& r : refreshed_) r = Refresh{cmd, false};
    set_size_ = 0;
    oldest_ = 0;
    return;
  }
  BankState& b = banks_[bank_index(cmd.bg, cmd.bank)];
  if (cmd.cmd == HbmCmd::kPre && !b.open) return;  // no-op: starts no tRP
  bank_history_[bank_index(cmd.bg, cmd.bank)][type].push(cmd);
  group_history_[cmd.bg][type].push(cmd);
  pc_history_[type].push(cmd);
  if (cmd.cmd == HbmCmd::kAct) {
    b.open = true;
    b.act = cmd;
  } else if (cmd.cmd == HbmCmd::kPre) {
    b.open = false;
    b.precharged_once = true;
    b.pre = cmd;
  } else if (cmd.cmd == HbmCmd::kRefSb) {
    refreshed_[static_cast<size_t>(bank_index(cmd.bg, cmd.bank))] = Refresh{cmd, true};
    if (++set_size_ == timing_.banks()) {  // the set is complete: the next one begins
      for (Refresh& r : refreshed_) r.in_set = false;
      set_size_ = 0;
    }
    // only a refresh moves the oldest: found here, not on every command
    oldest_ = 0;
    for (size_t i = 1; i < refreshed_.size(); ++i) {
      if (refreshed_[i].cycle() < refreshed_[oldest_].cycle()) oldest_ = i;
    }
  }
}

void HbmTimingChecker::issue(const HbmCommand& cmd) {
  if (trace_) *trace_ << to_string(cmd) << '\n';
  check_address(cmd);
  check_order(cmd);
  std::vector<Violation> found;
  check_refresh_interval(cmd.cycle, &cmd, &found);
  check_state(cmd, &found);
  const bool noop_pre = cmd.cmd == HbmCmd::kPre && !banks_[bank_index(cmd.bg, cmd.bank)].open;
  if (!noop_pre) check_spacing(cmd, &found);
  if (!found.empty()) {
    std::vector<std::string> rules;
    std::string what;
    for (const Violation& v : found) {
      rules.push_back(v.rule);
      if (!what.empty()) what += '\n';
      what += v.text;
    }
    throw HbmTimingViolation(std::move(rules), what);
  }
  record(cmd);
}

void HbmTimingChecker::finish(uint64_t cycle) {
  if (has_last_ && cycle < last_.cycle) {
    throw std::invalid_argument("HbmTimingChecker::finish at cycle " + std::to_string(cycle) +
                                " is before the last command, " + describe(last_));
  }
  std::vector<Violation> found;
  check_refresh_interval(cycle, nullptr, &found);
  if (!found.empty()) throw HbmTimingViolation({found[0].rule}, found[0].text);
}

}  // namespace tessera::hbm
