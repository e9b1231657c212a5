// `tessera run` and the driver behind it (sw/driver): the same assembled program on the rtl and
// functional backends leaves the same bytes in HBM (dumped to files) and the same exact counters
// (instructions, MACs); a chip fault exits 1 naming the cause, the PC and the cycle; the
// watchdog exits 3 saying where decode stood and what each unit was doing; an assembler error
// exits 2 with file:line:column; bad --load / --dump arguments exit 2. Also the driver's own
// interface: allocation, unaligned host writes merged into whole bursts, unsupported rtl
// configurations refused with the supported one named.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>

#include "tessera/driver.h"
#include "tests/common/test_util.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class RunCli : public ::testing::Test {
 protected:
  RunCli() : dir_(fs::temp_directory_path() / ("tessera_run_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
  }
  ~RunCli() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(path(name), std::ios::binary) << text;
  }
  std::string slurp(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  // Runs tessera with `args`; returns the exit status, stdout+stderr in `output`.
  int tessera(const std::string& args, std::string& output) {
    const std::string bin = std::string(TESSERA_BIN_DIR) + "/tessera";
    const int st = std::system((bin + " " + args + " > " + path("out.txt") + " 2>&1").c_str());
    output = slurp("out.txt");
    return WEXITSTATUS(st);
  }
  fs::path dir_;
};

// A matmul + relu: DMA in, MXU, VPU max with 0, DMA out.
const char* kMatmulRelu = R"(
dma.loop  src, 0, 24, 2, 1, 0
dma.loop  dst, 0, 24, 2, 1, 0
dma.copy  hbm, ub, 2, 0x10000, 0x0
dma.loop  src, 0, 16, 2, 1, 0
dma.loop  dst, 0, 16, 2, 1, 0
dma.copy  hbm, ub, 2, 0x11000, 0x100
signal    dma, sc0
wait      mxu, sc0, 1
mxu.ldw   0x100, 8
mxu.mm    set, 0x0, 8, 6, 0
signal    mxu, sc1
wait      vpu, sc1, 1
vpu.ld    acc, v1, 0
vpu.op    max, v2, v1, v0, v0
vpu.st    f32, v2, 0x200
vpu.ld    acc, v1, 5
vpu.st    f32, v1, 0x210
signal    vpu, sc2
wait      dma, sc2, 1
dma.loop  src, 0, 8, 4, 1, 0
dma.loop  dst, 0, 8, 4, 1, 0
dma.copy  ub, hbm, 4, 0x200, 0x12000
halt
)";

TEST_F(RunCli, BothBackendsLeaveTheSameBytesAndCounters) {
  std::mt19937 rng(static_cast<uint32_t>(test::test_seed()));
  std::string a, w;
  for (int i = 0; i < 48; ++i) a += static_cast<char>(i % 2 ? 0x3F + rng() % 2 : rng() % 256);
  for (int i = 0; i < 32; ++i) w += static_cast<char>(i % 2 ? 0xBF - rng() % 2 * 0x80 : rng() % 256);
  write("a.bin", a);
  write("w.bin", w);
  write("mm.s", kMatmulRelu);
  std::string out[2];
  const char* backends[] = {"functional", "rtl"};
  for (int b = 0; b < 2; ++b) {
    const int st = tessera(std::string("run ") + path("mm.s") + " --backend " + backends[b] +
                               " --load 0x10000=" + path("a.bin") + " --load 0x11000=" +
                               path("w.bin") + " --dump 0x12000:32=" + path(std::string(backends[b]) + ".out"),
                           out[b]);
    EXPECT_EQ(st, 0) << out[b];
    EXPECT_NE(out[b].find("instructions 23"), std::string::npos) << out[b];
    EXPECT_NE(out[b].find("macs 96"), std::string::npos) << out[b];
  }
  EXPECT_NE(out[1].find("halted (rtl backend) after"), std::string::npos) << out[1];
  const std::string f = slurp("functional.out"), r = slurp("rtl.out");
  EXPECT_EQ(f.size(), 32u);
  EXPECT_EQ(f, r) << "the rtl and functional backends disagree";
  EXPECT_NE(f, std::string(32, '\0')) << "nothing was computed";
}

TEST_F(RunCli, FaultTimeoutAndBadInputExitCodes) {
  std::string out;
  write("deadlock.s", "nop\nwait vpu, sc0, 1\nhalt\n");
  EXPECT_EQ(tessera("run " + path("deadlock.s") + " --backend rtl", out), 1);
  EXPECT_NE(out.find("SYNC_DEADLOCK at pc 0xf000010"), std::string::npos) << out;
  EXPECT_NE(out.find("at cycle "), std::string::npos) << out;
  EXPECT_EQ(tessera("run " + path("deadlock.s") + " --backend functional", out), 1);
  EXPECT_NE(out.find("SYNC_DEADLOCK at pc 0xf000010"), std::string::npos) << out;

  write("forever.s", "nop\n");  // then zeros: NOPs until the watchdog
  EXPECT_EQ(tessera("run " + path("forever.s") + " --backend rtl --timeout 3000", out), 3);
  EXPECT_NE(out.find("no HALT after 3000 cycles; decode at pc 0x"), std::string::npos) << out;
  EXPECT_NE(out.find("DMA: idle"), std::string::npos) << out;

  write("bad.s", "nop\nvpu.ld f33, v1, 0\n");
  EXPECT_EQ(tessera("run " + path("bad.s"), out), 2);
  EXPECT_NE(out.find("bad.s:2:8:"), std::string::npos) << out;
  write("ok.s", "halt\n");
  EXPECT_EQ(tessera("run " + path("ok.s") + " --load nonsense", out), 2);
  EXPECT_NE(out.find("expected ADDR=FILE"), std::string::npos) << out;
  EXPECT_EQ(tessera("run " + path("ok.s") + " --dump 0x0=x", out), 2);
  EXPECT_NE(out.find("expected ADDR:BYTES=FILE"), std::string::npos) << out;
  write("odd.bin", std::string(17, '\0'));
  EXPECT_EQ(tessera("run " + path("odd.bin"), out), 2);
  EXPECT_NE(out.find("16-byte instructions"), std::string::npos) << out;
}

TEST(Driver, AllocationAndUnalignedWrites) {
  driver::DeviceConfig c;
  auto dev = driver::Device::open(c);
  const uint64_t a = dev->alloc(100), b = dev->alloc(10);
  EXPECT_EQ(a % 32, 0u);
  EXPECT_GE(b, a + 100);
  dev->free(a);
  EXPECT_EQ(dev->alloc(64), a) << "first fit reuses the freed block";
  EXPECT_THROW(dev->free(12345), std::invalid_argument);
  c.backend = driver::Backend::kRtl;
  auto rtl = driver::Device::open(c);
  rtl->write(0x1003, {1, 2, 3, 4, 5});  // inside one burst: merged with what HBM holds
  rtl->write(0x101E, {9, 9, 9, 9});     // across two bursts
  const auto got = rtl->read(0x1000, 40);
  EXPECT_EQ(got[3], 1);
  EXPECT_EQ(got[7], 5);
  EXPECT_EQ(got[0x1E], 9);
  EXPECT_EQ(got[0x21], 9);
  EXPECT_EQ(got[8], 0);
  c.n = 8;
  EXPECT_THROW(driver::Device::open(c), std::invalid_argument);
}

}  // namespace
}  // namespace tessera
