// The HBM2 device model (harness/hbm/hbm_device.h): data returned exactly CL cycles after RD
// and taken exactly CWL cycles after WR, bit for bit; every protocol error named with its
// cycle (missing or stray write data, data-bus collisions, out-of-range rows, timing rules
// through the checker); sparse storage spanning 4 GiB with 16 pseudo-channels.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <sstream>
#include <tuple>

#include "harness/hbm/hbm_device.h"
#include "tests/common/test_util.h"

namespace tessera::hbm {
namespace {

// Drives one pseudo-channel: commands at chosen cycles, write data when it is due, and
// collects every read beat with its cycle.
class Driver {
 public:
  explicit Driver(HbmChannelModel& ch) : ch_(ch) {}
  void at(uint64_t cycle, HbmCmd cmd, int bg, int bank, uint32_t row_or_col) {
    HbmPinsIn& p = pins_[cycle];
    p.cmd_valid = true;
    p.cmd = cmd;
    p.bg = bg;
    p.bank = bank;
    if (cmd == HbmCmd::kAct)
      p.row = row_or_col;
    else
      p.col = row_or_col;
  }
  void write_data(uint64_t cycle, const Burst& b) {
    for (int beat = 0; beat < 2; ++beat) {
      HbmPinsIn& p = pins_[cycle + beat];
      p.wdata_valid = true;
      std::copy_n(b.begin() + beat * kBeatBytes, kBeatBytes, p.wdata.begin());
    }
  }
  bool has_cmd(uint64_t cycle) const {
    const auto it = pins_.find(cycle);
    return it != pins_.end() && it->second.cmd_valid;
  }
  void run(uint64_t until) {
    for (uint64_t c = 0; c <= until; ++c) {
      const auto it = pins_.find(c);
      const HbmPinsOut out = ch_.step(c, it == pins_.end() ? HbmPinsIn{} : it->second);
      if (out.rdata_valid) beats[c] = out.rdata;
    }
  }
  std::map<uint64_t, Beat> beats;

 private:
  HbmChannelModel& ch_;
  std::map<uint64_t, HbmPinsIn> pins_;
};

Burst pattern(uint8_t seed) {
  Burst b;
  for (int i = 0; i < kBurstBytes; ++i) b[i] = static_cast<uint8_t>(seed * 7 + i);
  return b;
}

TEST(HbmDevice, WriteThenReadReturnsTheDataExactlyClAfterTheRead) {
  const HbmTiming t;
  HbmChannelModel ch(t);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 1, 2, 0x1a3);
  d.at(t.trcd, HbmCmd::kWr, 1, 2, 5);
  d.write_data(t.trcd + t.cwl, pattern(3));
  const uint64_t rd = t.trcd + t.write_data_end() + t.twtr_l;
  d.at(rd, HbmCmd::kRd, 1, 2, 5);
  d.run(rd + t.cl + 10);
  ASSERT_EQ(d.beats.size(), 2u);  // exactly two beats, at RD + CL and RD + CL + 1
  ASSERT_TRUE(d.beats.count(rd + t.cl));
  ASSERT_TRUE(d.beats.count(rd + t.cl + 1));
  const Burst want = pattern(3);
  for (int i = 0; i < kBurstBytes; ++i) {
    EXPECT_EQ(d.beats[rd + t.cl + i / kBeatBytes][i % kBeatBytes], want[i]) << "byte " << i;
  }
  EXPECT_EQ(ch.peek(1, 2, 0x1a3, 5), want);
  EXPECT_EQ(ch.reads_of_unwritten(), 0u);
  ch.finish(rd + t.cl + 10);
}

TEST(HbmDevice, RandomTrafficMatchesAScoreboard) {
  // Open-page traffic on all 16 banks, each access at its earliest legal cycle as the checker
  // would accept it (found by trying), reads compared with the last data written.
  const HbmTiming t;
  HbmChannelModel ch(t);
  std::mt19937_64 rng(test::test_seed());
  std::map<std::tuple<int, int, uint32_t, uint32_t>, Burst> written;
  std::map<uint64_t, Burst> expect_at;  // first beat cycle -> burst
  Driver d(ch);
  std::array<int64_t, 16> open_row;
  open_row.fill(-1);
  uint64_t cycle = 0;
  // A tiny checker-driven scheduler: try the command at successive cycles on a scratch copy.
  HbmTimingChecker probe(t);
  auto issue_at_earliest = [&](HbmCmd cmd, int bg, int bank, uint32_t row, uint32_t col) {
    for (uint64_t c = cycle + 1;; ++c) {
      if (d.has_cmd(c)) continue;
      HbmTimingChecker trial = probe;
      try {
        trial.issue({c, cmd, 0, bg, bank, row, col});
      } catch (const HbmTimingViolation&) {
        continue;
      }
      probe = trial;
      d.at(c, cmd, bg, bank, cmd == HbmCmd::kAct ? row : col);
      cycle = c;
      return c;
    }
  };
  for (int i = 0; i < 400; ++i) {
    const int bg = static_cast<int>(rng() % 4), bank = static_cast<int>(rng() % 4);
    const uint32_t row = static_cast<uint32_t>(rng() % 2), col = static_cast<uint32_t>(rng() % 4);
    const int b = bg * 4 + bank;
    if (open_row[b] != int64_t(row)) {
      if (open_row[b] >= 0) issue_at_earliest(HbmCmd::kPre, bg, bank, 0, 0);
      issue_at_earliest(HbmCmd::kAct, bg, bank, row, 0);
      open_row[b] = row;
    }
    const auto k = std::make_tuple(bg, bank, row, col);
    if (rng() % 2 || !written.count(k)) {
      // A write must not put data on the bus while read data is due: leave room after reads.
      const uint64_t c = issue_at_earliest(HbmCmd::kWr, bg, bank, row, col);
      Burst data = pattern(static_cast<uint8_t>(rng()));
      written[k] = data;
      d.write_data(c + t.cwl, data);
    } else {
      const uint64_t c = issue_at_earliest(HbmCmd::kRd, bg, bank, row, col);
      expect_at[c + t.cl] = written[k];
      cycle = c + t.cl;  // next command after this read's data (keeps the data bus free)
    }
  }
  const uint64_t end = cycle + t.cl + 8;
  d.run(end);
  ch.finish(end);
  const auto& beats = d.beats;
  ASSERT_EQ(beats.size(), 2 * expect_at.size());
  for (const auto& [c, burst] : expect_at) {
    for (int i = 0; i < kBurstBytes; ++i) {
      ASSERT_EQ(beats.at(c + i / kBeatBytes)[i % kBeatBytes], burst[i]) << "cycle " << c;
    }
  }
  EXPECT_GT(ch.bursts_read(), 50u);
  EXPECT_GT(ch.bursts_written(), 50u);
}

TEST(HbmDevice, MissingWriteDataIsAProtocolError) {
  const HbmTiming t;
  HbmChannelModel ch(t);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 0, 0, 1);
  d.at(t.trcd, HbmCmd::kWr, 0, 0, 0);
  try {
    d.run(t.trcd + t.cwl + 2);
    FAIL() << "no error";
  } catch (const HbmProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("cycle " + std::to_string(t.trcd + t.cwl)),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("write data expected"), std::string::npos) << e.what();
  }
}

TEST(HbmDevice, StrayWriteDataIsAProtocolError) {
  HbmChannelModel ch;
  Driver d(ch);
  d.write_data(7, pattern(1));
  EXPECT_THROW(d.run(10), HbmProtocolError);
}

TEST(HbmDevice, ReadAndWriteDataCollidingOnTheBusIsAnError) {
  // WR issued so that its data (WR + CWL) lands on the read's data (RD + CL).
  const HbmTiming t;
  HbmChannelModel ch(t);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 0, 0, 1);
  d.at(20, HbmCmd::kAct, 1, 0, 1);
  const uint64_t rd = 40, wr = rd + t.cl - t.cwl;
  d.at(rd, HbmCmd::kRd, 0, 0, 0);
  d.at(wr, HbmCmd::kWr, 1, 0, 0);
  d.write_data(wr + t.cwl, pattern(2));
  try {
    d.run(rd + t.cl + 4);
    FAIL() << "no error";
  } catch (const HbmProtocolError& e) {
    EXPECT_NE(std::string(e.what()).find("data bus together"), std::string::npos) << e.what();
  }
}

TEST(HbmDevice, TimingViolationsComeFromTheChecker) {
  const HbmTiming t;
  HbmChannelModel ch(t);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 0, 0, 1);
  d.at(t.trcd - 1, HbmCmd::kRd, 0, 0, 0);
  try {
    d.run(t.trcd + 2);
    FAIL() << "no violation";
  } catch (const HbmTimingViolation& e) {
    EXPECT_NE(std::string(e.what()).find("tRCD"), std::string::npos) << e.what();
  }
}

TEST(HbmDevice, RowOutOfRangeIsAnError) {
  HbmChannelModel ch(HbmTiming{}, 0, 1024);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 0, 0, 1024);
  EXPECT_THROW(d.run(1), HbmProtocolError);
}

TEST(HbmDevice, SixteenPseudoChannelsSpanFourGiBSparsely) {
  HbmDevice dev(16);
  EXPECT_EQ(dev.capacity_bytes(), 4ull << 30);
  dev.channel(15).poke(3, 3, 16383, 31, pattern(9));  // the very last burst
  dev.channel(0).poke(0, 0, 0, 0, pattern(4));        // the first
  EXPECT_EQ(dev.channel(15).peek(3, 3, 16383, 31), pattern(9));
  EXPECT_EQ(dev.channel(0).peek(0, 0, 0, 0), pattern(4));
  EXPECT_EQ(dev.channel(7).peek(1, 1, 100, 1), Burst{});  // never written: zeros
  EXPECT_EQ(dev.channel(15).stored_bursts() + dev.channel(0).stored_bursts(), 2u);
}

TEST(HbmDevice, ReadOfNeverWrittenDataIsCounted) {
  const HbmTiming t;
  HbmChannelModel ch(t);
  Driver d(ch);
  d.at(0, HbmCmd::kAct, 2, 1, 9);
  d.at(t.trcd, HbmCmd::kRd, 2, 1, 3);
  d.run(t.trcd + t.cl + 2);
  EXPECT_EQ(ch.reads_of_unwritten(), 1u);
  EXPECT_EQ(d.beats.at(t.trcd + t.cl), Beat{});
}

}  // namespace
}  // namespace tessera::hbm
