// The SystemC/TLM-2.0 platform (sim/systemc) against the plain C++ harness. Programs and one
// compiled training step run through the platform — the host driver on its TLM transport, the
// verilated chip as an SC_MODULE behind TLM target sockets — and leave HBM, the training state,
// the fault reports and every PERF counter (the chip's cycle count included) bit-identical to
// the rtl backend on ChipSim, in the loosely-timed and the approximately-timed mode. Bad
// transactions get the standard TLM error responses with a logged reason and change nothing.
// Each test runs in its own process (the SystemC kernel cannot restart): systemc_test_main.cc.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <sstream>

#include "sim/systemc/platform.h"
#include "sim/systemc/tessera_chip.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/asm.h"
#include "tessera/compiler.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tests/common/test_util.h"
#include "tests/common/train_step_run.h"

namespace tessera {
namespace {

using systemc::TimingMode;

driver::DeviceConfig chip_config(int n) {
  for (const auto& c : driver::rtl_configurations())
    if (c.n == n) return c;
  throw std::invalid_argument("no rtl configuration at N = " + std::to_string(n));
}

systemc::ChipConfig platform_config(int n, TimingMode mode) {
  systemc::ChipConfig c;
  c.device = chip_config(n);
  c.mode = mode;
  c.wave_name = test::current_test_name();
  return c;
}

std::string mode_name(const ::testing::TestParamInfo<TimingMode>& info) {
  return info.param == TimingMode::kLooselyTimed ? "LooselyTimed" : "ApproximatelyTimed";
}

// ---------------------------------------------------------------------------------------------
// Programs (N = 4): each loads its inputs, runs, and the test compares all of HBM it touches.

struct ProgramCase {
  std::string name, text;
  std::vector<std::pair<uint64_t, std::vector<uint8_t>>> inputs;
};

constexpr uint64_t kRegionBegin = 0x10000, kRegionEnd = 0x22000;  // every program's data

std::vector<uint8_t> random_bf16(std::mt19937_64& rng, size_t count) {
  std::vector<uint8_t> b(2 * count);
  for (size_t i = 0; i < count; ++i) {
    const float f = static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 500.0f;
    const uint16_t h = fp::fp32_to_bf16(fp::bits(f));
    std::memcpy(&b[2 * i], &h, 2);
  }
  return b;
}

std::vector<ProgramCase> programs(std::mt19937_64& rng) {
  std::vector<ProgramCase> p;
  // A (8 x 4 bf16) x W (4 x 4 bf16), relu on the VPU, fp32 result to HBM 0x13000.
  p.push_back({"matmul_relu",
               "dma.loop src, 0, 32, 2, 1, 0\ndma.loop dst, 0, 32, 2, 1, 0\n"
               "dma.copy hbm, ub, 2, 0x10000, 0x0\n"
               "dma.loop src, 0, 16, 2, 1, 0\ndma.loop dst, 0, 16, 2, 1, 0\n"
               "dma.copy hbm, ub, 2, 0x11000, 0x100\n"
               "signal dma, sc0\nwait mxu, sc0, 1\n"
               "mxu.ldw 0x100, 8\nmxu.mm set, 0x0, 8, 8, 0\n"
               "signal mxu, sc1\nwait vpu, sc1, 1\n"
               "vpu.ld acc, v1, 0\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x400\n"
               "vpu.ld acc, v1, 1\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x410\n"
               "vpu.ld acc, v1, 2\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x420\n"
               "vpu.ld acc, v1, 3\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x430\n"
               "vpu.ld acc, v1, 4\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x440\n"
               "vpu.ld acc, v1, 5\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x450\n"
               "vpu.ld acc, v1, 6\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x460\n"
               "vpu.ld acc, v1, 7\nvpu.op max, v2, v1, v0, v0\nvpu.st f32, v2, 0x470\n"
               "signal vpu, sc2\nwait dma, sc2, 1\n"
               "dma.loop src, 0, 32, 4, 1, 0\ndma.loop dst, 0, 32, 4, 1, 0\n"
               "dma.copy ub, hbm, 4, 0x400, 0x13000\nhalt\n",
               {{0x10000, random_bf16(rng, 32)}, {0x11000, random_bf16(rng, 16)}}});
  // A 16 x 16 bf16 matrix transposed by the DMA's source walk (column by column) into the UB,
  // then back to HBM 0x21000.
  p.push_back({"dma_transpose",
               "dma.loop src, 0, 16, 32, 16, 2\ndma.loop dst, 0, 256, 2, 1, 0\n"
               "dma.copy hbm, ub, 2, 0x20000, 0x0\n"
               "signal dma, sc0\nwait dma, sc0, 1\n"
               "dma.loop src, 0, 256, 2, 1, 0\ndma.loop dst, 0, 256, 2, 1, 0\n"
               "dma.copy ub, hbm, 2, 0x0, 0x21000\nhalt\n",
               {{0x20000, random_bf16(rng, 256)}}});
  // A constant from the VPU's immediate, stored and copied out.
  p.push_back({"vpu_store",
               "vpu.li v1, 5\nvpu.st f32, v1, 0x0\nsignal vpu, sc0\nwait dma, sc0, 1\n"
               "dma.loop src, 0, 4, 4, 1, 0\ndma.loop dst, 0, 4, 4, 1, 0\n"
               "dma.copy ub, hbm, 4, 0x0, 0x15000\nhalt\n",
               {}});
  return p;
}

// What one device gives for the whole sequence: per program, the run report (or the fault /
// timeout text) and HBM's data region afterwards.
struct ProgramsOutcome {
  std::vector<driver::RunReport> reports;
  std::vector<std::vector<uint8_t>> memory;
  std::string fault, timeout;
  uint32_t fault_code = 0, fault_pc = 0;
  uint64_t fault_cycle = 0;
};

std::vector<uint8_t> assemble(const std::string& text) {
  const auto a = assembler::assemble(text, {4});
  if (!a.ok()) throw std::runtime_error(assembler::format_error("program", a.errors[0]));
  return a.bytes();
}

ProgramsOutcome run_programs(driver::Device& dev, const std::vector<ProgramCase>& cases) {
  ProgramsOutcome o;
  for (const ProgramCase& c : cases) {
    for (const auto& [addr, bytes] : c.inputs) dev.write(addr, bytes);
    const uint64_t prog = dev.load_program(assemble(c.text));
    o.reports.push_back(dev.run(prog, 1'000'000));
    o.memory.push_back(dev.read(kRegionBegin, kRegionEnd - kRegionBegin));
  }
  // A UB range fault (UB is 8 KiB at N = 4) after two instructions.
  try {
    dev.run(
        dev.load_program(assemble("vpu.li v1, 1\nvpu.li v2, 2\nvpu.st f32, v1, 0x4000\nhalt\n")),
        1'000'000);
  } catch (const driver::DeviceFault& f) {
    o.fault = f.what();
    o.fault_code = f.code;
    o.fault_pc = f.pc;
    o.fault_cycle = f.cycle;
  }
  // A copy far longer than its watchdog: a DeviceTimeout saying where the chip stands.
  try {
    dev.run(dev.load_program(assemble("dma.loop src, 0, 60000, 2, 1, 0\n"
                                      "dma.loop dst, 0, 60000, 0, 1, 0\n"
                                      "dma.copy hbm, ub, 2, 0x10000, 0x0\nhalt\n")),
            3000);
  } catch (const driver::DeviceTimeout& t) {
    o.timeout = t.what();
  }
  return o;
}

class PlatformPrograms : public ::testing::TestWithParam<TimingMode> {};

TEST_P(PlatformPrograms, BitIdenticalToThePlainHarness) {
  std::mt19937_64 rng(test::test_seed());
  const std::vector<ProgramCase> cases = programs(rng);
  driver::DeviceConfig cfg = chip_config(4);
  cfg.backend = driver::Backend::kRtl;
  const ProgramsOutcome plain = run_programs(*driver::Device::open(cfg), cases);
  ProgramsOutcome tlm;
  const auto run = systemc::run_platform(
      platform_config(4, GetParam()), [&](driver::Device& dev) { tlm = run_programs(dev, cases); });
  ASSERT_EQ(tlm.reports.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].name);
    EXPECT_GT(plain.reports[i].cycles, 0u);
    EXPECT_EQ(tlm.reports[i].cycles, plain.reports[i].cycles);
    for (int k = 0; k < driver::kPerfCounters; ++k)
      EXPECT_EQ(tlm.reports[i].perf[k], plain.reports[i].perf[k]) << "PERF[" << k << "]";
    const auto& a = tlm.memory[i];
    const auto& b = plain.memory[i];
    size_t d = 0;
    while (d < a.size() && a[d] == b[d]) ++d;
    EXPECT_EQ(d, a.size()) << "HBM differs at 0x" << std::hex << kRegionBegin + d;
    std::printf("%-14s %6llu cycles on both\n", cases[i].name.c_str(),
                static_cast<unsigned long long>(tlm.reports[i].cycles));
  }
  // The transpose is right (an independent check of what both harnesses agree on).
  const auto& mem = plain.memory[1];
  const auto& in = cases[1].inputs[0].second;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      ASSERT_EQ(
          std::memcmp(&mem[0x21000 - kRegionBegin + 2 * (16 * r + c)], &in[2 * (16 * c + r)], 2), 0)
          << r << "," << c;
  EXPECT_EQ(plain.fault_code, isa::FAULT_UB_RANGE);
  EXPECT_EQ(tlm.fault, plain.fault);
  EXPECT_EQ(tlm.fault_pc, plain.fault_pc);
  EXPECT_EQ(tlm.fault_cycle, plain.fault_cycle);
  EXPECT_NE(plain.timeout.find("no HALT after 3000 cycles"), std::string::npos) << plain.timeout;
  EXPECT_NE(tlm.timeout.find("no HALT after 3000 cycles"), std::string::npos) << tlm.timeout;
  EXPECT_NE(tlm.timeout.find("DMA: busy"), std::string::npos) << tlm.timeout;
  // Every run ended on the interrupt, not on its watchdog (1,000,000 cycles a program): the whole
  // sequence, doorbell alignments included, fits in far less SystemC time.
  EXPECT_LT(run.sim_time, sc_core::sc_time(200, sc_core::SC_US));
  std::printf("fault: %s\ntimeout: %s\n%s platform: %s of SystemC time, %llu chip cycles\n",
              tlm.fault.c_str(), tlm.timeout.c_str(), systemc::timing_mode_name(GetParam()),
              run.sim_time.to_string().c_str(), static_cast<unsigned long long>(run.chip_cycles));
}

INSTANTIATE_TEST_SUITE_P(Modes, PlatformPrograms,
                         ::testing::Values(TimingMode::kLooselyTimed,
                                           TimingMode::kApproximatelyTimed),
                         mode_name);

// ---------------------------------------------------------------------------------------------
// One training step of the example CNN (N = 4, batch 3), compiled once, run on both harnesses.

class PlatformTrainStep : public ::testing::TestWithParam<TimingMode> {};

TEST_P(PlatformTrainStep, WeightsOptimizerStateAndCyclesBitIdentical) {
  constexpr uint32_t kBatch = 3;
  driver::DeviceConfig cfg = chip_config(4);
  cfg.backend = driver::Backend::kRtl;
  const test::TrainStepRun plain = test::run_train_step(*driver::Device::open(cfg), kBatch, 5, 77);
  test::TrainStepRun tlm;
  systemc::run_platform(platform_config(4, GetParam()), [&](driver::Device& dev) {
    tlm = test::run_train_step(dev, kBatch, 5, 77);
  });
  EXPECT_GT(plain.report.cycles, 100000u);
  EXPECT_EQ(tlm.report.cycles, plain.report.cycles);
  for (int k = 0; k < driver::kPerfCounters; ++k)
    EXPECT_EQ(tlm.report.perf[k], plain.report.perf[k]) << "PERF[" << k << "]";
  ASSERT_EQ(tlm.state.size(), plain.state.size());
  size_t d = 0;
  while (d < plain.state.size() && tlm.state[d] == plain.state[d]) ++d;
  EXPECT_EQ(d, plain.state.size()) << "training state differs at byte " << d;
  EXPECT_EQ(tlm.metrics, plain.metrics);
  std::printf("training step (N = 4, batch %u): %llu cycles on both\n", kBatch,
              static_cast<unsigned long long>(tlm.report.cycles));
}

INSTANTIATE_TEST_SUITE_P(Modes, PlatformTrainStep,
                         ::testing::Values(TimingMode::kLooselyTimed,
                                           TimingMode::kApproximatelyTimed),
                         mode_name);

// ---------------------------------------------------------------------------------------------
// Bad transactions, from a raw initiator: each gets its error response and a logged reason;
// nothing in the chip changes; good transactions around them work (byte enables included).

// The chip on its own, for tests that drive its sockets with their own initiators: its
// interrupt signal, and (approximately timed) its clock with rising edges half a period in.
struct StandaloneChip {
  explicit StandaloneChip(const systemc::ChipConfig& cfg) : chip("chip", cfg), irq("irq") {
    chip.irq(irq);
    if (cfg.mode == TimingMode::kApproximatelyTimed) {
      clock = std::make_unique<sc_core::sc_clock>("clock", cfg.clock_period, 0.5,
                                                  cfg.clock_period / 2, true);
      chip.clk(*clock);
    }
  }
  systemc::TesseraChip chip;
  sc_core::sc_signal<bool> irq;
  std::unique_ptr<sc_core::sc_clock> clock;
};

struct Request {
  bool csr;
  tlm::tlm_command cmd;
  uint64_t addr;
  unsigned length;
  unsigned streaming_width;
  std::vector<uint8_t> byte_enables;
  tlm::tlm_response_status expect;
  std::string reason;          // a piece of the logged reason
  bool null_data = false;      // no data pointer at all
  bool empty_enables = false;  // a byte-enable pointer with length 0
};

class Prober : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<Prober> csr, hbm;
  std::function<void(Prober&)> body;
  explicit Prober(sc_core::sc_module_name n, std::function<void(Prober&)> b)
      : sc_module(n), csr("csr"), hbm("hbm"), body(std::move(b)) {
    SC_HAS_PROCESS(Prober);
    SC_THREAD(main);
  }
  // One blocking transaction issued at local time now + `at`; `done` (if given) gets the local
  // time it completed at (SystemC time plus the delay the target returned).
  tlm::tlm_response_status send(bool to_csr, tlm::tlm_command cmd, uint64_t addr, uint8_t* data,
                                unsigned length, unsigned streaming_width,
                                std::vector<uint8_t>* be = nullptr, bool empty_enables = false,
                                sc_core::sc_time at = sc_core::SC_ZERO_TIME,
                                sc_core::sc_time* done = nullptr) {
    tlm::tlm_generic_payload t;
    uint8_t dummy = 0xFF;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(data);
    t.set_data_length(length);
    t.set_streaming_width(streaming_width);
    t.set_byte_enable_ptr(empty_enables ? &dummy : (be && !be->empty() ? be->data() : nullptr));
    t.set_byte_enable_length(be && !empty_enables ? static_cast<unsigned>(be->size()) : 0);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time delay = at;
    (to_csr ? csr : hbm)->b_transport(t, delay);
    if (done) *done = sc_core::sc_time_stamp() + delay;
    sc_core::wait(delay);
    return t.get_response_status();
  }
  unsigned debug(tlm::tlm_command cmd, uint64_t addr, uint8_t* data, unsigned length) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(data);
    t.set_data_length(length);
    return hbm->transport_dbg(t);
  }

 private:
  void main() {
    body(*this);
    sc_core::sc_stop();
  }
};

class PlatformBadInput : public ::testing::TestWithParam<TimingMode> {};

TEST_P(PlatformBadInput, ErrorResponsesWithReasonsAndNothingChanges) {
  const systemc::ChipConfig cfg = platform_config(4, GetParam());
  StandaloneChip standalone(cfg);
  systemc::TesseraChip& chip = standalone.chip;
  const uint64_t hbm = chip.hbm_bytes();
  const std::vector<Request> bad = {
      {true,
       tlm::TLM_READ_COMMAND,
       0x100,
       4,
       4,
       {},
       tlm::TLM_ADDRESS_ERROR_RESPONSE,
       "outside the CSR map"},
      {true, tlm::TLM_READ_COMMAND, 0x40, 8, 8, {}, tlm::TLM_BURST_ERROR_RESPONSE, "32-bit"},
      {true, tlm::TLM_WRITE_COMMAND, 0x2E, 4, 4, {}, tlm::TLM_BURST_ERROR_RESPONSE, "aligned"},
      {true,
       tlm::TLM_WRITE_COMMAND,
       0x10,
       4,
       4,
       {0xFF, 0x00, 0xFF, 0xFF},
       tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE,
       "byte 1 disabled"},
      {true, tlm::TLM_READ_COMMAND, 0x00, 4, 2, {}, tlm::TLM_BURST_ERROR_RESPONSE, "streaming"},
      {false,
       tlm::TLM_WRITE_COMMAND,
       hbm - 16,
       32,
       32,
       {},
       tlm::TLM_ADDRESS_ERROR_RESPONSE,
       "outside HBM"},
      {false,
       tlm::TLM_READ_COMMAND,
       uint64_t{1} << 40,
       32,
       32,
       {},
       tlm::TLM_ADDRESS_ERROR_RESPONSE,
       "outside HBM"},
      {false, tlm::TLM_WRITE_COMMAND, 0x1000, 0, 0, {}, tlm::TLM_BURST_ERROR_RESPONSE, "no data"},
      {false,
       tlm::TLM_WRITE_COMMAND,
       0x1000,
       64,
       4,
       {},
       tlm::TLM_BURST_ERROR_RESPONSE,
       "streaming"},
      {true,
       tlm::TLM_READ_COMMAND,
       0xA8,
       4,
       4,
       {},
       tlm::TLM_ADDRESS_ERROR_RESPONSE,
       "outside the CSR map"},  // one past PERF[12]'s high word
      {false,
       tlm::TLM_WRITE_COMMAND,
       0x1000,
       8,
       8,
       {},
       tlm::TLM_BURST_ERROR_RESPONSE,
       "no data",
       true},
      {false,
       tlm::TLM_WRITE_COMMAND,
       0x1000,
       8,
       8,
       {},
       tlm::TLM_BYTE_ENABLE_ERROR_RESPONSE,
       "empty byte-enable",
       false,
       true},
  };
  std::vector<tlm::tlm_response_status> got;
  std::vector<uint8_t> before, after, expected, debug_read(70), masked_read;
  sc_core::sc_time annotated_done;
  uint32_t id = 0, prog_addr = 0;
  uint64_t cycles_at_start = 0;
  Prober prober("prober", [&](Prober& p) {
    cycles_at_start = chip.cycles();
    std::vector<uint8_t> pattern(64, 0xAA);
    EXPECT_EQ(p.send(false, tlm::TLM_WRITE_COMMAND, 0x1000, pattern.data(), 64, 64),
              tlm::TLM_OK_RESPONSE);
    uint32_t pa = 0x4560;
    EXPECT_EQ(p.send(true, tlm::TLM_WRITE_COMMAND, isa::CSR_PROG_ADDR,
                     reinterpret_cast<uint8_t*>(&pa), 4, 4),
              tlm::TLM_OK_RESPONSE);
    before.resize(70);
    p.send(false, tlm::TLM_READ_COMMAND, 0xFF8, before.data(), 70, 70);
    for (const Request& r : bad) {
      std::vector<uint8_t> data(std::max(r.length, 4u), 0x11), be = r.byte_enables;
      got.push_back(p.send(r.csr, r.cmd, r.addr, r.null_data ? nullptr : data.data(), r.length,
                           r.streaming_width, &be, r.empty_enables));
    }
    // The ignore command does nothing and is fine, on either socket; the last CSR word (PERF[12]
    // high) is in the map.
    uint8_t x[4] = {};
    EXPECT_EQ(p.send(false, tlm::TLM_IGNORE_COMMAND, 0x1000, x, 4, 4), tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(p.send(true, tlm::TLM_IGNORE_COMMAND, isa::CSR_DOORBELL, x, 4, 4),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(p.send(true, tlm::TLM_READ_COMMAND, 0xA4, x, 4, 4), tlm::TLM_OK_RESPONSE);
    // A transaction annotated 100 ns ahead is applied at that time: it completes within two
    // clock periods after it.
    const sc_core::sc_time t0 = sc_core::sc_time_stamp(), ahead(100, sc_core::SC_NS);
    EXPECT_EQ(p.send(true, tlm::TLM_READ_COMMAND, isa::CSR_ID, x, 4, 4, nullptr, false, ahead,
                     &annotated_done),
              tlm::TLM_OK_RESPONSE);
    annotated_done -= t0;
    // Byte enables on HBM: 40 bytes of 0x55 from an odd address, every other byte enabled.
    std::vector<uint8_t> fives(40, 0x55), be = {0xFF, 0x00};
    EXPECT_EQ(p.send(false, tlm::TLM_WRITE_COMMAND, 0x1003, fives.data(), 40, 40, &be),
              tlm::TLM_OK_RESPONSE);
    after.resize(70);
    EXPECT_EQ(p.send(false, tlm::TLM_READ_COMMAND, 0xFF8, after.data(), 70, 70),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(p.debug(tlm::TLM_READ_COMMAND, 0xFF8, debug_read.data(), 70), 70u);
    EXPECT_EQ(p.debug(tlm::TLM_READ_COMMAND, 0xFF8, nullptr, 70), 0u);  // no data: nothing done
    // A read with byte enables fills only the enabled bytes.
    masked_read.assign(16, 0x77);
    std::vector<uint8_t> every_other = {0xFF, 0x00};
    EXPECT_EQ(
        p.send(false, tlm::TLM_READ_COMMAND, 0x1000, masked_read.data(), 16, 16, &every_other),
        tlm::TLM_OK_RESPONSE);
    uint8_t buf[4];
    p.send(true, tlm::TLM_READ_COMMAND, isa::CSR_ID, buf, 4, 4);
    std::memcpy(&id, buf, 4);
    p.send(true, tlm::TLM_READ_COMMAND, isa::CSR_PROG_ADDR, buf, 4, 4);
    std::memcpy(&prog_addr, buf, 4);
  });
  prober.csr.bind(chip.csr_socket);
  prober.hbm.bind(chip.hbm_socket);
  sc_core::sc_start();

  ASSERT_EQ(got.size(), bad.size());
  ASSERT_EQ(chip.errors().size(), bad.size());
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(chip.errors()[i]);
    EXPECT_EQ(got[i], bad[i].expect) << "request " << i;
    EXPECT_NE(chip.errors()[i].find(bad[i].reason), std::string::npos);
  }
  // Nothing the bad requests aimed at changed: PROG_ADDR kept, HBM 0x1000.. still 0xAA where the
  // good masked write did not reach.
  EXPECT_EQ(id, isa::CSR_ID_VALUE);
  EXPECT_EQ(prog_addr, 0x4560u);
  expected = before;
  for (int i = 0; i < 40; i += 2) expected[0x1003 - 0xFF8 + i] = 0x55;
  EXPECT_EQ(after, expected);
  EXPECT_EQ(debug_read, after);
  for (int i = 0; i < 62; ++i) EXPECT_EQ(before[8 + i], 0xAA) << i;  // 0x1000 .. 0x103D
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(masked_read[i], i % 2 ? 0x77 : after[8 + i]) << "masked read, byte " << i;
  const sc_core::sc_time period = cfg.clock_period;
  // (AT: the CSR cycle runs on the first rising edge at or after the annotated time; LT: the
  // chip runs to the annotated time, then one cycle.)
  EXPECT_GE(annotated_done, sc_core::sc_time(100, sc_core::SC_NS)) << annotated_done;
  EXPECT_LE(annotated_done, sc_core::sc_time(100, sc_core::SC_NS) + 2 * period) << annotated_done;
  EXPECT_GT(chip.cycles(), cycles_at_start + 100);  // the chip ran while the prober worked
}

INSTANTIATE_TEST_SUITE_P(Modes, PlatformBadInput,
                         ::testing::Values(TimingMode::kLooselyTimed,
                                           TimingMode::kApproximatelyTimed),
                         mode_name);

// ---------------------------------------------------------------------------------------------
// Two initiators at once, one on each socket: a long HBM write and a stream of CSR accesses
// issued at the same SystemC time. Approximately timed, the module serializes them (one owns the
// RTL's host ports at a time): no CSR access completes while the write is in progress, and all
// of them complete correctly. Loosely timed, each runs to completion in its caller's thread.

class OneSocketInitiator : public sc_core::sc_module {
 public:
  tlm_utils::simple_initiator_socket<OneSocketInitiator> socket;
  std::function<void(OneSocketInitiator&)> body;
  OneSocketInitiator(sc_core::sc_module_name n, std::function<void(OneSocketInitiator&)> b)
      : sc_module(n), socket("socket"), body(std::move(b)) {
    SC_HAS_PROCESS(OneSocketInitiator);
    SC_THREAD(main);
  }
  // Returns the response; `begin` / `end`: SystemC time at the call and at completion.
  tlm::tlm_response_status access(tlm::tlm_command cmd, uint64_t addr, uint8_t* data,
                                  unsigned length, sc_core::sc_time& begin, sc_core::sc_time& end) {
    tlm::tlm_generic_payload t;
    t.set_command(cmd);
    t.set_address(addr);
    t.set_data_ptr(data);
    t.set_data_length(length);
    t.set_streaming_width(length);
    t.set_response_status(tlm::TLM_INCOMPLETE_RESPONSE);
    sc_core::sc_time delay = sc_core::SC_ZERO_TIME;
    begin = sc_core::sc_time_stamp();
    socket->b_transport(t, delay);
    sc_core::wait(delay);
    end = sc_core::sc_time_stamp();
    return t.get_response_status();
  }

 private:
  void main() { body(*this); }
};

class PlatformInitiators : public ::testing::TestWithParam<TimingMode> {};

TEST_P(PlatformInitiators, TwoInitiatorsAtOnceAreSerialized) {
  const systemc::ChipConfig cfg = platform_config(4, GetParam());
  StandaloneChip standalone(cfg);
  systemc::TesseraChip& chip = standalone.chip;
  std::mt19937 rng(test::test_seed());
  std::vector<uint8_t> pattern(4096), readback(4096);
  for (auto& x : pattern) x = static_cast<uint8_t>(rng());
  sc_core::sc_time w_begin, w_end, r_begin, r_end;
  struct Csr {
    sc_core::sc_time begin, end;
    tlm::tlm_response_status status;
    uint32_t value;
  };
  std::vector<Csr> csr;
  int finished = 0;
  OneSocketInitiator hbm_side("hbm_side", [&](OneSocketInitiator& i) {
    EXPECT_EQ(i.access(tlm::TLM_WRITE_COMMAND, 0x3000, pattern.data(), 4096, w_begin, w_end),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(i.access(tlm::TLM_READ_COMMAND, 0x3000, readback.data(), 4096, r_begin, r_end),
              tlm::TLM_OK_RESPONSE);
    if (++finished == 2) sc_core::sc_stop();
  });
  OneSocketInitiator csr_side("csr_side", [&](OneSocketInitiator& i) {
    for (int k = 0; k < 40; ++k) {
      Csr c;
      uint32_t v = k % 2 ? isa::CSR_ID : 0x5000 + 16 * k;
      const uint32_t addr = k % 2 ? isa::CSR_ID : isa::CSR_PROG_ADDR;
      c.status = i.access(k % 2 ? tlm::TLM_READ_COMMAND : tlm::TLM_WRITE_COMMAND,
                          k % 2 ? addr : isa::CSR_PROG_ADDR, reinterpret_cast<uint8_t*>(&v), 4,
                          c.begin, c.end);
      c.value = v;
      csr.push_back(c);
    }
    uint32_t prog = 0;
    sc_core::sc_time b, e;
    EXPECT_EQ(i.access(tlm::TLM_READ_COMMAND, isa::CSR_PROG_ADDR, reinterpret_cast<uint8_t*>(&prog),
                       4, b, e),
              tlm::TLM_OK_RESPONSE);
    EXPECT_EQ(prog, 0x5000u + 16 * 38);  // the last write
    if (++finished == 2) sc_core::sc_stop();
  });
  hbm_side.socket.bind(chip.hbm_socket);
  csr_side.socket.bind(chip.csr_socket);
  sc_core::sc_start();

  ASSERT_EQ(finished, 2) << "an initiator never finished (deadlock)";
  EXPECT_EQ(readback, pattern);
  ASSERT_EQ(csr.size(), 40u);
  for (size_t k = 0; k < csr.size(); ++k) {
    EXPECT_EQ(csr[k].status, tlm::TLM_OK_RESPONSE) << k;
    if (k % 2) EXPECT_EQ(csr[k].value, isa::CSR_ID_VALUE) << k;
  }
  EXPECT_TRUE(chip.errors().empty());
  if (GetParam() == TimingMode::kApproximatelyTimed) {
    // The write (128 bursts) takes well over 100 cycles; no CSR access ends inside it.
    EXPECT_GT(w_end - w_begin, 100 * cfg.clock_period);
    for (const Csr& c : csr)
      EXPECT_FALSE(c.end > w_begin + cfg.clock_period && c.end < w_end)
          << "a CSR access ended at " << c.end << " inside the HBM write " << w_begin << " .. "
          << w_end;
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, PlatformInitiators,
                         ::testing::Values(TimingMode::kLooselyTimed,
                                           TimingMode::kApproximatelyTimed),
                         mode_name);

}  // namespace
}  // namespace tessera
