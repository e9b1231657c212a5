// DenseStackStep on the cycle-accurate chip against the functional backend: for random legal
// Dense stacks (tests/common/dense_ref.h: 1 to 4 layers, widths, inputs and batch sizes that are
// not multiples of N, relu and linear layers, Adam or SGD with momentum) two training steps on
// the rtl chip leave the whole training state in HBM — fp32 weights, bf16 copies, moments,
// powers — and the metrics byte for byte as the functional backend does, and an evaluation
// step's probabilities likewise; the same for random convolutional networks
// (tests/common/dense_ref.h: Conv2D, MaxPool2D, AveragePooling2D before Flatten).
// Every other architecture of the sweeps trains data-parallel on a ring of two chips (rtl ring
// against the functional ring, every chip's state equal).
// TESSERA_DENSE_SWEEP sets how many architectures of each family run at N = 4 (default 20,
// `make soak` 200); at N = 16 a 784-64-10 MLP and a small two-conv network (on one chip and
// on two) always run.
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

// Two training steps of `a` (a.batch the global batch) on `chips` data-parallel replicas (a ring
// when chips > 1), then an evaluation step on chip 0. Every chip of the ring must hold the
// same bf16 weight copies and fp32 biases after each step (checked here); the outcome is every
// chip's state range and metrics.
Outcome run(driver::Backend backend, int n, const test::Arch& a, const compiler::OptimizerSpec& opt,
            uint32_t seed, int chips) {
  driver::DeviceConfig cfg = driver::chip_for_array(n);
  cfg.backend = backend;
  std::unique_ptr<driver::Device> one;
  std::unique_ptr<driver::Cluster> ring;
  if (chips == 1)
    one = driver::Device::open(cfg);
  else
    ring = driver::Cluster::open(cfg, chips);
  auto chip_dev = [&](int k) -> driver::Device& { return one ? *one : ring->chip(k); };
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  const uint32_t b = a.batch / static_cast<uint32_t>(chips);
  std::vector<std::unique_ptr<compiler::DenseStackStep>> steps;
  std::vector<uint64_t> progs;
  const compiler::DenseParams p0 = compiler::glorot_init(a.spec, seed);
  for (int k = 0; k < chips; ++k) {
    compiler::Replication rep;
    rep.replicas = chips;
    rep.rank = k;
    driver::Device& dev = chip_dev(k);
    const uint64_t base = dev.alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, b, rep));
    steps.push_back(std::make_unique<compiler::DenseStackStep>(
        a.spec, opt, chip, b, base, compiler::StepKind::kTrain, nullptr,
        compiler::DenseLoweringChoices{}, rep));
    progs.push_back(dev.load_program(steps.back()->program_bytes()));
    for (const auto& w : steps.back()->state_image(p0, compiler::zero_opt_state(a.spec)))
      dev.write(w.first, w.second);
  }
  driver::Device& dev0 = chip_dev(0);
  const compiler::DenseStackStep& step = *steps[0];
  const uint64_t eb = dev0.alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, b));
  compiler::DenseStackStep eval(a.spec, opt, chip, b, eb, compiler::StepKind::kEvaluate,
                                &step.layout());
  const uint64_t eprog = dev0.load_program(eval.program_bytes());
  std::mt19937 rng(seed);
  const size_t values = test::image_values(a.spec);
  Outcome o;
  for (int s = 0; s < 2; ++s) {
    std::vector<uint16_t> img(size_t{a.batch} * values);
    std::vector<uint8_t> lbl(a.batch);
    for (auto& v : img) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
    for (auto& v : lbl) v = static_cast<uint8_t>(rng() % a.spec.classes());
    for (int k = 0; k < chips; ++k) {
      const std::vector<uint16_t> shard(img.begin() + static_cast<long>(values * b * k),
                                        img.begin() + static_cast<long>(values * b * (k + 1)));
      const std::vector<uint8_t> labels(lbl.begin() + static_cast<long>(b) * k,
                                        lbl.begin() + static_cast<long>(b) * (k + 1));
      for (const auto& w : steps[k]->batch_image(shard, labels)) chip_dev(k).write(w.first, w.second);
    }
    o.cycles += one ? one->run(progs[0], 500'000'000).cycles
                    : ring->run_all(progs, 500'000'000)[0].cycles;
    const auto [lo, bytes] = step.state_range();
    for (int k = 0; k < chips; ++k) {
      const std::vector<uint8_t> st = chip_dev(k).read(lo, bytes);
      o.state[s].insert(o.state[s].end(), st.begin(), st.end());
      const std::vector<uint8_t> m = chip_dev(k).read(steps[k]->layout().metrics, 2 * n * 4);
      o.metrics[s].insert(o.metrics[s].end(), m.begin(), m.end());
      for (const auto& [addr, len] : step.replicated_ranges())
        if (k > 0)
          EXPECT_TRUE(chip_dev(k).read(addr, len) == dev0.read(addr, len))
              << "chip " << k << " of " << chips << ": replicated state after step " << s + 1;
    }
    if (s == 1) {
      const std::vector<uint16_t> shard(img.begin(), img.begin() + static_cast<long>(values * b));
      const std::vector<uint8_t> labels(lbl.begin(), lbl.begin() + b);
      for (const auto& w : eval.batch_image(shard, labels)) dev0.write(w.first, w.second);
      dev0.run(eprog, 500'000'000);
      o.probs = dev0.read(eval.layout().probs,
                          size_t{eval.padded(b)} * eval.padded(a.spec.classes()) * 4);
    }
  }
  return o;
}

void expect_identical(int n, const test::Arch& a, const compiler::OptimizerSpec& opt,
                      uint32_t seed, int chips = 1) {
  const Outcome f = run(driver::Backend::kFunctional, n, a, opt, seed, chips);
  const Outcome r = run(driver::Backend::kRtl, n, a, opt, seed, chips);
  const std::string what = test::describe(a) + " on " + std::to_string(chips) + " chip(s)" +
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
    test::Arch a = test::random_arch(rng);
    // one chip, or a data-parallel pair of chips (an even global batch)
    const int chips = i % 2 ? 2 : 1;
    if (chips == 2) a.batch += a.batch % 2;
    compiler::OptimizerSpec opt;
    if (i % 3 == 2) {
      opt.kind = compiler::OptimizerSpec::Kind::kSgd;
      opt.lr = 0.1f;
      opt.momentum = (i % 2) ? 0.9f : 0.0f;
    }
    if (i % 4 == 1) opt.label_smoothing = 0.1f;
    expect_identical(4, a, opt, 1000 + i, chips);
  }
}

TEST(DenseStepRtl, RandomConvNetsBitIdenticalToFunctionalAtN4) {
  const char* env = std::getenv("TESSERA_DENSE_SWEEP");
  const int count = env ? std::atoi(env) : 20;
  std::mt19937 rng(52);
  for (int i = 0; i < count; ++i) {
    test::Arch a = test::random_conv_arch(rng);
    // one chip, or a data-parallel pair of chips (an even global batch)
    const int chips = i % 2 ? 2 : 1;
    if (chips == 2) a.batch += a.batch % 2;
    compiler::OptimizerSpec opt;
    if (i % 3 == 2) {
      opt.kind = compiler::OptimizerSpec::Kind::kSgd;
      opt.lr = 0.1f;
      opt.momentum = (i % 2) ? 0.9f : 0.0f;
    }
    if (i % 4 == 1) opt.label_smoothing = 0.1f;
    expect_identical(4, a, opt, 2000 + i, chips);
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
  expect_identical(16, a, {}, 6, 2);
}

TEST(DenseStepRtl, MlpBitIdenticalToFunctionalAtN16) {
  test::Arch a;
  a.spec.inputs = 784;
  a.spec.layers = {{64, true}, {10, false}};
  a.batch = 8;
  expect_identical(16, a, {}, 5);
  expect_identical(16, a, {}, 5, 2);
}

// Four chips: a ring of four N = 4 chips against the functional ring, a small conv net (SGD
// with momentum) and a Dense stack with Dropout (Adam).
TEST(DenseStepRtl, FourChipRingBitIdenticalToFunctional) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  test::Arch c;
  c.spec.input_shape = {8, 8, 1};
  c.spec.features = {{Kind::kConv, 4, 3, 1, false, true}, {Kind::kMaxPool, 0, 0, 0, false, false, 2}};
  c.spec.inputs = 3 * 3 * 4;
  c.spec.layers = {{5, false}};
  c.batch = 8;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.1f;
  sgd.momentum = 0.9f;
  expect_identical(4, c, sgd, 11, 4);
  test::Arch d;
  d.spec.inputs = 40;
  d.spec.layers = {{24, true, 0.5f, 3}, {7, false}};
  d.batch = 12;
  expect_identical(4, d, {}, 12, 4);
}

}  // namespace
}  // namespace tessera
