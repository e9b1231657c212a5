// `tessera hbm-replay`: the trace parser (every malformed-line case reported with its line
// number, comments and blank lines counted), then the real binary: writes followed by reads of
// the same addresses (every read checked by the scoreboard) with --json, a streaming-read trace
// on 2 pseudo-channels near peak, the command trace, and the exit codes for malformed traces,
// missing files and unsupported options.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sw/tools/hbm_replay.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;
using tools::HbmTraceParseResult;
using tools::parse_hbm_trace;

HbmTraceParseResult parse(const std::string& text, int channels = 1, int request_bytes = 32) {
  std::istringstream in(text);
  return parse_hbm_trace(in, channels, request_bytes);
}

// The one error a trace should produce: its line and a part of its reason.
void expect_error(const std::string& text, int line, const std::string& reason, int channels = 1,
                  int request_bytes = 32) {
  const auto r = parse(text, channels, request_bytes);
  ASSERT_EQ(r.errors.size(), 1u) << text;
  EXPECT_EQ(r.errors[0].line, line) << text << "\n" << r.errors[0].reason;
  EXPECT_NE(r.errors[0].reason.find(reason), std::string::npos)
      << "reason '" << r.errors[0].reason << "' lacks '" << reason << "'";
}

// A number after "key": in a one-line JSON object (NaN if the key is missing or not a number).
double json_number(const std::string& json, const std::string& key) {
  const std::string k = "\"" + key + "\":";
  const size_t at = json.find(k);
  if (at == std::string::npos) return std::nan("");
  const char* p = json.c_str() + at + k.size();
  char* end = nullptr;
  const double v = std::strtod(p, &end);
  return end == p ? std::nan("") : v;
}

TEST(HbmTraceParser, ReadsDramsim3Lines) {
  const auto r = parse(
      "# address command cycle\n"
      "\n"
      "0x1f40 READ 0\n"
      "  1f60 WRITE 0\n"
      "0X40 read 7\n"
      "   # indented comment\n"
      "0x0000000000000080 write 7\n");
  ASSERT_TRUE(r.errors.empty()) << r.errors[0].reason;
  ASSERT_EQ(r.requests.size(), 4u);
  EXPECT_EQ(r.requests[0].line, 3);
  EXPECT_EQ(r.requests[0].addr, 0x1f40u);
  EXPECT_FALSE(r.requests[0].write);
  EXPECT_EQ(r.requests[1].addr, 0x1f60u);
  EXPECT_TRUE(r.requests[1].write);
  EXPECT_EQ(r.requests[2].addr, 0x40u);
  EXPECT_EQ(r.requests[2].cycle, 7u);
  EXPECT_EQ(r.requests[3].line, 7);
  EXPECT_EQ(r.requests[3].addr, 0x80u);
  EXPECT_TRUE(r.requests[3].write);
}

TEST(HbmTraceParser, EachMalformedLineNamesItsLine) {
  const std::string ok = "# header\n\n0x0 READ 0\n";  // line 4 is the next one
  expect_error(ok + "0xzz READ 1\n", 4, "'0xzz' is not hexadecimal");
  expect_error(ok + "0x REA 1\n", 4, "'0x' is not hexadecimal");
  expect_error(ok + "0x20 FETCH 1\n", 4, "unknown command 'FETCH'");
  expect_error(ok + "0x20 READ\n", 4, "expected 3 fields");
  expect_error(ok + "0x20 READ 1 extra\n", 4, "got 4");
  expect_error(ok + "0x20 READ -3\n", 4, "cycle '-3' is negative");
  expect_error(ok + "0x20 READ 1x\n", 4, "cycle '1x' is not a decimal number");
  expect_error(ok + "0x20 READ 12.5\n", 4, "not a decimal number");
  expect_error(ok + "0x20 READ 99999999999999999999999\n", 4, "too large");
  expect_error(ok + "0x20 READ 100000001\n", 4, "beyond the replay limit");
  expect_error(ok + "0x20 READ 5\n0x40 READ 4\n", 5, "cycle 4 is before cycle 5 of line 4");
  expect_error(ok + "0x30 READ 1\n", 4, "not aligned to the request size (32 bytes)");
  expect_error(ok + "0x20 READ 1\n", 4, "not aligned to the request size (64 bytes)", 1, 64);
  expect_error(ok + "0x10000000 WRITE 1\n", 4, "beyond the memory's capacity");
  expect_error(ok + "0x1ffffffe0 WRITE 1\n", 4, "beyond the memory's capacity", 4);
  expect_error(ok + "0x10000000000000000 READ 1\n", 4, "does not fit in 64 bits");
  // The last burst of the last pseudo-channel is in range; 2 channels double the capacity.
  EXPECT_TRUE(parse("0xfffffe0 READ 0\n").errors.empty());
  EXPECT_TRUE(parse("0x1fffffe0 READ 0\n", 2).errors.empty());
  EXPECT_TRUE(parse("0x1ffffe00 READ 0\n", 2, 512).errors.empty());
}

TEST(HbmTraceParser, ReportsEveryMalformedLine) {
  const auto r = parse("0x0 READ 0\nbad\n0x20 READ 1\n0x40 NOP 2\n0x60 READ 0\n");
  ASSERT_EQ(r.errors.size(), 3u);
  EXPECT_EQ(r.errors[0].line, 2);
  EXPECT_EQ(r.errors[1].line, 4);
  EXPECT_EQ(r.errors[2].line, 5);  // before line 3's cycle 1
  EXPECT_EQ(r.requests.size(), 2u);
}

class HbmReplayCli : public ::testing::Test {
 protected:
  HbmReplayCli() {
    dir_ = fs::temp_directory_path() / ("tessera_hbm_replay_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  ~HbmReplayCli() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const auto p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  }
  std::string slurp(const std::string& name) {
    std::ifstream in(dir_ / name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Runs the binary; stdout and stderr land in out_ and err_. Returns the exit status.
  int tessera(const std::string& args) {
    const std::string bin = std::string(TESSERA_BIN_DIR) + "/tessera";
    const std::string cmd = bin + " hbm-replay " + args + " >" + (dir_ / "out").string() + " 2>" +
                            (dir_ / "err").string();
    const int st = std::system(cmd.c_str());
    out_ = slurp("out");
    err_ = slurp("err");
    return WEXITSTATUS(st);
  }
  fs::path dir_;
  std::string out_, err_;
};

// Writes to 256 addresses spread over rows, banks and channels, then reads of each of them
// later in the trace: every read must return its write's data.
TEST_F(HbmReplayCli, WritesThenReadsCheckedWithJson) {
  for (int channels : {1, 2}) {
    std::ostringstream t;
    t << "# writes, then reads of the same addresses\n";
    const int n = 256;
    for (int i = 0; i < n; ++i)
      t << "0x" << std::hex << (i * 0x2460 % 0x400000) << std::dec << " WRITE " << i / 4 << "\n";
    for (int i = 0; i < n; ++i)
      t << std::hex << (i * 0x2460 % 0x400000) << std::dec << " READ " << 100 + i << "\n";
    const std::string trace = write("wr" + std::to_string(channels) + ".trc", t.str());
    ASSERT_EQ(tessera(trace + " --json --channels " + std::to_string(channels)), 0) << out_ << err_;
    EXPECT_EQ(out_.find('{'), 0u) << out_;
    EXPECT_EQ(std::count(out_.begin(), out_.end(), '{'), 1) << out_;
    EXPECT_EQ(json_number(out_, "requests"), 2.0 * n) << out_;
    EXPECT_EQ(json_number(out_, "reads"), n) << out_;
    EXPECT_EQ(json_number(out_, "writes"), n) << out_;
    EXPECT_EQ(json_number(out_, "bytes"), 2.0 * n * 32) << out_;
    EXPECT_EQ(json_number(out_, "peak_gbps"), 16.0 * channels) << out_;
    const double pct = json_number(out_, "percent_of_peak");
    EXPECT_GT(pct, 0.0) << out_;
    EXPECT_LE(pct, 100.0) << out_;
    EXPECT_NEAR(json_number(out_, "bandwidth_gbps"), pct / 100 * 16 * channels, 0.01) << out_;
    EXPECT_GE(json_number(out_, "avg_read_latency_cycles"), 19.0) << out_;  // CL + 5
    EXPECT_GE(json_number(out_, "p99_read_latency_cycles"), 19.0) << out_;
    const double hit = json_number(out_, "row_hit_rate");
    EXPECT_GE(hit, 0.0) << out_;
    EXPECT_LE(hit, 1.0) << out_;
    EXPECT_GE(json_number(out_, "refresh_cycles"), 0.0) << out_;
    std::cout << out_;
  }
}

// 16,384 sequential 32-byte reads on 2 pseudo-channels, all at cycle 0: at least 85 % of
// 32 GB/s with refresh included; row hits 15 of every 16 column commands at best.
TEST_F(HbmReplayCli, StreamingReadsNearPeakOnTwoChannels) {
  std::ostringstream t;
  for (int i = 0; i < 16384; ++i) t << "0x" << std::hex << 32 * i << " READ 0\n";
  const std::string trace = write("stream.trc", t.str());
  ASSERT_EQ(tessera(trace + " --channels 2 --json"), 0) << out_ << err_;
  std::cout << out_;
  EXPECT_EQ(json_number(out_, "requests"), 16384.0);
  EXPECT_GE(json_number(out_, "percent_of_peak"), 85.0) << out_;
  EXPECT_GT(json_number(out_, "refresh_cycles"), 0.0) << out_;
  EXPECT_GT(json_number(out_, "row_hit_rate"), 0.9) << out_;
}

// Human report, multi-burst requests, not_before spacing and the command trace.
TEST_F(HbmReplayCli, HumanReportAndCommandTrace) {
  std::ostringstream t;
  for (int i = 0; i < 8; ++i)
    t << "0x" << std::hex << 128 * i << std::dec << " READ " << 200 * i << "\n";
  const std::string trace = write("spaced.trc", t.str());
  const std::string cmds = (dir_ / "cmds.txt").string();
  ASSERT_EQ(tessera(trace + " --request-bytes 128 --cmd-trace " + cmds), 0) << out_ << err_;
  EXPECT_NE(out_.find("requests: 8 (8 reads, 0 writes)"), std::string::npos) << out_;
  EXPECT_NE(out_.find("bytes: 1024"), std::string::npos) << out_;
  EXPECT_NE(out_.find("peak: 16.0 GB/s"), std::string::npos) << out_;
  EXPECT_NE(out_.find("read latency p99:"), std::string::npos) << out_;
  // The last request is presented at cycle 1400, the first is accepted at cycle 0.
  const size_t at = out_.find("\ncycles: ");
  ASSERT_NE(at, std::string::npos) << out_;
  const uint64_t cycles = std::strtoull(out_.c_str() + at + 9, nullptr, 10);
  EXPECT_GT(cycles, 1400u + 19u) << out_;
  EXPECT_LT(cycles, 1500u) << out_;
  std::ifstream in(cmds);
  int rd = 0, act = 0, lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    std::istringstream w(line);
    std::vector<std::string> f;
    for (std::string x; w >> x;) f.push_back(x);
    ASSERT_EQ(f.size(), 7u) << line;
    rd += f[1] == "RD";
    act += f[1] == "ACT";
  }
  EXPECT_EQ(rd, 32);  // 8 requests x 4 bursts
  EXPECT_GE(act, 4);
}

TEST_F(HbmReplayCli, MalformedTraceExitsTwoWithLine) {
  const std::string trace = write("bad.trc", "# ok\n0x0 READ 0\n0x20 READ 5\n0x40 READ 4\n");
  EXPECT_EQ(tessera(trace + " --json"), 2);
  EXPECT_NE(err_.find(trace + ":4: "), std::string::npos) << err_;
  EXPECT_EQ(out_, "");  // nothing simulated, nothing reported
  EXPECT_EQ(tessera(write("bad2.trc", "0x20 WRITE 0\n0x1f READ 1\n")), 2);
  EXPECT_NE(err_.find(":2: address 0x1f is not aligned"), std::string::npos) << err_;
}

TEST_F(HbmReplayCli, MissingFileAndBadOptionsExitTwo) {
  const std::string missing = (dir_ / "nope.trc").string();
  EXPECT_EQ(tessera(missing), 2);
  EXPECT_NE(err_.find("cannot open trace " + missing), std::string::npos) << err_;
  const std::string trace = write("one.trc", "0x0 READ 0\n");
  EXPECT_EQ(tessera(trace + " --channels 3"), 2);
  EXPECT_NE(err_.find("1, 2, 4, 8 or 16"), std::string::npos) << err_;
  EXPECT_EQ(tessera(trace + " --request-bytes 48"), 2);
  EXPECT_NE(err_.find("multiple of 32 up to 512"), std::string::npos) << err_;
  EXPECT_EQ(tessera(trace + " --request-bytes 1024"), 2);
}

}  // namespace
}  // namespace tessera
