// Waveforms of a user's program and training step (docs/testing.md, "Waveforms"): the real
// binaries run from the repository root. The translate filter's text against the host's IEEE
// decoding and the assembler; `tessera run` and `tessera train` dump exactly the window asked
// for, with the chip layout beside the dump naming only signals the dump holds.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "harness/waves/wave_layout.h"
#include "tessera/asm.h"

namespace {

const std::string kBin = TESSERA_BIN_DIR;
namespace fs = std::filesystem;

std::string tmp_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("tessera_waves_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

// Runs the filter in `mode` over `lines`; its answers, one per line.
std::vector<std::string> filter(const std::string& mode, const std::vector<std::string>& lines) {
  // one directory per test and call: ctest runs the tests of this file at once
  static int calls = 0;
  const std::string dir = tmp_dir("filter_" + mode + "_" +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name() +
                                  "_" + std::to_string(calls++));
  {
    std::ofstream in(dir + "/in.txt");
    for (const auto& l : lines) in << l << "\n";
  }
  const std::string cmd =
      kBin + "/tessera-wave-" + mode + " < " + dir + "/in.txt > " + dir + "/out.txt";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream out(dir + "/out.txt");
  std::vector<std::string> got;
  for (std::string l; std::getline(out, l);) got.push_back(l);
  return got;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// Runs a shell command with its output in DIR/log.txt; the exit status and that output.
std::pair<int, std::string> run_logged(const std::string& cmd, const std::string& dir) {
  const int rc = std::system((cmd + " > " + dir + "/log.txt 2>&1").c_str());
  return {WEXITSTATUS(rc), read_text(dir + "/log.txt")};
}

std::string hex(uint64_t v, int digits) {
  char b[40];
  std::snprintf(b, sizeof b, "%0*llX", digits, static_cast<unsigned long long>(v));
  return b;
}

float host_float(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t host_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
// The host float rounded to bf16 (nearest, ties to even); NaN stays NaN.
uint16_t to_bf16(float f) {
  const uint32_t b = host_bits(f);
  return static_cast<uint16_t>((b + 0x7FFF + ((b >> 16) & 1)) >> 16);
}

// The text must name the value the host's IEEE type holds for the word.
void expect_names(const std::string& text, float host, const std::string& what) {
  if (std::isnan(host)) {
    EXPECT_EQ(text, "nan") << what;
  } else if (std::isinf(host)) {
    EXPECT_EQ(text, host < 0 ? "-inf" : "inf") << what;
  }
}

TEST(WaveFilter, EveryBf16WordReadsBackAsItself) {
  std::vector<std::string> in;
  for (uint32_t w = 0; w < 65536; ++w) in.push_back(hex(w, 4));
  const auto out = filter("bf16", in);
  ASSERT_EQ(out.size(), in.size());
  for (uint32_t w = 0; w < 65536; ++w) {
    const float host = host_float(w << 16);
    const std::string what = "bf16 0x" + hex(w, 4) + " -> '" + out[w] + "'";
    expect_names(out[w], host, what);
    if (std::isnan(host) || std::isinf(host)) continue;
    const float back = std::strtof(out[w].c_str(), nullptr);
    EXPECT_EQ(to_bf16(back), w) << what;
    EXPECT_EQ(std::signbit(back), std::signbit(host)) << what;
    EXPECT_LE(out[w].size(), 13u) << what << ": the fewest digits, not a long expansion";
  }
}

TEST(WaveFilter, Fp32WordsReadBackAsThemselves) {
  std::vector<uint32_t> words = {0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                                 0xFFC00001, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                                 0x3F800000, 0x3DCCCCCD, 0xBE000000, 0x40400000};
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) words.push_back(static_cast<uint32_t>(rng()));
  std::vector<std::string> in;
  for (uint32_t w : words) in.push_back(hex(w, 8));
  const auto out = filter("fp32", in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < words.size(); ++i) {
    const float host = host_float(words[i]);
    const std::string what = "fp32 0x" + hex(words[i], 8) + " -> '" + out[i] + "'";
    expect_names(out[i], host, what);
    if (std::isnan(host) || std::isinf(host)) continue;
    EXPECT_EQ(host_bits(std::strtof(out[i].c_str(), nullptr)), words[i]) << what;
  }
  // the chip's canonical NaN and a few exact values, as a person reads them
  EXPECT_EQ(filter("fp32", {"3F800000", "BE000000", "40400000", "00000000", "80000000"}),
            (std::vector<std::string>{"1", "-0.125", "3", "0", "-0"}));
}

TEST(WaveFilter, PackedLanesReadLaneZeroFirst) {
  // a 64-bit bus of four bf16 lanes: lane 0 in bits 15:0
  EXPECT_EQ(filter("bf16", {"7FC0"
                            "4040"
                            "BE00"
                            "3F80",
                            "3F80"}),
            (std::vector<std::string>{"1 | -0.125 | 3 | nan", "1"}));
  EXPECT_EQ(filter("fp32", {"BE0000003F800000"}), (std::vector<std::string>{"1 | -0.125"}));
  // x/z digits are shown as they came
  EXPECT_EQ(filter("bf16", {"3F8x"}), (std::vector<std::string>{"3F8x"}));
}

TEST(WaveFilter, InstructionsReadAsTheirAssembly) {
  const std::vector<std::string> source = {"nop", "halt", "vpu.li v2, 0x3f800000, 0x0",
                                           "signal dma, sc0", "vpu.op max, v2, v1, v0, v0"};
  std::string text;
  for (const auto& s : source) text += s + "\n";
  const auto a = tessera::assembler::assemble(text);
  ASSERT_TRUE(a.ok()) << (a.errors.empty() ? "" : a.errors[0].reason);
  const auto w = a.words();
  std::vector<std::string> in;
  std::string three;  // three units' instructions on one 384-bit bus: unit 0 lowest
  for (size_t i = 0; i < source.size(); ++i) {
    std::string h;
    for (int k = 3; k >= 0; --k) h += hex(w[4 * i + k], 8);
    in.push_back(h);
    if (i < 3) three = h + three;
  }
  in.push_back(three);
  const auto out = filter("insn", in);
  ASSERT_EQ(out.size(), in.size());
  for (size_t i = 0; i < source.size(); ++i)
    EXPECT_EQ(out[i], tessera::assembler::disassemble(a.instructions[i])) << source[i];
  EXPECT_EQ(out.back(), out[0] + " | " + out[1] + " | " + out[2]);
  EXPECT_EQ(out[0], "nop");
}

TEST(WaveFilter, CountersAsDecimal) {
  EXPECT_EQ(filter("u32", {"0000000500000000FFFFFFFF"}),
            (std::vector<std::string>{"4294967295 | 0 | 5"}));
}

TEST(WaveFilter, HbmCommandsByName) {
  EXPECT_EQ(filter("hbmcmd", {"0", "1", "2", "3", "4", "5", "6"}),
            (std::vector<std::string>{"-", "ACT", "RD", "WR", "PRE", "REF", "REFSB"}));
}

// A small program on the rtl chip (N = 4): DMA, MXU and VPU all run.
const char* kProgram =
    "dma.loop src, 0, 8, 4, 1, 0\n"
    "dma.loop dst, 0, 8, 4, 1, 0\n"
    "dma.copy hbm, ub, 4, 0x1000, 0x0\n"
    "signal dma, sc0\n"
    "wait vpu, sc0, 1\n"
    "vpu.ld f32, v1, 0x0\n"
    "vpu.op max, v2, v1, v0, v0\n"
    "vpu.st f32, v2, 0x100\n"
    "halt\n";

TEST(Waves, RunDumpsTheWindowAskedForWithTheChipLayout) {
  const std::string dir = tmp_dir("run");
  const std::string prog = dir + "/p.s", fst = dir + "/p.fst";
  std::ofstream(prog) << kProgram;
  const auto [rc, text] =
      run_logged(kBin + "/tessera run " + prog + " --backend rtl --array 4 --waves " + fst +
                     " --from 5 --to 40",
                 dir);
  ASSERT_EQ(rc, 0) << text;
  const tessera::waves::FstInfo info = tessera::waves::read_fst(fst);
  EXPECT_EQ(info.start, 5500u) << "the first dumped time: cycle 5's inputs (ns = cycles)";
  EXPECT_LE(info.end, 40000u);
  EXPECT_GE(info.end, 30000u);
  EXPECT_TRUE(fs::exists(dir + "/p.gtkw")) << text;
  EXPECT_NE(text.find("make waves RUN="), std::string::npos) << text;
  // every signal the chip layout names is in the dump (GTKWave would drop it silently)
  const auto r = tessera::waves::write_layout(fst, tessera::waves::chip_layout_path(),
                                              dir + "/check.gtkw", kBin);
  for (const auto& m : r.missing) ADD_FAILURE() << "waves/chip.gtkw names " << m;
  // the layout opens on the dump's window with its filters
  const std::string lt = read_text(dir + "/p.gtkw");
  EXPECT_NE(lt.find("[timestart] 5500"), std::string::npos) << lt.substr(0, 300);
  EXPECT_NE(lt.find("tessera-wave-insn"), std::string::npos);
  EXPECT_NE(lt.find("tessera-wave-hbmcmd"), std::string::npos);
  EXPECT_NE(lt.find("[color] 1\nTOP.tpu_top.u_dma."), std::string::npos) << "DMA traces in red";
}

TEST(Waves, FunctionalBackendAndBadWindowsAreRefused) {
  const std::string dir = tmp_dir("refuse");
  const std::string prog = dir + "/p.s";
  std::ofstream(prog) << kProgram;
  const std::string base = kBin + "/tessera run " + prog + " --waves " + dir + "/x.fst";
  EXPECT_EQ(WEXITSTATUS(std::system((base + " --backend functional 2>/dev/null").c_str())), 2);
  EXPECT_EQ(WEXITSTATUS(std::system(
                (base + " --backend rtl --array 4 --from 50 --to 10 2>/dev/null").c_str())),
            2);
  EXPECT_FALSE(fs::exists(dir + "/x.fst"));
}

TEST(Waves, TrainingStepOfAnyModelDumpsOneStep) {
  const std::string dir = tmp_dir("train");
  const std::string fst = dir + "/step.fst";
  const std::string train = kBin + "/tessera train --model " + std::string(TESSERA_SOURCE_DIR) +
                            "/examples/models/mlp.json --backend rtl --array 4 --batch 8 "
                            "--steps 2 --no-progress --eval-samples 16 --out " +
                            dir;
  const auto [rc, text] =
      run_logged(train + "/run --waves " + fst + " --waves-step 1 --to 3000", dir);
  ASSERT_EQ(rc, 0) << text;
  const tessera::waves::FstInfo info = tessera::waves::read_fst(fst);
  EXPECT_EQ(info.start, 500u) << "cycle 0's inputs";
  EXPECT_EQ(info.end, 3000000u) << "cycles 0 to 3000 of step 1";
  EXPECT_TRUE(fs::exists(dir + "/step.gtkw"));
  // a step that is not trained is refused before anything runs
  EXPECT_EQ(run_logged(train + "/run2 --waves " + dir + "/bad.fst --waves-step 5", dir).first, 2);
  EXPECT_FALSE(fs::exists(dir + "/bad.fst"));
}

}  // namespace
