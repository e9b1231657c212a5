// One compiled training step of the example CNN on any driver::Device (rtl, functional, or the
// SystemC platform's TlmDevice): compile for the device's chip, load the program, write glorot
// weights (init_seed) and zero Adam state, write one random batch (data_seed), run, read back the
// training state and the metrics. Shared by the SystemC tests and bench/systemc_cost.cc.
#pragma once

#include <chrono>
#include <random>
#include <vector>

#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tests/common/example_cnn.h"

namespace tessera::test {

struct TrainStepRun {
  driver::RunReport report;
  double run_seconds = 0;               // wall time of Device::run alone
  std::vector<uint8_t> state, metrics;  // HBM: the state range (weights .. constants); metrics
};

inline TrainStepRun run_train_step(driver::Device& dev, uint32_t batch, uint32_t init_seed,
                                   uint32_t data_seed) {
  const compiler::DenseStackSpec spec = example_cnn_spec();
  const auto& c = dev.config();
  const tessera::ChipShape chip{c.n, c.ub_bytes, c.acc_rows};
  const uint64_t base = dev.alloc(compiler::DenseStackStep::data_bytes(spec, chip, batch));
  compiler::DenseStackStep step(spec, compiler::OptimizerSpec{}, chip, batch, base);
  const uint64_t prog = dev.load_program(step.program_bytes());
  for (const auto& w :
       step.state_image(compiler::glorot_init(spec, init_seed), compiler::zero_opt_state(spec)))
    dev.write(w.first, w.second);
  std::mt19937 rng(data_seed);
  std::vector<uint16_t> img(size_t{batch} * 784);
  std::vector<uint8_t> lbl(batch);
  for (auto& v : img) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
  for (auto& v : lbl) v = static_cast<uint8_t>(rng() % 10);
  for (const auto& w : step.batch_image(img, lbl)) dev.write(w.first, w.second);
  TrainStepRun r;
  const auto t0 = std::chrono::steady_clock::now();
  r.report = dev.run(prog, 1'000'000'000);
  r.run_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto [lo, bytes] = step.state_range();
  r.state = dev.read(lo, bytes);
  r.metrics = dev.read(step.layout().metrics, 2 * c.n * 4);
  return r;
}

}  // namespace tessera::test
