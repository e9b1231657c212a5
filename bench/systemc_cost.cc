// The SystemC platform's cost against the plain harness (make bench BENCH_ONLY=systemc,
// scripts/bench_systemc.sh). One measurement per process (the SystemC kernel cannot restart):
//   systemc_cost HARNESS WORK N [BATCH [ARITH]]
//     HARNESS: plain (ChipSim, the rtl backend) | lt | at (the platform, driver on TLM)
//     WORK:    idle  — 200 000 cycles of the idle chip (the clock and the HBM refresh run);
//              step  — one compiled training step of the example CNN (batch BATCH), the run only;
//                      ARITH (plain only): rtl (default) or host, the chip's host-arithmetic build
// Prints one JSON object: chip cycles of the work, wall seconds, chip cycles per wall second.
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "sim/systemc/chip_core.h"
#include "sim/systemc/platform.h"
#include "tessera/driver.h"
#include "tests/common/train_step_run.h"

namespace {

using namespace tessera;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kIdleCycles = 200'000;

driver::DeviceConfig chip_config(int n) {
  for (auto c : driver::rtl_configurations())
    if (c.n == n) {
      c.backend = driver::Backend::kRtl;
      return c;
    }
  throw std::invalid_argument("N must be 4 or 16");
}

struct Measured {
  uint64_t cycles = 0;
  double wall = 0;
};

// One training step (tests/common/train_step_run.h): compiled and its state written first, the
// run alone timed.
Measured train_step(driver::Device& dev, uint32_t batch) {
  const test::TrainStepRun r = test::run_train_step(dev, batch, 1, 1);
  return {r.report.cycles, r.run_seconds};
}

}  // namespace

int sc_main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s plain|lt|at idle|step N [BATCH [rtl|host]]\n", argv[0]);
    return 2;
  }
  const std::string harness = argv[1], work = argv[2];
  const int n = std::atoi(argv[3]);
  const uint32_t batch = argc > 4 ? static_cast<uint32_t>(std::atoi(argv[4])) : 4;
  if (work != "idle" && work != "step") {
    std::fprintf(stderr, "unknown work '%s' (idle or step)\n", work.c_str());
    return 2;
  }
  try {
    driver::DeviceConfig cfg = chip_config(n);
    if (argc > 5) cfg.arith = driver::parse_arith(argv[5]);
    if (cfg.arith == driver::Arith::kHost && (harness != "plain" || work != "step"))
      throw std::invalid_argument("the host-arithmetic build is measured by 'plain step' only");
    Measured m;
    if (harness == "plain") {
      if (work == "idle") {
        auto core = systemc::ChipCore::make(cfg);
        const auto t0 = Clock::now();
        for (uint64_t i = 0; i < kIdleCycles; ++i) core->step();
        m = {kIdleCycles, std::chrono::duration<double>(Clock::now() - t0).count()};
      } else {
        m = train_step(*driver::Device::open(cfg), batch);
      }
    } else {
      systemc::ChipConfig pc;
      pc.device = cfg;
      pc.mode = systemc::parse_timing_mode(harness);
      systemc::run_platform(pc, [&](driver::Device& dev) {
        if (work == "idle") {
          const auto t0 = Clock::now();
          sc_core::wait(pc.clock_period * static_cast<double>(kIdleCycles));
          m = {kIdleCycles, std::chrono::duration<double>(Clock::now() - t0).count()};
        } else {
          m = train_step(dev, batch);
        }
      });
    }
    std::printf(
        "{\"harness\": \"%s\", \"work\": \"%s\", \"n\": %d, \"batch\": %u, \"cycles\": %llu, "
        "\"wall_seconds\": %.4f, \"cycles_per_second\": %.0f}\n",
        harness.c_str(), work.c_str(), n, work == "step" ? batch : 0,
        static_cast<unsigned long long>(m.cycles), m.wall, m.cycles / m.wall);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "systemc_cost: %s\n", e.what());
    return 1;
  }
  return 0;
}
