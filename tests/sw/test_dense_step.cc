// DenseStackStep (tessera/dense_step.h) on the functional backend against the host reference
// (tests/common/dense_ref.h): random Dense stacks — depth 1 to 4, widths and batch sizes that are
// not multiples of N, relu and linear hidden layers — at N = 4 (the small chip: 8 KiB UB,
// 64 ACC rows, so every matmul is tiled in rows, columns and contraction) and N = 16. With SGD
// (momentum 0: w' = w - lr g) the gradient each weight received is recovered exactly from the
// weights, and checked against the reference's; the loss, the correct count, the SGD momentum
// form and Adam's first step are checked too. The liveness planner must share bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/driver.h"
#include "tests/common/dense_ref.h"

namespace tessera {
namespace {

std::vector<uint8_t> dev_read(void* ctx, uint64_t addr, size_t bytes) {
  return static_cast<driver::Device*>(ctx)->read(addr, bytes);
}

using test::Arch;
using test::describe;
using test::random_arch;

struct StepRun {
  compiler::DenseParams p0, p1;
  compiler::DenseOptState s1;
  float loss = 0, correct = 0;
  std::vector<uint16_t> images;
  std::vector<uint8_t> labels;
};

// A conv net of `features` on `in` images, then `layers`, of `batch` samples.
Arch conv_arch(compiler::Shape3 in, std::vector<compiler::FeatureLayerSpec> features,
               std::vector<compiler::DenseLayerSpec> layers, uint32_t batch) {
  Arch a;
  a.spec.input_shape = in;
  a.spec.features = std::move(features);
  a.spec.inputs = static_cast<uint32_t>(compiler::feature_shapes(a.spec).back().size());
  a.spec.layers = std::move(layers);
  a.batch = batch;
  return a;
}

// The step's inputs from a seed: Glorot weights with small random biases, images, labels.
void make_inputs(const Arch& a, uint32_t seed, StepRun& r) {
  r.p0 = compiler::glorot_init(a.spec, seed);
  std::mt19937 rng(seed);
  for (auto& b : r.p0.bias)
    for (auto& v : b) v = static_cast<float>(rng() % 200) / 1000.0f - 0.1f;
  r.images.resize(size_t{a.batch} * test::image_values(a.spec));
  r.labels.resize(a.batch);
  for (auto& v : r.images) v = fp::fp32_to_bf16(fp::bits(static_cast<float>(rng() % 256) / 255.0f));
  for (auto& v : r.labels) v = static_cast<uint8_t>(rng() % a.spec.classes());
}

// `step_lr` > 0: the step's learning rate written by the host (lr_image), not the compiled one.
StepRun run_step(const Arch& a, const compiler::OptimizerSpec& opt, int n, uint32_t seed,
                 float step_lr = 0, const compiler::DenseLoweringChoices& choices = {},
                 std::vector<std::string>* plan = nullptr, bool split_update = false) {
  driver::DeviceConfig cfg = driver::chip_for_array(n);
  cfg.backend = driver::Backend::kFunctional;
  auto dev = driver::Device::open(cfg);
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  compiler::Replication rep;
  rep.split_update = split_update;
  const uint64_t base =
      dev->alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, a.batch, rep));
  compiler::DenseStackStep step(a.spec, opt, chip, a.batch, base, compiler::StepKind::kTrain,
                                nullptr, choices, rep);
  if (plan) *plan = step.lowering_plan();
  const uint64_t prog = dev->load_program(step.program_bytes());
  StepRun r;
  make_inputs(a, seed, r);
  for (const auto& w : step.state_image(r.p0, compiler::zero_opt_state(a.spec)))
    dev->write(w.first, w.second);
  for (const auto& w : step.batch_image(r.images, r.labels)) dev->write(w.first, w.second);
  if (step_lr > 0) {
    const auto row = step.lr_image(step_lr);
    dev->write(row.first, row.second);
  }
  dev->run(prog, 2'000'000'000);
  step.read_state(dev_read, dev.get(), r.p1, r.s1);
  step.read_metrics(dev_read, dev.get(), r.loss, r.correct);
  return r;
}

// A data-parallel step of `a` (a.batch the global batch) on a functional ring of `P` chips,
// the same inputs as run_step; every chip must end with the same bf16 weight copies and fp32
// biases, byte for byte (checked here), and the state is the replicas' merged (each element from
// the chip that updated it). The loss is the mean of the replicas', the correct count their sum.
StepRun run_ring_step(const Arch& a, const compiler::OptimizerSpec& opt, int n, uint32_t seed,
                      int P) {
  driver::DeviceConfig cfg = driver::chip_for_array(n);
  cfg.backend = driver::Backend::kFunctional;
  auto ring = driver::Cluster::open(cfg, P);
  const tessera::ChipShape chip{cfg.n, cfg.ub_bytes, cfg.acc_rows};
  const uint32_t b = a.batch / static_cast<uint32_t>(P);
  StepRun r;
  make_inputs(a, seed, r);
  const size_t values = test::image_values(a.spec);
  std::vector<std::unique_ptr<compiler::DenseStackStep>> steps;
  std::vector<uint64_t> progs;
  for (int k = 0; k < P; ++k) {
    compiler::Replication rep;
    rep.replicas = P;
    rep.rank = k;
    driver::Device& d = ring->chip(k);
    const uint64_t base = d.alloc(compiler::DenseStackStep::data_bytes(a.spec, chip, b, rep));
    steps.push_back(std::make_unique<compiler::DenseStackStep>(
        a.spec, opt, chip, b, base, compiler::StepKind::kTrain, nullptr,
        compiler::DenseLoweringChoices{}, rep));
    progs.push_back(d.load_program(steps.back()->program_bytes()));
    for (const auto& w : steps.back()->state_image(r.p0, compiler::zero_opt_state(a.spec)))
      d.write(w.first, w.second);
    const std::vector<uint16_t> img(r.images.begin() + static_cast<long>(values * b * k),
                                    r.images.begin() + static_cast<long>(values * b * (k + 1)));
    const std::vector<uint8_t> lab(r.labels.begin() + static_cast<long>(b) * k,
                                   r.labels.begin() + static_cast<long>(b) * (k + 1));
    for (const auto& w : steps.back()->batch_image(img, lab)) d.write(w.first, w.second);
  }
  ring->run_all(progs, 2'000'000'000);
  std::vector<compiler::DenseParams> ps(P);
  std::vector<compiler::DenseOptState> ss(P);
  for (int k = 0; k < P; ++k) {
    for (const auto& [addr, bytes] : steps[0]->replicated_ranges())
      if (k > 0)
        EXPECT_TRUE(ring->chip(k).read(addr, bytes) == ring->chip(0).read(addr, bytes))
            << "chip " << k << " of " << P << ", 0x" << std::hex << addr;
    float loss = 0, correct = 0;
    steps[k]->read_metrics(dev_read, &ring->chip(k), loss, correct);
    r.loss += loss / static_cast<float>(P);
    r.correct += correct;
    steps[k]->read_state(dev_read, &ring->chip(k), ps[k], ss[k]);
  }
  steps[0]->merge_replica_states(ps, ss, r.p1, r.s1);
  return r;
}

// The gradient each weight received under SGD(lr, momentum 0), against the reference's.
void expect_gradients(const Arch& a, const StepRun& r, float lr, int n, float label_smoothing = 0) {
  const auto ref =
      test::dense_reference_step(a.spec, r.p0, r.images, r.labels, n, 1, label_smoothing);
  EXPECT_NEAR(r.loss, ref.loss, 2e-5 * std::max(1.0f, ref.loss)) << describe(a);
  EXPECT_EQ(r.correct, ref.correct) << describe(a);
  for (size_t l = 0; l < r.p0.kernel.size(); ++l) {
    auto check = [&](const std::vector<float>& w0, const std::vector<float>& w1,
                     const std::vector<float>& g, const char* what) {
      float gmax = 0;
      for (float v : g) gmax = std::max(gmax, std::fabs(v));
      size_t bad = 0;
      for (size_t i = 0; i < g.size(); ++i) {
        const float got = (w0[i] - w1[i]) / lr;
        // a d logit on a bf16 rounding boundary may round the other way: 2^-8 of the largest
        if (std::fabs(got - g[i]) > 4e-3f * gmax + 1e-6f) ++bad;
      }
      EXPECT_EQ(bad, 0u) << describe(a) << ": layer with weights " << l + 1 << " " << what;
    };
    check(r.p0.kernel[l], r.p1.kernel[l], ref.grads.kernel[l], "kernel");
    check(r.p0.bias[l], r.p1.bias[l], ref.grads.bias[l], "bias");
  }
}

TEST(DenseStackStep, RandomStacksMatchTheHostReferenceAtN4AndN16) {
  std::mt19937 rng(2026);
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (int i = 0; i < 60; ++i) {
    const Arch a = random_arch(rng);
    const int n = i % 4 == 3 ? 16 : 4;
    const StepRun r = run_step(a, sgd, n, 100 + i);
    expect_gradients(a, r, sgd.lr, n);
  }
}

TEST(DenseStackStep, RandomConvNetsMatchTheHostReferenceAtN4AndN16) {
  std::mt19937 rng(91);
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (int i = 0; i < 40; ++i) {
    const Arch a = test::random_conv_arch(rng);
    const int n = i % 4 == 3 ? 16 : 4;
    const StepRun r = run_step(a, sgd, n, 300 + i);
    expect_gradients(a, r, sgd.lr, n);
  }
}

// Label smoothing (Keras's CategoricalCrossentropy(label_smoothing)): the loss and every
// gradient follow the smoothed targets, on Dense stacks and conv nets, 2 to 21 classes.
TEST(DenseStackStep, LabelSmoothingMatchesTheHostReference) {
  std::mt19937 rng(404);
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (int i = 0; i < 16; ++i) {
    const Arch a = i % 2 ? test::random_conv_arch(rng) : random_arch(rng);
    const int n = i % 4 == 3 ? 16 : 4;
    sgd.label_smoothing = i % 3 == 0 ? 0.1f : i % 3 == 1 ? 0.25f : 1.0f;
    const StepRun r = run_step(a, sgd, n, 500 + i);
    expect_gradients(a, r, sgd.lr, n, sgd.label_smoothing);
  }
  // the smoothed loss is not the plain one: same weights and batch, eps 0.1 against 0
  Arch a;
  a.spec.inputs = 20;
  a.spec.layers = {{12, true}, {7, false}};
  a.batch = 9;
  sgd.label_smoothing = 0.1f;
  const StepRun smooth = run_step(a, sgd, 4, 3);
  sgd.label_smoothing = 0;
  const StepRun plain = run_step(a, sgd, 4, 3);
  EXPECT_GT(std::fabs(smooth.loss - plain.loss), 1e-3f);
  EXPECT_EQ(smooth.correct, plain.correct);
  sgd.label_smoothing = -0.1f;
  EXPECT_THROW(run_step(a, sgd, 4, 3), std::invalid_argument);
  // Adam's betas in [0, 1): beta_1 1 would divide by zero, beta_2 1 stop training; NaN refused
  compiler::OptimizerSpec adam;
  for (float bad : {1.0f, -0.5f, std::nanf("")}) {
    adam.beta1 = bad;
    EXPECT_THROW(run_step(a, adam, 4, 3), std::invalid_argument) << bad;
    adam.beta1 = 0.9f;
    adam.beta2 = bad;
    EXPECT_THROW(run_step(a, adam, 4, 3), std::invalid_argument) << bad;
    adam.beta2 = 0.999f;
  }
}

// Convolutions whose kernel rows are copied as one run (compact maps, stride 1, filters a
// multiple of N) in both im2cols, and their border taps one by one, valid and same.
TEST(DenseStackStep, ConvKernelRowRunsMatchTheReference) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (bool same : {false, true}) {
    const Arch a = conv_arch({9, 8, 2},
                             {{Kind::kConv, 4, 3, 1, same, true},
                              {Kind::kConv, 8, 3, 1, !same, true},
                              {Kind::kConv, 4, 2, 1, true, false}},
                             {{5, false}}, 3);
    const StepRun r = run_step(a, sgd, 4, same ? 41 : 42);
    expect_gradients(a, r, sgd.lr, 4);
  }
}

// The conv + relu + max-pool fusion (conv_pool_fused): the example CNN's pattern at a small
// size, at N = 4 and 16 (the routing inside the weight gradient's operand loads), and a second
// convolution (a gathered operand: 4 channels at N = 16, an input gradient: the routing in the
// pool's phase) whose pool is fused behind an unfused pool; the step against the host
// reference, which routes the pooled gradient by the chip's argmax. The plan names both.
TEST(DenseStackStep, ConvPoolFusionMatchesTheHostReference) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  struct Case {
    Arch a;
    int n;
    bool in_dw = true;  // the pool's gradient routed inside the first conv's weight gradient
  };
  const std::vector<Case> cases = {
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 16, 3, 1, false, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{10, false}}, 6),
       16},
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 8, 3, 1, false, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{7, false}}, 5),
       4},
      {conv_arch({18, 18, 1},
                 {{Kind::kConv, 4, 3, 1, false, true},
                  {Kind::kMaxPool, 0, 3, 1, false, false, 2},
                  {Kind::kConv, 16, 3, 1, true, true},
                  {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{12, true}, {10, false}}, 4),
       16, false},
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 16, 3, 1, true, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{10, false}}, 5),
       16},
      // the routing's seleqh on two column tiles at once (F a multiple of 2N), and on pairs and
      // single tiles mixed (F = 3N at N = 4: a pixel's tiles 4N-aligned every other pixel)
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 32, 3, 1, true, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{10, false}}, 3),
       16},
      {conv_arch({18, 18, 1},
                 {{Kind::kConv, 4, 3, 1, false, true},
                  {Kind::kMaxPool, 0, 3, 1, false, false, 2},
                  {Kind::kConv, 32, 3, 1, true, true},
                  {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{12, true}, {10, false}}, 3),
       16, false},
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 12, 3, 1, true, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{7, false}}, 3),
       4, false},
      {conv_arch({14, 14, 1},
                 {{Kind::kConv, 12, 3, 1, false, true}, {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                 {{7, false}}, 3),
       4, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(describe(c.a) + " N " + std::to_string(c.n));
    const tessera::ChipShape chip = driver::chip_for_array(c.n);
    size_t fused = 0;
    for (size_t i = 0; i < c.a.spec.features.size(); ++i)
      fused += compiler::conv_pool_fused(c.a.spec, i, chip);
    // (the third case's first pair, 4 filters at N = 16, stays unfused; its second is fused)
    EXPECT_EQ(fused, 1u);
    std::vector<std::string> plan;
    const StepRun r = run_step(c.a, sgd, c.n, 91, 0, {}, &plan);
    bool noted = false, routed = false;
    for (const auto& l : plan) {
      noted |= l.find("max-pool, its argmax codes") != std::string::npos;
      // (valid padding: item by item; same: inside the tiled matmul's operand loads)
      routed |= l.find("operand loads (dz never stored)") != std::string::npos ||
                l.find("weight gradient item by item") != std::string::npos;
    }
    EXPECT_TRUE(noted);
    // a first convolution (one channel, stride 1) routes inside its weight gradient's operand
    // loads; a second convolution, which has an input gradient, in the pool's own backward
    // phase, and so does the N = 4 chip's 12-filter one (its 8 KiB UB holds no routing stage)
    EXPECT_EQ(routed, c.in_dw);
    size_t in_dw = 0;
    for (size_t i = 0; i < c.a.spec.features.size(); ++i)
      in_dw += compiler::pool_routed_in_weight_gradient(c.a.spec, i, chip);
    EXPECT_EQ(in_dw, routed ? 1u : 0u);
    expect_gradients(c.a, r, sgd.lr, c.n);
  }
}

// A one-channel first convolution's weight gradient by taps: the samples a contraction group
// covers staged in the UB (8 x 8 images at N = 4), and, where two staging buffers would crowd
// the N = 4 chip's 8 KiB UB (32 x 32 images), the taps read from HBM; both against the host.
TEST(DenseStackStep, StagedAndUnstagedTapGathersMatchTheReference) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (uint32_t side : {8u, 32u}) {
    const Arch a =
        conv_arch({side, side, 1}, {{Kind::kConv, 4, 3, 1, false, true}}, {{3, false}}, 3);
    const StepRun r = run_step(a, sgd, 4, 50 + side);
    expect_gradients(a, r, sgd.lr, 4);
  }
}

// Convolutions by implicit GEMM (the MXU streaming a UB-staged map: the input gradient's
// straight from the gradient at stride 1, from the padded, dilated map at stride 2; the
// forward's from its input map) give the same step bit for bit as the patch gathers: the weights,
// the optimizer state and the loss, for nets whose plans show each path, at N = 16 and N = 4.
TEST(DenseStackStep, ImplicitGemmInputGradientIsBitIdenticalToTheGather) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  sgd.momentum = 0.9f;
  struct Case {
    std::vector<compiler::FeatureLayerSpec> features;
    int n;
    const char* want;  // in the input gradient's plan line
  };
  const std::vector<Case> cases = {
      {{{Kind::kConv, 16, 3, 1, false, true},
        {Kind::kConv, 32, 3, 1, false, true},
        {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
       16,
       "staged from the unpadded map"},
      {{{Kind::kConv, 16, 5, 1, true, true}, {Kind::kConv, 16, 3, 2, true, false}},
       16,
       "implicit"},  // stride 2: the dilated map in HBM
      // N = 4: several row blocks a sample (the last one short) and column groups
      {{{Kind::kConv, 8, 3, 1, false, true}, {Kind::kConv, 8, 3, 1, true, true}},
       4,
       "staged from the unpadded map"},
      // an even kernel with same padding (the frame's top and left sides differ from the
      // bottom and right), straight from the gradient
      {{{Kind::kConv, 16, 3, 1, false, true}, {Kind::kConv, 16, 2, 1, true, true}},
       16,
       "staged from the unpadded map"}};
  for (const Case& c : cases) {
    const Arch a = conv_arch({14, 14, 1}, c.features, {{24, true}, {10, false}}, 6);
    std::vector<std::string> plan_on, plan_off;
    compiler::DenseLoweringChoices off;
    off.implicit_gemm = false;
    const StepRun on = run_step(a, sgd, c.n, 77, 0, {}, &plan_on);
    const StepRun gather = run_step(a, sgd, c.n, 77, 0, off, &plan_off);
    std::string line, forward;
    for (const auto& l : plan_on) {
      if (l.find("Conv2D input gradient") != std::string::npos) line = l;
      if (l.find("Conv2D forward") != std::string::npos && l.find("implicit") != std::string::npos)
        forward = l;
    }
    EXPECT_NE(line.find(c.want), std::string::npos) << describe(a) << "\n" << line;
    // the second convolution's forward (C a multiple of N, stride 1) too
    if (c.features[1].stride == 1) EXPECT_FALSE(forward.empty()) << describe(a);
    if (c.n == 4) {  // the tilings this case is here for: several row blocks, column groups
      EXPECT_NE(line.find("of a sample's 166 rows"), std::string::npos) << line;
      EXPECT_EQ(line.find("blocks of 166 "), std::string::npos) << line;
      EXPECT_NE(line.find("column groups of 1 tiles"), std::string::npos) << line;
    }
    for (const auto& l : plan_off) EXPECT_EQ(l.find("implicit"), std::string::npos) << l;
    EXPECT_EQ(std::memcmp(&on.loss, &gather.loss, 4), 0) << describe(a);
    for (size_t l = 0; l < on.p1.kernel.size(); ++l) {
      auto same = [](const std::vector<float>& x, const std::vector<float>& y) {
        return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
      };
      EXPECT_TRUE(same(on.p1.kernel[l], gather.p1.kernel[l])) << describe(a) << " kernel " << l;
      EXPECT_TRUE(same(on.p1.bias[l], gather.p1.bias[l])) << describe(a) << " bias " << l;
      EXPECT_TRUE(same(on.s1.m.kernel[l], gather.s1.m.kernel[l])) << describe(a) << " m " << l;
    }
    expect_gradients(a, on, sgd.lr, c.n);  // and the step is right: the host reference
  }
}

TEST(DenseStackStep, TheMlpAtN16MatchesTheReference) {
  Arch a;
  a.spec.inputs = 784;
  a.spec.layers = {{256, true}, {10, false}};
  a.batch = 32;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  const StepRun r = run_step(a, sgd, 16, 7);
  expect_gradients(a, r, sgd.lr, 16);
}

TEST(DenseStackStep, SgdMomentumAndAdamFirstStep) {
  Arch a;
  a.spec.inputs = 20;
  a.spec.layers = {{12, true}, {7, false}};
  a.batch = 9;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.25f;
  sgd.momentum = 0.9f;
  const StepRun s = run_step(a, sgd, 4, 3);
  const auto ref = test::dense_reference_step(a.spec, s.p0, s.images, s.labels, 4);
  compiler::OptimizerSpec adam;  // Keras defaults
  const StepRun m = run_step(a, adam, 4, 3);
  const float lr_t = adam.lr * std::sqrt(1.0f - adam.beta2) / (1.0f - adam.beta1);
  for (size_t l = 0; l < 2; ++l)
    for (size_t i = 0; i < ref.grads.kernel[l].size(); ++i) {
      const float g = ref.grads.kernel[l][i];
      // SGD: velocity = -lr g (from zero), w' = w + velocity
      EXPECT_NEAR(s.s1.m.kernel[l][i], -sgd.lr * g, 1e-3f * sgd.lr * std::fabs(g) + 1e-7f);
      EXPECT_FLOAT_EQ(s.p1.kernel[l][i], s.p0.kernel[l][i] + s.s1.m.kernel[l][i]);
      // Adam from zero moments: m = 0.1 g, v = 0.001 g^2, w' = w - lr_t m / (sqrt v + eps)
      EXPECT_NEAR(m.s1.m.kernel[l][i], 0.1f * g, 1e-3f * std::fabs(g) + 1e-9f);
      EXPECT_NEAR(m.s1.v.kernel[l][i], 0.001f * g * g, 1e-3f * g * g + 1e-12f);
      const float want =
          m.p0.kernel[l][i] - lr_t * (0.1f * g) / (std::sqrt(0.001f * g * g) + adam.epsilon);
      EXPECT_NEAR(m.p1.kernel[l][i], want, 1e-2f * adam.lr) << "layer " << l << " i " << i;
    }
  EXPECT_FLOAT_EQ(m.s1.beta1_power, adam.beta1);
  EXPECT_FLOAT_EQ(m.s1.beta2_power, adam.beta2);
}

// The rate the host writes before a step is the one the chip applies: SGD compiled with 0.25
// and run at 0.05 moves each weight by 0.05 times the reference gradient; Adam compiled with
// 1e-3 and run at 4e-3 takes the first step of Adam(4e-3).
TEST(DenseStackStep, TheHostsLearningRateRowSetsTheStep) {
  Arch a;
  a.spec.inputs = 20;
  a.spec.layers = {{12, true}, {7, false}};
  a.batch = 9;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.25f;
  expect_gradients(a, run_step(a, sgd, 4, 3, 0.05f), 0.05f, 4);
  compiler::OptimizerSpec adam;
  const StepRun m = run_step(a, adam, 4, 3, 4e-3f);
  const auto ref = test::dense_reference_step(a.spec, m.p0, m.images, m.labels, 4);
  const float lr_t = 4e-3f * std::sqrt(1.0f - adam.beta2) / (1.0f - adam.beta1);
  for (size_t l = 0; l < 2; ++l)
    for (size_t i = 0; i < ref.grads.kernel[l].size(); ++i) {
      const float g = ref.grads.kernel[l][i];
      const float want =
          m.p0.kernel[l][i] - lr_t * (0.1f * g) / (std::sqrt(0.001f * g * g) + adam.epsilon);
      EXPECT_NEAR(m.p1.kernel[l][i], want, 1e-2f * 4e-3f) << "layer " << l << " i " << i;
    }
}

// Keras's schedules at their ends and middle: CosineDecay(1e-3, 100) is 1e-3, 5e-4, 0 at steps
// 0, 50, 100 and stays 0 after; PolynomialDecay(1e-3, 100, 0) is 7.5e-4 at step 25.
TEST(DenseStackStep, LearningRateSchedules) {
  compiler::OptimizerSpec o;
  o.decay_steps = 100;
  EXPECT_EQ(o.lr_at(70), 1e-3f);  // constant
  o.schedule = compiler::parse_schedule("cosine");
  EXPECT_EQ(o.lr_at(0), 1e-3f);
  EXPECT_FLOAT_EQ(o.lr_at(50), 5e-4f);
  EXPECT_FLOAT_EQ(o.lr_at(25), 1e-3f * 0.5f * (1.0f + std::sqrt(0.5f)));
  EXPECT_EQ(o.lr_at(100), 0.0f);
  EXPECT_EQ(o.lr_at(500), 0.0f);
  o.schedule = compiler::parse_schedule("linear");
  EXPECT_FLOAT_EQ(o.lr_at(25), 7.5e-4f);
  EXPECT_EQ(o.lr_at(100), 0.0f);
  EXPECT_THROW(compiler::parse_schedule("exponential"), std::invalid_argument);
}

// The Dropout mask function itself: the kept fraction is 1 - rate within 1% over 200,000
// (sample, unit) pairs, and the masks of two steps, two seeds or two samples are different.
TEST(DenseStackStep, DropoutMaskKeepsOneMinusRate) {
  for (float rate : {0.1f, 0.5f, 0.8f}) {
    uint64_t kept = 0;
    for (uint32_t s = 0; s < 200; ++s)
      for (uint32_t u = 0; u < 1000; ++u) kept += compiler::dropout_keep(7, 1, s, u, rate);
    EXPECT_NEAR(static_cast<double>(kept) / 200000, 1.0 - rate, 0.01) << rate;
  }
  auto mask = [](uint32_t seed, uint32_t step, uint32_t sample) {
    std::vector<bool> m;
    for (uint32_t u = 0; u < 256; ++u)
      m.push_back(compiler::dropout_keep(seed, step, sample, u, 0.5f));
    return m;
  };
  EXPECT_NE(mask(7, 1, 0), mask(7, 2, 0));
  EXPECT_NE(mask(7, 1, 0), mask(8, 1, 0));
  EXPECT_NE(mask(7, 1, 0), mask(7, 1, 1));
  EXPECT_EQ(mask(7, 1, 0), mask(7, 1, 0));
}

// 784-128(relu, Dropout 0.5)-10 on the chip: the gradients match the reference's, which
// applies the mask of the host's dropout_keep (the chip computes it with its own VPU sequence).
TEST(DenseStackStep, DropoutStackMatchesTheReference) {
  Arch a;
  a.spec.inputs = 784;
  a.spec.layers = {{128, true, 0.5f, 1234}, {10, false}};
  a.batch = 24;
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  for (int n : {4, 16}) {
    const StepRun r = run_step(a, sgd, n, 9);
    expect_gradients(a, r, sgd.lr, n);
    EXPECT_EQ(r.s1.steps, 1u);
  }
}

TEST(DenseStackStep, LivenessPlannerSharesTransientBytes) {
  compiler::DenseStackSpec spec;
  spec.inputs = 784;
  spec.layers = {{256, true}, {128, true}, {64, true}, {10, false}};
  const tessera::ChipShape chip{16, 65536, 1024};
  compiler::DenseStackStep step(spec, {}, chip, 128, 0);
  const auto& Y = step.layout();
  EXPECT_LT(Y.transient_bytes, Y.transient_unshared);
  // no two buffers live at the same time overlap
  for (const auto& s : Y.transients)
    for (const auto& t : Y.transients) {
      if (&s == &t || s.last < t.first || t.last < s.first) continue;
      EXPECT_TRUE(s.addr + s.bytes <= t.addr || t.addr + t.bytes <= s.addr)
          << s.name << " and " << t.name;
    }
}

TEST(DenseStackStep, RefusesWhatItCannotLower) {
  const tessera::ChipShape chip{4, 8192, 64};
  compiler::DenseStackSpec none;
  none.inputs = 10;
  EXPECT_THROW(compiler::DenseStackStep(none, {}, chip, 4, 0), std::invalid_argument);
  compiler::DenseStackSpec one_class = none;
  one_class.layers = {{1, false}};
  EXPECT_THROW(compiler::DenseStackStep(one_class, {}, chip, 4, 0), std::invalid_argument);
  compiler::DenseStackSpec ok = none;
  ok.layers = {{5, true}, {3, false}};
  compiler::OptimizerSpec bad;
  bad.kind = compiler::OptimizerSpec::Kind::kSgd;
  bad.momentum = 1.5f;
  EXPECT_THROW(compiler::DenseStackStep(ok, bad, chip, 4, 0), std::invalid_argument);
  // 100 classes need 25 ACC rows a sample at N = 4: fine; 400 need 100 > 64 / 2
  compiler::DenseStackSpec wide = none;
  wide.layers = {{400, false}};
  try {
    compiler::DenseStackStep(wide, {}, chip, 4, 0);
    FAIL() << "400 classes on 64 ACC rows";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("softmax"), std::string::npos) << e.what();
  }
}

// Data parallelism (Replication). The split program with one replica — the gradients stored
// to the gradient vector, the optimizer in its own phase — ends bit for bit where the fused
// step does: Adam and SGD with momentum, Dense stacks, conv nets (with and without the conv +
// max-pool fusion) and Dropout.
TEST(DenseStackStep, SplitUpdateIsBitIdenticalToTheFusedStep) {
  using Kind = compiler::FeatureLayerSpec::Kind;
  std::mt19937 rng(4401);
  std::vector<std::pair<Arch, int>> cases;
  for (int i = 0; i < 4; ++i) cases.push_back({random_arch(rng), i % 2 ? 16 : 4});
  for (int i = 0; i < 4; ++i) cases.push_back({test::random_conv_arch(rng), i % 2 ? 16 : 4});
  cases.push_back({conv_arch({14, 14, 1},
                             {{Kind::kConv, 16, 3, 1, false, true},
                              {Kind::kMaxPool, 0, 3, 1, false, false, 2}},
                             {{10, false}}, 6),
                   16});
  Arch drop;
  drop.spec.inputs = 50;
  drop.spec.layers = {{24, true, 0.5f, 77}, {10, false}};
  drop.batch = 12;
  cases.push_back({drop, 4});
  compiler::OptimizerSpec adam, sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.1f;
  sgd.momentum = 0.9f;
  for (const auto& [a, n] : cases)
    for (const compiler::OptimizerSpec& opt : {adam, sgd}) {
      SCOPED_TRACE(describe(a) + " N " + std::to_string(n) +
                   (opt.kind == compiler::OptimizerSpec::Kind::kAdam ? " Adam" : " SGD"));
      const StepRun fused = run_step(a, opt, n, 5, 0, {}, nullptr, false);
      const StepRun split = run_step(a, opt, n, 5, 0, {}, nullptr, true);
      EXPECT_EQ(fp::bits(fused.loss), fp::bits(split.loss));
      for (size_t j = 0; j < fused.p1.kernel.size(); ++j) {
        EXPECT_TRUE(fused.p1.kernel[j] == split.p1.kernel[j]) << "kernel " << j;
        EXPECT_TRUE(fused.p1.bias[j] == split.p1.bias[j]) << "bias " << j;
        EXPECT_TRUE(fused.s1.m.kernel[j] == split.s1.m.kernel[j]) << "m " << j;
        EXPECT_TRUE(fused.s1.v.kernel[j] == split.s1.v.kernel[j]) << "v " << j;
      }
    }
}

// A data-parallel step on a functional ring of 2, 3 and 4 chips: every chip ends with the same
// state (run_ring_step checks it), and the gradient each weight received is the global batch's
// (the host reference over all replicas' samples, Dropout drawn by global sample), the loss
// theirs; against the one-chip step at the same global batch, only the order of the sums over
// samples differs.
TEST(DenseStackStep, DataParallelRingMatchesTheGlobalBatchReference) {
  std::mt19937 rng(4402);
  compiler::OptimizerSpec sgd;
  sgd.kind = compiler::OptimizerSpec::Kind::kSgd;
  sgd.lr = 0.5f;
  std::vector<Arch> archs;
  for (int i = 0; i < 3; ++i) archs.push_back(random_arch(rng));
  for (int i = 0; i < 3; ++i) archs.push_back(test::random_conv_arch(rng));
  Arch drop;
  drop.spec.inputs = 784;
  drop.spec.layers = {{128, true, 0.5f, 1234}, {10, false}};
  archs.push_back(drop);
  for (size_t i = 0; i < archs.size(); ++i) {
    Arch a = archs[i];
    const int P = 2 + static_cast<int>(i % 3), n = i % 2 ? 16 : 4;
    a.batch = static_cast<uint32_t>(P) * (1 + a.batch % 9);
    SCOPED_TRACE(describe(a) + " N " + std::to_string(n) + " chips " + std::to_string(P));
    const StepRun ring = run_ring_step(a, sgd, n, 60 + static_cast<uint32_t>(i), P);
    expect_gradients(a, ring, sgd.lr, n);
    const StepRun one = run_step(a, sgd, n, 60 + static_cast<uint32_t>(i));
    EXPECT_NEAR(ring.loss, one.loss, 1e-5f * std::max(1.0f, one.loss));
    EXPECT_EQ(ring.correct, one.correct);
  }
}

}  // namespace
}  // namespace tessera
