// The example CNN's compiled training step on the cycle-accurate chip against the functional model: after each
// of two steps (different batches) the whole training state in HBM — weights, bf16 copies, Adam
// moments, bias-correction powers — and the step's loss and accuracy are bit-identical between
// the rtl and functional backends (the design brief's contract: a race-free program means the
// same on both), at N = 4 and N = 16. And the RTL's cycle count does not depend on the data:
// both steps take exactly the same number of cycles.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tessera/isa_gen.h"
#include "tests/common/example_cnn.h"

namespace tessera {
namespace {

std::vector<uint8_t> dev_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
}

struct Case {
  int n;
  uint32_t batch;
};
class TrainStepRtl : public ::testing::TestWithParam<Case> {};

TEST_P(TrainStepRtl, TwoStepsBitIdenticalToFunctionalWithDataIndependentTiming) {
  const Case tc = GetParam();
  driver::DeviceConfig cfg;
  for (const auto& c : driver::rtl_configurations())
    if (c.n == tc.n && c.channels == 1) cfg = c;
  ASSERT_EQ(cfg.n, tc.n);
  const compiler::DenseStackSpec spec = test::example_cnn_spec();
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  std::unique_ptr<driver::Device> dev[2];
  std::unique_ptr<compiler::DenseStackStep> step[2];
  uint64_t prog[2];
  for (int b = 0; b < 2; ++b) {
    cfg.backend = b == 0 ? driver::Backend::kRtl : driver::Backend::kFunctional;
    dev[b] = driver::Device::open(cfg);
    const uint64_t base = dev[b]->alloc(compiler::DenseStackStep::data_bytes(spec, chip, tc.batch));
    step[b] = std::make_unique<compiler::DenseStackStep>(spec, compiler::OptimizerSpec{}, chip,
                                                         tc.batch, base);
    prog[b] = dev[b]->load_program(step[b]->program_bytes());
    for (const auto& w :
         step[b]->state_image(compiler::glorot_init(spec, 11), compiler::zero_opt_state(spec)))
      dev[b]->write(w.first, w.second);
  }
  ASSERT_EQ(step[0]->layout().base, step[1]->layout().base);
  std::mt19937 rng(tc.n * 100 + tc.batch);
  uint64_t cycles[2] = {0, 0};
  for (int s = 0; s < 2; ++s) {
    std::vector<uint16_t> img(size_t{tc.batch} * 784);
    std::vector<uint8_t> lbl(tc.batch);
    for (auto& v : img)
      v = fp::fp32_to_bf16([&] {
        const float f = static_cast<float>(rng() % 256) / 255.0f;
        uint32_t u;
        std::memcpy(&u, &f, 4);
        return u;
      }());
    for (auto& v : lbl) v = static_cast<uint8_t>(rng() % 10);
    driver::RunReport rep[2];
    for (int b = 0; b < 2; ++b) {
      for (const auto& w : step[b]->batch_image(img, lbl)) dev[b]->write(w.first, w.second);
      rep[b] = dev[b]->run(prog[b], 400'000'000);
    }
    cycles[s] = rep[0].cycles;
    // The compiler's HBM model against the chip's counters: the DMA's bursts (32 bytes a word
    // its walks touch) plus the program's stored bytes, fetched once (REPEAT bodies replay from
    // the fetch buffer), and at most a fetch buffer's worth read ahead past HALT.
    {
      const uint64_t measured = rep[0].perf[isa::PERF_HBM_RD] + rep[0].perf[isa::PERF_HBM_WR];
      const uint64_t model = step[0]->stats().hbm_bytes + step[0]->program_bytes().size();
      std::printf("N=%d batch %u: HBM bytes %llu measured, %llu modelled\n", tc.n, tc.batch,
                  static_cast<unsigned long long>(measured),
                  static_cast<unsigned long long>(model));
      EXPECT_GE(measured, model);
      EXPECT_LE(measured, model + 64 * isa::kInstructionBytes);
    }
    EXPECT_EQ(rep[0].perf[isa::PERF_MACS], rep[1].perf[isa::PERF_MACS]) << "MACs";
    EXPECT_EQ(rep[0].perf[isa::PERF_INSTRS], rep[1].perf[isa::PERF_INSTRS])
        << "instructions retired";
    // Everything the step writes that carries over: the state regions and the metrics.
    const compiler::DenseStackStep::Layout& L = step[0]->layout();
    const auto [state_begin, state_bytes] = step[0]->state_range();
    const uint64_t state_end = state_begin + state_bytes;
    const auto a = dev[0]->read(state_begin, state_end - state_begin);
    const auto f = dev[1]->read(state_begin, state_end - state_begin);
    size_t diff = 0;
    while (diff < a.size() && a[diff] == f[diff]) ++diff;
    EXPECT_EQ(diff, a.size()) << "step " << s << ": state differs at HBM 0x" << std::hex
                              << state_begin + diff;
    EXPECT_EQ(dev[0]->read(L.metrics, 2 * tc.n * 4), dev[1]->read(L.metrics, 2 * tc.n * 4));
    float loss = 0, correct = 0;
    step[0]->read_metrics(dev_read, dev[0].get(), loss, correct);
    EXPECT_GT(loss, 0.5f);
    EXPECT_LT(loss, 5.0f);
  }
  EXPECT_GT(cycles[0], 0u);
  EXPECT_EQ(cycles[0], cycles[1]) << "RTL step cycles depend on the data";
  std::printf("N=%d batch %u: %llu cycles per step\n", tc.n, tc.batch,
              static_cast<unsigned long long>(cycles[0]));
}

INSTANTIATE_TEST_SUITE_P(Chips, TrainStepRtl, ::testing::Values(Case{4, 3}, Case{16, 4}),
                         [](const auto& info) {
                           return "N" + std::to_string(info.param.n) + "_B" +
                                  std::to_string(info.param.batch);
                         });

}  // namespace
}  // namespace tessera
