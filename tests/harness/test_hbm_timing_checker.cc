// The HBM2 timing checker (harness/hbm/hbm_timing_checker.h). Every timing rule gets the shortest
// legal command sequence that puts its two commands exactly at the bound: one cycle inside it
// must throw naming the rule, at the bound it must pass (Rules/HbmTimingRule.OffByOneIsCaught/*).
// Each case runs under the brief's baseline and under a timing whose values all differ, where
// the sequence must break that one rule alone (so no rule can stand in for another). Then the
// state rules, the trace and message formats, and a long random sequence from an in-test
// scheduler that waits exactly the legal minimum, which the checker must accept.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/hbm/hbm_timing_checker.h"
#include "tests/common/test_util.h"

namespace tessera::hbm {
namespace {

HbmCommand make(HbmCmd cmd, uint64_t cycle, int bg, int bank, uint32_t row, uint32_t col) {
  return HbmCommand{cycle, cmd, 0, bg, bank, row, col};
}
HbmCommand act(uint64_t cycle, int bg, int bank, uint32_t row = 0x1a3) {
  return make(HbmCmd::kAct, cycle, bg, bank, row, 0);
}
HbmCommand rd(uint64_t cycle, int bg, int bank, uint32_t col = 3) {
  return make(HbmCmd::kRd, cycle, bg, bank, 0, col);
}
HbmCommand wr(uint64_t cycle, int bg, int bank, uint32_t col = 3) {
  return make(HbmCmd::kWr, cycle, bg, bank, 0, col);
}
HbmCommand pre(uint64_t cycle, int bg, int bank) {
  return make(HbmCmd::kPre, cycle, bg, bank, 0, 0);
}
HbmCommand ref(uint64_t cycle) { return make(HbmCmd::kRef, cycle, 0, 0, 0, 0); }
HbmCommand refsb(uint64_t cycle, int bg, int bank) {
  return make(HbmCmd::kRefSb, cycle, bg, bank, 0, 0);
}

// REFSBs from `first`, tRREFD apart, to every bank but (bg, bank), which comes last: a whole set.
std::vector<HbmCommand> refsb_set_ending_with(const HbmTiming& t, uint64_t first, int bg,
                                              int bank) {
  std::vector<HbmCommand> v;
  uint64_t at = first;
  for (int g = 0; g < t.bank_groups; ++g) {
    for (int b = 0; b < t.banks_per_group; ++b) {
      if (g == bg && b == bank) continue;
      v.push_back(refsb(at, g, b));
      at += static_cast<uint64_t>(t.trrefd);
    }
  }
  v.push_back(refsb(at, bg, bank));
  return v;
}

struct NamedTiming {
  const char* label;
  HbmTiming timing;
  bool rules_isolated;  // every case breaks its rule alone
};
std::vector<NamedTiming> timings() {
  return {{"baseline", HbmTiming{}, false}, {"distinct values", HbmTiming::alternate(), true}};
}

// Bank A and bank B share bank group 0; bank C is in bank group 1.
constexpr int kBgA = 0, kBankA = 1;
constexpr int kBgB = 0, kBankB = 2;
constexpr int kBgC = 1, kBankC = 0;

// The earliest cycle x >= lo such that x + (min - 1) >= floor: where the first command of a pair
// goes so that the second, even min - 1 cycles later, clears every other rule.
uint64_t clear_of(uint64_t lo, uint64_t floor, int min) {
  const int64_t x = static_cast<int64_t>(floor) - (min - 1);
  return static_cast<uint64_t>(std::max<int64_t>(static_cast<int64_t>(lo), x));
}

struct Sequence {
  std::vector<HbmCommand> commands;
  std::optional<uint64_t> finish_at = std::nullopt;  // the last step is finish() at this cycle
};

struct RuleCase {
  const char* test_name;
  const char* rule;  // the name in the checker's table and messages
  HbmCmd from;       // for the cross-check against the table (spacing rules only)
  HbmCmd to;
  bool is_max;  // the bound is a maximum (the refresh interval), not a minimum
  uint64_t (*bound)(const HbmTiming&);
  // The sequence with its last step `gap` cycles after the command the rule measures from.
  Sequence (*build)(const HbmTiming&, uint64_t gap);
};

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.test_name; }

using T = const HbmTiming&;
using C = HbmCmd;

std::vector<RuleCase> rule_cases() {
  return {
      {"tRCDRead", "tRCD", C::kAct, C::kRd, false, [](T t) -> uint64_t { return t.trcd; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), rd(gap, kBgA, kBankA)}};
       }},
      {"tRCDWrite", "tRCD", C::kAct, C::kWr, false, [](T t) -> uint64_t { return t.trcd; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), wr(gap, kBgA, kBankA)}};
       }},
      {"tRAS", "tRAS", C::kAct, C::kPre, false, [](T t) -> uint64_t { return t.tras; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), pre(gap, kBgA, kBankA)}};
       }},
      {"tRP", "tRP", C::kPre, C::kAct, false, [](T t) -> uint64_t { return t.trp; },
       [](T t, uint64_t gap) {
         const uint64_t p = clear_of(t.tras, t.trc, t.trp);
         return Sequence{{act(0, kBgA, kBankA), pre(p, kBgA, kBankA), act(p + gap, kBgA, kBankA)}};
       }},
      {"tRPRefresh", "tRP", C::kPre, C::kRef, false, [](T t) -> uint64_t { return t.trp; },
       [](T t, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), pre(t.tras, kBgA, kBankA), ref(t.tras + gap)}};
       }},
      {"tRC", "tRC", C::kAct, C::kAct, false, [](T t) -> uint64_t { return t.trc; },
       [](T t, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), pre(t.tras, kBgA, kBankA), act(gap, kBgA, kBankA)}};
       }},
      {"tWR", "tWR", C::kWr, C::kPre, false,
       [](T t) -> uint64_t { return t.cwl + t.burst_cycles + t.twr; },
       [](T t, uint64_t gap) {
         const uint64_t w = clear_of(t.trcd, t.tras, t.cwl + t.burst_cycles + t.twr);
         return Sequence{{act(0, kBgA, kBankA), wr(w, kBgA, kBankA), pre(w + gap, kBgA, kBankA)}};
       }},
      {"tRTP", "tRTP", C::kRd, C::kPre, false, [](T t) -> uint64_t { return t.trtp; },
       [](T t, uint64_t gap) {
         const uint64_t r = clear_of(t.trcd, t.tras, t.trtp);
         return Sequence{{act(0, kBgA, kBankA), rd(r, kBgA, kBankA), pre(r + gap, kBgA, kBankA)}};
       }},
      {"tCCDLRead", "tCCD_L", C::kRd, C::kRd, false, [](T t) -> uint64_t { return t.tccd_l; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_l + t.trcd, t.tccd_l);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_l, kBgB, kBankB), rd(x, kBgA, kBankA),
                          rd(x + gap, kBgB, kBankB)}};
       }},
      {"tCCDLWrite", "tCCD_L", C::kWr, C::kWr, false, [](T t) -> uint64_t { return t.tccd_l; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_l + t.trcd, t.tccd_l);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_l, kBgB, kBankB), wr(x, kBgA, kBankA),
                          wr(x + gap, kBgB, kBankB)}};
       }},
      {"tRRDL", "tRRD_L", C::kAct, C::kAct, false, [](T t) -> uint64_t { return t.trrd_l; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), act(gap, kBgB, kBankB)}};
       }},
      {"tWTRL", "tWTR_L", C::kWr, C::kRd, false,
       [](T t) -> uint64_t { return t.cwl + t.burst_cycles + t.twtr_l; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_l + t.trcd, t.cwl + t.burst_cycles + t.twtr_l);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_l, kBgB, kBankB), wr(x, kBgA, kBankA),
                          rd(x + gap, kBgB, kBankB)}};
       }},
      {"tCCDSRead", "tCCD_S", C::kRd, C::kRd, false, [](T t) -> uint64_t { return t.tccd_s; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_s + t.trcd, t.tccd_s);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_s, kBgC, kBankC), rd(x, kBgA, kBankA),
                          rd(x + gap, kBgC, kBankC)}};
       }},
      {"tCCDSWrite", "tCCD_S", C::kWr, C::kWr, false, [](T t) -> uint64_t { return t.tccd_s; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_s + t.trcd, t.tccd_s);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_s, kBgC, kBankC), wr(x, kBgA, kBankA),
                          wr(x + gap, kBgC, kBankC)}};
       }},
      {"tRRDS", "tRRD_S", C::kAct, C::kAct, false, [](T t) -> uint64_t { return t.trrd_s; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), act(gap, kBgC, kBankC)}};
       }},
      {"tWTRS", "tWTR_S", C::kWr, C::kRd, false,
       [](T t) -> uint64_t { return t.cwl + t.burst_cycles + t.twtr_s; },
       [](T t, uint64_t gap) {
         const uint64_t x = clear_of(t.trcd, t.trrd_s + t.trcd, t.cwl + t.burst_cycles + t.twtr_s);
         return Sequence{{act(0, kBgA, kBankA), act(t.trrd_s, kBgC, kBankC), wr(x, kBgA, kBankA),
                          rd(x + gap, kBgC, kBankC)}};
       }},
      // Four ACTs tRRD_S apart in four bank groups; the fifth, back in bank group 0, `gap`
      // after the first.
      {"tFAW", "tFAW", C::kAct, C::kAct, false, [](T t) -> uint64_t { return t.tfaw; },
       [](T t, uint64_t gap) {
         const uint64_t s = t.trrd_s;
         return Sequence{
             {act(0, 0, 1), act(s, 1, 0), act(2 * s, 2, 0), act(3 * s, 3, 0), act(gap, 0, 2)}};
       }},
      {"tRFCAct", "tRFC", C::kRef, C::kAct, false, [](T t) -> uint64_t { return t.trfc; },
       [](T, uint64_t gap) {
         return Sequence{{ref(0), act(gap, kBgA, kBankA)}};
       }},
      {"tRFCRefresh", "tRFC", C::kRef, C::kRef, false, [](T t) -> uint64_t { return t.trfc; },
       [](T, uint64_t gap) {
         return Sequence{{ref(0), ref(gap)}};
       }},
      // Single-bank refresh (REFSB).
      {"tRPRefSb", "tRP", C::kPre, C::kRefSb, false, [](T t) -> uint64_t { return t.trp; },
       [](T t, uint64_t gap) {
         const uint64_t p = clear_of(t.tras, t.trc, t.trp);
         return Sequence{
             {act(0, kBgA, kBankA), pre(p, kBgA, kBankA), refsb(p + gap, kBgA, kBankA)}};
       }},
      {"tRCRefSb", "tRC", C::kAct, C::kRefSb, false, [](T t) -> uint64_t { return t.trc; },
       [](T t, uint64_t gap) {
         return Sequence{
             {act(0, kBgA, kBankA), pre(t.tras, kBgA, kBankA), refsb(gap, kBgA, kBankA)}};
       }},
      {"tRFCSBAct", "tRFCSB", C::kRefSb, C::kAct, false, [](T t) -> uint64_t { return t.trfcsb; },
       [](T, uint64_t gap) {
         return Sequence{{refsb(0, kBgA, kBankA), act(gap, kBgA, kBankA)}};
       }},
      // The same bank again, first in the next set.
      {"tRFCSBRefSb", "tRFCSB", C::kRefSb, C::kRefSb, false,
       [](T t) -> uint64_t { return t.trfcsb; },
       [](T t, uint64_t gap) {
         Sequence s{refsb_set_ending_with(t, 0, kBgA, kBankA)};
         s.commands.push_back(refsb(s.commands.back().cycle + gap, kBgA, kBankA));
         return s;
       }},
      {"tRFCSBRef", "tRFCSB", C::kRefSb, C::kRef, false, [](T t) -> uint64_t { return t.trfcsb; },
       [](T, uint64_t gap) {
         return Sequence{{refsb(0, kBgA, kBankA), ref(gap)}};
       }},
      {"tRFCRefSb", "tRFC", C::kRef, C::kRefSb, false, [](T t) -> uint64_t { return t.trfc; },
       [](T, uint64_t gap) {
         return Sequence{{ref(0), refsb(gap, kBgA, kBankA)}};
       }},
      {"tRREFDRefSb", "tRREFD", C::kRefSb, C::kRefSb, false,
       [](T t) -> uint64_t { return t.trrefd; },
       [](T, uint64_t gap) {
         return Sequence{{refsb(0, kBgA, kBankA), refsb(gap, kBgC, kBankC)}};
       }},
      {"tRREFDAct", "tRREFD", C::kRefSb, C::kAct, false, [](T t) -> uint64_t { return t.trrefd; },
       [](T, uint64_t gap) {
         return Sequence{{refsb(0, kBgA, kBankA), act(gap, kBgC, kBankC)}};
       }},
      {"tRRDLRefSb", "tRRD_L", C::kAct, C::kRefSb, false, [](T t) -> uint64_t { return t.trrd_l; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), refsb(gap, kBgB, kBankB)}};
       }},
      {"tRRDSRefSb", "tRRD_S", C::kAct, C::kRefSb, false, [](T t) -> uint64_t { return t.trrd_s; },
       [](T, uint64_t gap) {
         return Sequence{{act(0, kBgA, kBankA), refsb(gap, kBgC, kBankC)}};
       }},
      // The refresh interval: at most 9 x tREFI, from cycle 0 to the first REF and between REFs,
      // checked when a command arrives and at finish().
      {"tREFIFirst", "tREFI", C::kRef, C::kRef, true, [](T t) { return t.max_refresh_gap(); },
       [](T, uint64_t gap) { return Sequence{{ref(gap)}}; }},
      {"tREFIBetween", "tREFI", C::kRef, C::kRef, true, [](T t) { return t.max_refresh_gap(); },
       [](T t, uint64_t gap) {
         const uint64_t first = t.trefi;
         return Sequence{{ref(first), ref(first + gap)}};
       }},
      {"tREFIOtherCommand", "tREFI", C::kRef, C::kAct, true,
       [](T t) { return t.max_refresh_gap(); },
       [](T t, uint64_t gap) {
         const uint64_t first = t.trefi;
         return Sequence{{ref(first), act(first + gap, kBgA, kBankA)}};
       }},
      {"tREFIAtFinish", "tREFI", C::kRef, C::kRef, true, [](T t) { return t.max_refresh_gap(); },
       [](T t, uint64_t gap) {
         const uint64_t first = t.trefi;
         return Sequence{{ref(first)}, first + gap};
       }},
      {"tREFIAtFinishWithoutRefresh", "tREFI", C::kRef, C::kRef, true,
       [](T t) { return t.max_refresh_gap(); },
       [](T, uint64_t gap) {
         return Sequence{{}, gap};
       }},
      // With REFSBs each bank keeps its own interval: a whole set from tREFI, bank A first; the
      // run ends `gap` after bank A's REFSB.
      {"tREFIPerBank", "tREFI", C::kRefSb, C::kRefSb, true,
       [](T t) { return t.max_refresh_gap(); },
       [](T t, uint64_t gap) {
         std::vector<HbmCommand> set = refsb_set_ending_with(t, t.trefi, kBgB, kBankB);
         // bank A first: swap it with the first command's bank
         for (HbmCommand& c : set) {
           if (c.bg == kBgA && c.bank == kBankA) {
             c.bg = set.front().bg;
             c.bank = set.front().bank;
           }
         }
         set.front().bg = kBgA;
         set.front().bank = kBankA;
         return Sequence{set, t.trefi + gap};
       }},
  };
}

// Runs every step but the last, which must pass; returns the last step as a callable.
::testing::AssertionResult run_all_but_last(HbmTimingChecker& checker, const Sequence& s) {
  const size_t n = s.commands.size() - (s.finish_at ? 0 : 1);
  for (size_t i = 0; i < n; ++i) {
    try {
      checker.issue(s.commands[i]);
    } catch (const HbmTimingViolation& v) {
      return ::testing::AssertionFailure()
             << "setup command " << i << " broke a rule: " << v.what();
    }
  }
  return ::testing::AssertionSuccess();
}

void last_step(HbmTimingChecker& checker, const Sequence& s) {
  if (s.finish_at) {
    checker.finish(*s.finish_at);
  } else {
    checker.issue(s.commands.back());
  }
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
bool contains(const std::string& text, const std::string& s) {
  return text.find(s) != std::string::npos;
}

class HbmTimingRule : public ::testing::TestWithParam<RuleCase> {};

TEST_P(HbmTimingRule, OffByOneIsCaught) {
  const RuleCase& rc = GetParam();
  for (const NamedTiming& nt : timings()) {
    SCOPED_TRACE(nt.label);
    const HbmTiming& t = nt.timing;
    const uint64_t bound = rc.bound(t);
    const uint64_t bad = rc.is_max ? bound + 1 : bound - 1;
    ASSERT_GE(bound, 2u) << "a bound of one cycle has no legal off-by-one case";

    {  // Exactly at the bound: legal.
      HbmTimingChecker checker(t);
      const Sequence s = rc.build(t, bound);
      ASSERT_TRUE(run_all_but_last(checker, s));
      try {
        last_step(checker, s);
      } catch (const HbmTimingViolation& v) {
        ADD_FAILURE() << "at the bound (" << bound << " cycles): " << v.what();
      }
    }
    {  // One cycle past it: the rule is named, with the required and the actual spacing.
      HbmTimingChecker checker(t);
      const Sequence s = rc.build(t, bad);
      ASSERT_TRUE(run_all_but_last(checker, s));
      try {
        last_step(checker, s);
        ADD_FAILURE() << rc.rule << " not caught at " << bad << " cycles (bound " << bound << ")";
      } catch (const HbmTimingViolation& v) {
        const std::string what = v.what();
        EXPECT_TRUE(contains(v.rules(), rc.rule)) << what;
        EXPECT_TRUE(contains(what, std::string(rc.rule) + " violated: ")) << what;
        EXPECT_TRUE(contains(what, "is " + std::to_string(bad) + " cycles after")) << what;
        const std::string needs = rc.is_max ? "needs at most " : "needs ";
        EXPECT_TRUE(contains(what, needs + std::to_string(bound))) << what;
        if (nt.rules_isolated) {
          EXPECT_EQ(v.rules(), std::vector<std::string>{rc.rule}) << what;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Rules, HbmTimingRule, ::testing::ValuesIn(rule_cases()),
                         [](const ::testing::TestParamInfo<RuleCase>& info) {
                           return std::string(info.param.test_name);
                         });

TEST(HbmTimingChecker, EveryTableRuleHasACase) {
  const std::vector<RuleCase> cases = rule_cases();
  for (const HbmSpacingRule& r : HbmTimingChecker::spacing_rules()) {
    const bool found = std::any_of(cases.begin(), cases.end(), [&](const RuleCase& c) {
      return !c.is_max && r.name == std::string(c.rule) && r.from == c.from && r.to == c.to;
    });
    EXPECT_TRUE(found) << r.name << " " << to_string(r.from) << " -> " << to_string(r.to)
                       << " has no off-by-one case";
  }
  for (const RuleCase& c : cases) {
    if (c.is_max) continue;
    const auto& rules = HbmTimingChecker::spacing_rules();
    const bool found = std::any_of(rules.begin(), rules.end(), [&](const HbmSpacingRule& r) {
      return r.name == std::string(c.rule) && r.from == c.from && r.to == c.to;
    });
    EXPECT_TRUE(found) << c.test_name << " tests a rule the table does not have";
  }
}

TEST(HbmTimingChecker, BaselineIsTheDesignBrief) {
  const HbmTiming t;
  EXPECT_EQ(t.cl, 14);
  EXPECT_EQ(t.cwl, 4);
  EXPECT_EQ(t.trcd, 14);
  EXPECT_EQ(t.trp, 14);
  EXPECT_EQ(t.tras, 34);
  EXPECT_EQ(t.trc, 48);
  EXPECT_EQ(t.twr, 16);
  EXPECT_EQ(t.trtp, 5);
  EXPECT_EQ(t.tccd_s, 2);
  EXPECT_EQ(t.tccd_l, 4);
  EXPECT_EQ(t.trrd_s, 4);
  EXPECT_EQ(t.trrd_l, 4);
  EXPECT_EQ(t.tfaw, 16);
  EXPECT_EQ(t.twtr_s, 6);
  EXPECT_EQ(t.twtr_l, 8);
  EXPECT_EQ(t.trefi, 3900);
  EXPECT_EQ(t.trfc, 260);
  EXPECT_EQ(t.trfcsb, 160);
  EXPECT_EQ(t.trrefd, 8);
  EXPECT_EQ(t.burst_cycles, 2);
  EXPECT_EQ(t.burst_bytes(), 32);
  EXPECT_EQ(t.banks(), 16);
  EXPECT_EQ(t.columns_per_row(), 32);
  EXPECT_EQ(t.max_refresh_gap(), 9u * 3900u);
  EXPECT_NO_THROW(t.validate());
}

TEST(HbmTimingChecker, RejectsTimingThatDescribesNoDevice) {
  HbmTiming t;
  t.trefi = 0;
  EXPECT_THROW(HbmTimingChecker{t}, std::invalid_argument);
  t = HbmTiming{};
  t.row_bytes = 1000;  // not a whole number of 32 B bursts
  EXPECT_THROW(HbmTimingChecker{t}, std::invalid_argument);
}

// Issues `cmd`, which must break exactly `rule`; returns the message.
std::string expect_only(HbmTimingChecker& checker, const HbmCommand& cmd, const std::string& rule) {
  try {
    checker.issue(cmd);
  } catch (const HbmTimingViolation& v) {
    EXPECT_EQ(v.rules(), std::vector<std::string>{rule}) << v.what();
    return v.what();
  }
  ADD_FAILURE() << to_string(cmd) << " was accepted, expected " << rule;
  return "";
}

TEST(HbmTimingChecker, ViolationNamesRuleSpacingAndBothCommands) {
  HbmTimingChecker checker;
  checker.issue(act(7, 0, 1));
  EXPECT_EQ(expect_only(checker, rd(20, 0, 1), "tRCD"),
            "tRCD violated: RD at cycle 20 (bg 0 bank 1) is 13 cycles after ACT at cycle 7 "
            "(bg 0 bank 1), needs 14 (earlier: \"7 ACT 0 0 1 0x1a3 -\", this: \"20 RD 0 0 1 - "
            "0x3\")");
}

TEST(HbmTimingChecker, EveryBrokenRuleIsReported) {
  // Baseline tRC = tRAS + tRP: an ACT too early after ACT-PRE breaks both.
  HbmTimingChecker checker;
  checker.issue(act(0, 0, 1));
  checker.issue(pre(34, 0, 1));
  try {
    checker.issue(act(47, 0, 1));
    ADD_FAILURE() << "accepted";
  } catch (const HbmTimingViolation& v) {
    EXPECT_EQ(v.rules(), (std::vector<std::string>{"tRP", "tRC"})) << v.what();
    EXPECT_TRUE(contains(v.what(), "\n")) << "one line per rule: " << v.what();
  }
}

TEST(HbmTimingChecker, RejectedCommandIsNotRecorded) {
  HbmTimingChecker checker;
  checker.issue(act(0, 0, 1));
  expect_only(checker, rd(5, 0, 1), "tRCD");
  EXPECT_NO_THROW(checker.issue(rd(14, 0, 1)));
  EXPECT_EQ(checker.commands_issued(), 2u);
}

TEST(HbmTimingChecker, ActToOpenBankIsCaught) {
  HbmTimingChecker checker;
  checker.issue(act(0, 0, 1, 0x5));
  const std::string what = expect_only(checker, act(100, 0, 1, 0x6), "ACT to open bank");
  EXPECT_TRUE(contains(what, "row 0x5 is open since ACT at cycle 0 (bg 0 bank 1)")) << what;
}

TEST(HbmTimingChecker, ReadToClosedBankIsCaught) {
  HbmTimingChecker checker;
  std::string what = expect_only(checker, rd(5, 0, 1), "RD to closed bank");
  EXPECT_TRUE(contains(what, "never activated")) << what;
  checker.issue(act(10, 0, 1));
  checker.issue(pre(44, 0, 1));
  what = expect_only(checker, rd(100, 0, 1), "RD to closed bank");
  EXPECT_TRUE(contains(what, "closed by PRE at cycle 44 (bg 0 bank 1)")) << what;
}

TEST(HbmTimingChecker, WriteToClosedBankIsCaught) {
  HbmTimingChecker checker;
  checker.issue(act(0, 0, 1));
  expect_only(checker, wr(20, 0, 2), "WR to closed bank");  // the open bank is another one
}

TEST(HbmTimingChecker, PrechargeOfClosedBankIsANoOp) {
  HbmTimingChecker checker;
  EXPECT_NO_THROW(checker.issue(pre(1, 2, 3)));  // never opened
  checker.issue(act(2, 0, 1));
  checker.issue(pre(36, 0, 1));
  EXPECT_NO_THROW(checker.issue(pre(45, 0, 1)));  // already closed: starts no tRP
  EXPECT_NO_THROW(checker.issue(act(50, 0, 1)));  // tRP from the PRE at 36
  EXPECT_TRUE(checker.bank_open(0, 1));
}

TEST(HbmTimingChecker, RefreshWithOpenBankIsCaught) {
  HbmTimingChecker checker;
  checker.issue(act(0, 2, 3));
  const std::string what = expect_only(checker, ref(500), "REF with open bank");
  EXPECT_TRUE(contains(what, "while bg 2 bank 3 is open since ACT at cycle 0")) << what;
}

TEST(HbmTimingChecker, SingleBankRefreshOfOpenBankIsCaught) {
  HbmTimingChecker checker;
  checker.issue(act(0, 2, 3, 0x7));
  const std::string what = expect_only(checker, refsb(500, 2, 3), "REFSB to open bank");
  EXPECT_TRUE(contains(what, "row 0x7 is open since ACT at cycle 0 (bg 2 bank 3)")) << what;
  EXPECT_NO_THROW(checker.issue(refsb(510, 1, 3)));  // another bank, closed: legal
}

// Each bank takes one REFSB a set of 16; the set after a full one, or after a REF, starts anew.
TEST(HbmTimingChecker, SecondSingleBankRefreshInASetIsCaught) {
  const HbmTiming t;
  HbmTimingChecker checker(t);
  checker.issue(refsb(0, 1, 2));
  checker.issue(refsb(100, 3, 0));
  const std::string what = expect_only(checker, refsb(200, 1, 2), "REFSB set");
  EXPECT_TRUE(contains(what, "by REFSB at cycle 0 (bg 1 bank 2)")) << what;
  EXPECT_TRUE(contains(what, "while 14 bank(s) wait")) << what;
  checker.issue(ref(400));  // all banks refreshed: a new set
  EXPECT_NO_THROW(checker.issue(refsb(400 + t.trfc, 1, 2)));
  HbmTimingChecker full(t);
  for (const HbmCommand& c : refsb_set_ending_with(t, 0, 1, 2)) full.issue(c);
  EXPECT_NO_THROW(full.issue(refsb(1000, 1, 2)));  // first of the next set
  expect_only(full, refsb(1000 + t.trfcsb, 1, 2), "REFSB set");
}

TEST(HbmTimingChecker, CommandsOutOfOrderAreCaught) {
  HbmTimingChecker checker;
  checker.issue(act(10, 0, 1));
  expect_only(checker, act(5, 1, 0), "command order");
}

TEST(HbmTimingChecker, TwoCommandsInOneCycleAreCaught) {
  HbmTimingChecker checker;
  checker.issue(act(10, 0, 1));
  expect_only(checker, act(10, 1, 0), "one command per cycle");
}

TEST(HbmTimingChecker, AddressOutOfRangeIsCaught) {
  HbmTimingChecker checker;
  expect_only(checker, act(1, 4, 0), "address");
  expect_only(checker, act(1, 0, 4), "address");
  checker.issue(act(1, 0, 0));
  expect_only(checker, rd(20, 0, 0, 32), "address");
  HbmCommand other_pc = act(30, 1, 0);
  other_pc.pc = 1;
  expect_only(checker, other_pc, "address");
}

TEST(HbmTimingChecker, FinishBeforeLastCommandIsAnError) {
  HbmTimingChecker checker;
  checker.issue(act(10, 0, 1));
  EXPECT_THROW(checker.finish(9), std::invalid_argument);
  EXPECT_NO_THROW(checker.finish(10));
}

TEST(HbmTimingChecker, TraceHasOneLinePerCommand) {
  EXPECT_EQ(to_string(act(120, 1, 2, 0x1a3)), "120 ACT 0 1 2 0x1a3 -");
  EXPECT_EQ(to_string(rd(134, 1, 2, 0x1f)), "134 RD 0 1 2 - 0x1f");
  EXPECT_EQ(to_string(wr(140, 3, 0, 0)), "140 WR 0 3 0 - 0x0");
  EXPECT_EQ(to_string(pre(160, 1, 2)), "160 PRE 0 1 2 - -");
  EXPECT_EQ(to_string(ref(400)), "400 REF 0 - - - -");
  EXPECT_EQ(to_string(refsb(410, 1, 2)), "410 REFSB 0 1 2 - -");

  HbmTimingChecker checker(HbmTiming{}, 3);
  std::ostringstream trace;
  checker.set_trace(&trace);
  for (HbmCommand c :
       {act(120, 1, 2, 0x1a3), rd(134, 1, 2, 0x1f), wr(140, 1, 2, 0x0), pre(166, 1, 2), ref(180)}) {
    c.pc = 3;
    checker.issue(c);
  }
  checker.set_trace(nullptr);
  checker.issue(HbmCommand{500, HbmCmd::kRef, 3, 0, 0, 0, 0});
  EXPECT_EQ(trace.str(),
            "120 ACT 3 1 2 0x1a3 -\n"
            "134 RD 3 1 2 - 0x1f\n"
            "140 WR 3 1 2 - 0x0\n"
            "166 PRE 3 1 2 - -\n"
            "180 REF 3 - - - -\n");
}

// A scheduler written apart from the checker's table: the rules as JEDEC states them pairwise,
// plus tFAW and tRFC, each command placed at the earliest cycle they allow. Random banks, rows
// and commands; REFs postponed by a random 1..7 tREFI, the open banks precharged first; REFSBs
// to random banks not yet refreshed in their set (an open one precharged first), sometimes
// straight after a REF, before one, or to the same bank again first in the next set. It
// counts, per rule, the commands it placed exactly at that rule's minimum.
class LegalScheduler {
 public:
  LegalScheduler(const HbmTiming& t, uint64_t seed) : t_(t), rng_(seed), open_(t.banks(), false) {
    const int wde = t.cwl + t.burst_cycles;
    window_ = std::max({t.trcd, t.tras, t.trc, t.trp, wde + t.twr, t.trtp, t.tccd_s, t.tccd_l,
                        t.trrd_s, t.trrd_l, wde + t.twtr_s, wde + t.twtr_l, t.tfaw, t.trfcsb,
                        t.trrefd}) +
              1;
    plan_refresh(0);
  }

  HbmCommand next() {
    HbmCommand c = choose();
    c.cycle = earliest(c);
    if (c.cmd == HbmCmd::kAct) open_[index(c)] = true;
    if (c.cmd == HbmCmd::kPre) open_[index(c)] = false;
    if (c.cmd == HbmCmd::kAct) acts_.push_back(c.cycle);
    if (c.cmd == HbmCmd::kRef) {
      last_ref_ = c;
      plan_refresh(c.cycle);
      const int r = static_cast<int>(rng_() % 8);
      pull_in_ref_ = r < 2;      // sometimes a second REF straight after
      refsb_after_ref_ = r == 2;  // or a REFSB
      in_set_ = 0;
      set_size_ = 0;
    }
    if (c.cmd == HbmCmd::kRefSb) {
      in_set_ |= 1u << index(c);
      if (++set_size_ == t_.banks()) {
        in_set_ = 0;
        set_size_ = 0;
        if (rng_() % 2 == 0) again_ = index(c);  // the same bank first in the next set
      }
    }
    history_.push_back(c);
    return c;
  }
  uint64_t last_cycle() const { return history_.back().cycle; }
  // "tRCD ACT->RD" -> commands placed exactly tRCD after their ACT.
  const std::map<std::string, int>& at_minimum() const { return at_minimum_; }

 private:
  struct Bound {
    std::string rule;  // "tRCD ACT->RD"
    uint64_t cycle;
  };

  int index(const HbmCommand& c) const { return c.bg * t_.banks_per_group + c.bank; }

  void plan_refresh(uint64_t from) {
    refresh_due_ = from + (1 + rng_() % 7) * static_cast<uint64_t>(t_.trefi);
  }

  // A REFSB to bank i (a PRE first if it is open; the REFSB follows it).
  HbmCommand refresh_bank(int i) {
    const int bg = i / t_.banks_per_group, bank = i % t_.banks_per_group;
    if (open_[i]) {
      refsb_next_ = i;
      return pre(0, bg, bank);
    }
    return refsb(0, bg, bank);
  }
  // A random bank this set has not refreshed.
  int unrefreshed_bank() {
    int i = static_cast<int>(rng_() % t_.banks());
    while (in_set_ & (1u << i)) i = (i + 1) % t_.banks();
    return i;
  }

  HbmCommand choose() {
    if (pull_in_ref_) {
      pull_in_ref_ = false;
      return ref(0);
    }
    if (refsb_next_ >= 0) {
      const int i = refsb_next_;
      refsb_next_ = -1;
      return refresh_bank(i);
    }
    if (again_ >= 0) {
      const int i = again_;
      again_ = -1;
      return refresh_bank(i);
    }
    if (refsb_after_ref_) {
      refsb_after_ref_ = false;
      return refresh_bank(unrefreshed_bank());
    }
    if (!history_.empty() && history_.back().cycle >= refresh_due_) {
      for (int i = 0; i < t_.banks(); ++i) {
        if (open_[i]) return pre(0, i / t_.banks_per_group, i % t_.banks_per_group);
      }
      // Sometimes a REFSB just before the REF.
      if (history_.back().cmd != HbmCmd::kRefSb && rng_() % 2 == 0) {
        return refresh_bank(unrefreshed_bank());
      }
      return ref(0);
    }
    if (rng_() % 100 < 5) return refresh_bank(unrefreshed_bank());
    const int i = static_cast<int>(rng_() % t_.banks());
    const int bg = i / t_.banks_per_group, bank = i % t_.banks_per_group;
    const uint32_t col = static_cast<uint32_t>(rng_() % t_.columns_per_row());
    if (!open_[i]) return act(0, bg, bank, static_cast<uint32_t>(rng_() % 16384));
    const int r = static_cast<int>(rng_() % 100);
    if (r < 45) return rd(0, bg, bank, col);
    if (r < 85) return wr(0, bg, bank, col);
    return pre(0, bg, bank);
  }

  // Every minimum spacing from `p` to `n`.
  void pair_bounds(const HbmCommand& p, const HbmCommand& n, std::vector<Bound>* out) const {
    using K = HbmCmd;
    auto add = [&](const char* rule, int gap) {
      out->push_back(
          {std::string(rule) + " " + to_string(p.cmd) + "->" + to_string(n.cmd), p.cycle + gap});
    };
    if (p.cmd == K::kRef) {
      if (n.cmd == K::kAct || n.cmd == K::kRef || n.cmd == K::kRefSb) add("tRFC", t_.trfc);
      return;
    }
    if (n.cmd == K::kRef) {
      if (p.cmd == K::kPre) add("tRP", t_.trp);
      if (p.cmd == K::kRefSb) add("tRFCSB", t_.trfcsb);
      return;
    }
    const bool same_bg = p.bg == n.bg;
    const bool same_bank = same_bg && p.bank == n.bank;
    const int wde = t_.cwl + t_.burst_cycles;
    // A REFSB: the refreshed bank is busy tRFCSB; any bank waits tRREFD for ACT or REFSB.
    if (p.cmd == K::kRefSb && (n.cmd == K::kAct || n.cmd == K::kRefSb)) {
      add("tRREFD", t_.trrefd);
      if (same_bank) add("tRFCSB", t_.trfcsb);
    }
    // Before a REFSB: its bank precharged (tRP) and tRC after its last ACT; tRRD after any ACT.
    if (n.cmd == K::kRefSb) {
      if (same_bank && p.cmd == K::kPre) add("tRP", t_.trp);
      if (same_bank && p.cmd == K::kAct) add("tRC", t_.trc);
      if (p.cmd == K::kAct) same_bg ? add("tRRD_L", t_.trrd_l) : add("tRRD_S", t_.trrd_s);
      return;
    }
    if (same_bank) {
      if (p.cmd == K::kAct && (n.cmd == K::kRd || n.cmd == K::kWr)) add("tRCD", t_.trcd);
      if (p.cmd == K::kAct && n.cmd == K::kPre) add("tRAS", t_.tras);
      if (p.cmd == K::kAct && n.cmd == K::kAct) add("tRC", t_.trc);
      if (p.cmd == K::kPre && n.cmd == K::kAct) add("tRP", t_.trp);
      if (p.cmd == K::kWr && n.cmd == K::kPre) add("tWR", wde + t_.twr);
      if (p.cmd == K::kRd && n.cmd == K::kPre) add("tRTP", t_.trtp);
    }
    if (p.cmd == n.cmd && (p.cmd == K::kRd || p.cmd == K::kWr)) {
      same_bg ? add("tCCD_L", t_.tccd_l) : add("tCCD_S", t_.tccd_s);
    }
    if (p.cmd == K::kAct && n.cmd == K::kAct) {
      same_bg ? add("tRRD_L", t_.trrd_l) : add("tRRD_S", t_.trrd_s);
    }
    if (p.cmd == K::kWr && n.cmd == K::kRd) {
      same_bg ? add("tWTR_L", wde + t_.twtr_l) : add("tWTR_S", wde + t_.twtr_s);
    }
  }

  uint64_t earliest(const HbmCommand& c) {
    const uint64_t lo = history_.empty() ? 0 : history_.back().cycle + 1;
    std::vector<Bound> bounds;
    for (auto it = history_.rbegin(); it != history_.rend() && it->cycle + window_ > lo; ++it) {
      pair_bounds(*it, c, &bounds);
    }
    if (last_ref_) pair_bounds(*last_ref_, c, &bounds);
    if (c.cmd == HbmCmd::kAct && acts_.size() >= 4) {
      bounds.push_back({"tFAW ACT->ACT", acts_[acts_.size() - 4] + t_.tfaw});
    }
    uint64_t at = lo;
    for (const Bound& b : bounds) at = std::max(at, b.cycle);
    for (const Bound& b : bounds) {
      if (b.cycle == at) ++at_minimum_[b.rule];
    }
    return at;
  }

  HbmTiming t_;
  std::mt19937_64 rng_;
  std::vector<bool> open_;
  std::vector<HbmCommand> history_;
  std::vector<uint64_t> acts_;
  std::optional<HbmCommand> last_ref_;
  uint64_t refresh_due_ = 0;
  int window_ = 0;
  bool pull_in_ref_ = false;
  bool refsb_after_ref_ = false;
  int refsb_next_ = -1;  // a bank just precharged for its REFSB
  int again_ = -1;       // the last bank of a set, to refresh first in the next
  uint32_t in_set_ = 0;  // banks this set of REFSBs has refreshed
  int set_size_ = 0;
  std::map<std::string, int> at_minimum_;
};

TEST(HbmTimingChecker, LegalSequenceAtMinimumSpacingPasses) {
  const uint64_t seed = test::test_seed();
  for (const NamedTiming& nt : timings()) {
    SCOPED_TRACE(nt.label);
    HbmTimingChecker checker(nt.timing);
    LegalScheduler scheduler(nt.timing, seed);
    int counts[kHbmCmdCount] = {};
    for (int i = 0; i < 40000; ++i) {
      const HbmCommand c = scheduler.next();
      try {
        checker.issue(c);
      } catch (const HbmTimingViolation& v) {
        FAIL() << "command " << i << " of a legal sequence rejected: " << v.what();
      }
      ++counts[static_cast<int>(c.cmd)];
    }
    EXPECT_NO_THROW(checker.finish(scheduler.last_cycle() + 1));
    for (int k = 0; k < kHbmCmdCount; ++k) {
      EXPECT_GE(counts[k], 3) << to_string(static_cast<HbmCmd>(k)) << " hardly exercised";
    }
    // The run put commands exactly at every rule's minimum (the checker's table names the
    // rules; the scheduler found the minima on its own).
    for (const HbmSpacingRule& r : HbmTimingChecker::spacing_rules()) {
      const std::string key =
          std::string(r.name) + " " + to_string(r.from) + "->" + to_string(r.to);
      EXPECT_GT(scheduler.at_minimum().count(key), 0u) << key << " never placed at its minimum";
    }
  }
}

}  // namespace
}  // namespace tessera::hbm
