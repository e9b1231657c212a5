// DenseStackStep on the cycle-accurate chip against the functional backend: for random legal
// Dense stacks (tests/common/dense_ref.h: 1 to 4 layers, widths, inputs and batch sizes that are
// not multiples of N, relu and linear layers, Adam or SGD with momentum) two training steps on
// the rtl chip leave the whole training state in HBM — fp32 weights, bf16 copies, moments,
// powers — and the metrics byte for byte as the functional backend does, and an evaluation
// step's probabilities likewise; the same for random convolutional networks
// (tests/common/dense_ref.h: Conv2D, MaxPool2D, AveragePooling2D before Flatten).
// TESSERA_DENSE_SWEEP sets how many architectures of each family run at N = 4 (default 20,
// `make soak` 200); at N = 16 a 784-64-10 MLP and a small two-conv network always run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tests/common/dense_ref.h"

namespace tessera {
namespace {

struct Outcome {
  std::vector<uint8_t> state[2], metrics[2], probs;
  uint64_t cycles = 0;
};

Outcome run(driver::Backend backend, int n, const test::Arch& a, const compiler::OptimizerSpec& opt,
            uint32_t seed) {
  driver::DeviceConfig cfg = driver::chip_for_array(n);
  cfg.backend = backend;
  auto dev = driver::Device::open(cfg);
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  const uint64_t base = dev->alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, a.batch));
  compiler::DenseStackStep step(a.spec, opt, chip, a.batch, base);
  const uint64_t eb = dev->alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, a.batch));
  compiler::DenseStackStep eval(a.spec, opt, chip, a.batch, eb, compiler::StepKind::kEvaluate,
                                &step.layout());
  const uint64_t prog = dev->load_program(step.program_bytes());
  const uint64_t eprog = dev->load_program(eval.program_bytes());
  for (const auto& w :
       step.state_image(compiler::glorot_init(a.spec, seed), compiler::zero_opt_state(a.spec)))
    dev->write(w.first, w.second);
  std::mt19937 rng(seed);
  Outcome o;
  for (int s = 0; s < 2; ++s) {
    std::vector<uint16_t> img(size_t{a.batch} * test::image_values(a.spec));
    std::vector<uint8_t> lbl(a.batch);
    for (auto& v : img) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
    for (auto& v : lbl) v = static_cast<uint8_t>(rng() % a.spec.classes());
    for (const auto& w : step.batch_image(img, lbl)) dev->write(w.first, w.second);
    o.cycles += dev->run(prog, 500'000'000).cycles;
    const auto [lo, bytes] = step.state_range();
    o.state[s] = dev->read(lo, bytes);
    o.metrics[s] = dev->read(step.layout().metrics, 2 * n * 4);
    if (s == 1) {
      for (const auto& w : eval.batch_image(img, lbl)) dev->write(w.first, w.second);
      dev->run(eprog, 500'000'000);
      o.probs = dev->read(eval.layout().probs,
                          size_t{eval.padded(a.batch)} * eval.padded(a.spec.classes()) * 4);
    }
  }
  return o;
}

void expect_identical(int n, const test::Arch& a, const compiler::OptimizerSpec& opt,
                      uint32_t seed) {
  const Outcome f = run(driver::Backend::kFunctional, n, a, opt, seed);
  const Outcome r = run(driver::Backend::kRtl, n, a, opt, seed);
  const std::string what = test::describe(a) +
                           (opt.kind == compiler::OptimizerSpec::Kind::kAdam ? " Adam" : " SGD") +
                           (opt.label_smoothing > 0 ? " label smoothing" : "");
  for (int s = 0; s < 2; ++s) {
    EXPECT_TRUE(r.state[s] == f.state[s]) << what << ": state after step " << s + 1;
    EXPECT_TRUE(r.metrics[s] == f.metrics[s]) << what << ": metrics of step " << s + 1;
  }
  EXPECT_TRUE(r.probs == f.probs) << what << ": evaluation probabilities";
  EXPECT_GT(r.cycles, 0u);
  // the step changed the weights (the comparison is of a trained state)
  EXPECT_FALSE(f.state[0] == f.state[1]) << what;
}

TEST(DenseStepRtl, RandomStacksBitIdenticalToFunctionalAtN4) {
  const char* env = std::getenv("TESSERA_DENSE_SWEEP");
  const int count = env ? std::atoi(env) : 20;
  std::mt19937 rng(25);
  for (int i = 0; i < count; ++i) {
    const test::Arch a = test::random_arch(rng);
    compiler::OptimizerSpec opt;
    if (i % 3 == 2) {
      opt.kind = compiler::OptimizerSpec::Kind::kSgd;
      opt.lr = 0.1f;
      opt.momentum = (i % 2) ? 0.9f : 0.0f;
    }
    if (i % 4 == 1) opt.label_smoothing = 0.1f;
    expect_identical(4, a, opt, 1000 + i);
  }
}

TEST(DenseStepRtl, RandomConvNetsBitIdenticalToFunctionalAtN4) {
  const char* env = std::getenv("TESSERA_DENSE_SWEEP");
  const int count = env ? std::atoi(env) : 20;
  std::mt19937 rng(52);
  for (int i = 0; i < count; ++i) {
    const test::Arch a = test::random_conv_arch(rng);
    compiler::OptimizerSpec opt;
    if (i % 3 == 2) {
      opt.kind = compiler::OptimizerSpec::Kind::kSgd;
      opt.lr = 0.1f;
      opt.momentum = (i % 2) ? 0.9f : 0.0f;
    }
    if (i % 4 == 1) opt.label_smoothing = 0.1f;
    expect_identical(4, a, opt, 2000 + i);
  }
}

TEST(DenseStepRtl, TwoConvNetBitIdenticalToFunctionalAtN16) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  test::Arch a;
  a.spec.input_shape = {14, 14, 1};
  a.spec.features = {{Kind::kConv, 16, 3, 1, false, true},
                     {Kind::kMaxPool, 0, 0, 0, false, false, 2},
                     {Kind::kConv, 32, 3, 1, false, true},
                     {Kind::kMaxPool, 0, 0, 0, false, false, 2}};
  a.spec.inputs = 2 * 2 * 32;
  a.spec.layers = {{32, true, 0.5f, 7}, {10, false}};
  a.batch = 4;
  expect_identical(16, a, {}, 6);
}

TEST(DenseStepRtl, MlpBitIdenticalToFunctionalAtN16) {
  test::Arch a;
  a.spec.inputs = 784;
  a.spec.layers = {{64, true}, {10, false}};
  a.batch = 8;
  expect_identical(16, a, {}, 5);
}

}  // namespace
}  // namespace tessera
