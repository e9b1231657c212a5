// The training-step compiler against independent references: the VPU exp/log sequences against
// the host's libm, and one whole compiled training step (run on the functional model) against a
// straightforward host implementation of the same step in double precision, with bf16 rounding
// where the chip rounds (matmul operands). Also: the programs are race-free by construction, so
// they must read no undefined UB/ACC, and an impossible configuration is refused up front.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <random>

#include "sw/compiler/graph.h"
#include "sw/compiler/lowering_util.h"
#include "sw/compiler/program_builder.h"
#include "sw/compiler/reroll.h"
#include "sw/compiler/vpu_math.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/dense_step.h"
#include "tessera/functional_model.h"
#include "tests/common/test_util.h"

namespace tessera::compiler {
namespace {

float bf16_round(float f) { return fp::f32(uint32_t{fp::fp32_to_bf16(fp::bits(f))} << 16); }

// ULP distance between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  return std::llabs(static_cast<int64_t>(fp::bits(a)) - static_cast<int64_t>(fp::bits(b)));
}

// Runs `body` (which reads v1 from UB 0 and leaves its result in v2) on vectors of inputs.
std::vector<float> run_vpu(const std::vector<float>& in, void (*body)(ProgramBuilder&)) {
  const int n = 16;
  functional::ChipConfig cfg;
  cfg.n = n;
  functional::FunctionalModel fm(cfg);
  ProgramBuilder b(n, cfg.ub_bytes, cfg.acc_rows);
  b.vpu_li(0, 0);
  const uint32_t rows = static_cast<uint32_t>(in.size() / n);
  DmaWalk src, dst;
  src.space = isa::Space::kHbm;
  src.base = 0x100000;
  src.loops = {{static_cast<uint32_t>(in.size()), 4}};
  dst.space = isa::Space::kUb;
  dst.base = 0;
  dst.loops = src.loops;
  b.dma_copy(src, dst, 4);
  for (uint32_t r = 0; r < rows; ++r) {
    b.vpu_ld(isa::Kind::kUbF32, 1, r * 64);
    body(b);
    b.vpu_st(isa::Kind::kUbF32, 2, r * 64);
  }
  b.dma_copy(dst, src, 4);
  fm.hbm().write(0x100000, in.data(), in.size() * 4);
  fm.load_program(0, b.finish());
  const auto r = fm.run(0);
  EXPECT_EQ(r.status, functional::RunStatus::kHalted) << r.describe();
  std::vector<float> out(in.size());
  fm.hbm().read(0x100000, out.data(), out.size() * 4);
  return out;
}

TEST(VpuMath, ExpWithinTwoUlpsOfLibm) {
  std::vector<float> in;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-87.0f, 0.0f);
  for (int i = 0; i < 4096; ++i) in.push_back(i < 64 ? -static_cast<float>(i) * 0.25f : u(rng));
  const auto out = run_vpu(in, [](ProgramBuilder& b) { emit_exp(b, 2, 1, 3, 4, 5, 6); });
  int64_t worst = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const float want = static_cast<float>(std::exp(static_cast<double>(in[i])));
    worst = std::max(worst, ulps(out[i], want));
  }
  EXPECT_LE(worst, 2);
  EXPECT_EQ(out[0], 1.0f);  // exp(0) exactly
}

TEST(VpuMath, LogWithinTwoUlpsOfLibmAwayFromOne) {
  std::vector<float> in;
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(1.0f, 64.0f);
  for (int i = 0; i < 4096; ++i) in.push_back(i == 0 ? 1.0f : u(rng));
  const auto out = run_vpu(in, [](ProgramBuilder& b) { emit_log(b, 2, 1, 3, 4, 5, 6, 7); });
  int64_t worst = 0;
  double worst_abs = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const double want = std::log(static_cast<double>(in[i]));
    if (want <= 0.5) worst_abs = std::max(worst_abs, std::fabs(out[i] - want));
    if (want > 0.5) worst = std::max(worst, ulps(out[i], static_cast<float>(want)));
  }
  EXPECT_EQ(out[0], 0.0f);  // ln 1 exactly
  EXPECT_LE(worst, 2);
  EXPECT_LT(worst_abs, 1e-7);  // near 1 the absolute error is what matters for the loss
}

// ---- one training step against a host reference ----

// The example CNN's family: Conv2D(filters, kernel, valid, relu) on one-channel images ->
// MaxPool2D(2) -> Flatten -> Dense(classes, softmax).
struct CnnSpec {
  uint32_t height = 28, width = 28, filters = 32, kernel = 3, classes = 10;
  uint32_t conv_h() const { return height - kernel + 1; }
  uint32_t conv_w() const { return width - kernel + 1; }
  uint32_t pool_h() const { return conv_h() / 2; }
  uint32_t pool_w() const { return conv_w() / 2; }
  uint32_t features() const { return pool_h() * pool_w() * filters; }
  uint32_t taps() const { return kernel * kernel; }
  // as the compiler's spec (what keras::dense_stack_spec makes of the layer list)
  DenseStackSpec stack() const {
    DenseStackSpec d;
    d.input_shape = {height, width, 1};
    FeatureLayerSpec conv, pool;
    conv.kind = FeatureLayerSpec::Kind::kConv;
    conv.filters = filters;
    conv.kernel = kernel;
    conv.relu = true;
    pool.kind = FeatureLayerSpec::Kind::kMaxPool;
    pool.pool = 2;
    d.features = {conv, pool};
    d.inputs = features();
    d.layers = {{classes, false}};
    return d;
  }
};
// Parameters as the compiler reads and writes them: kernel[0] the conv's [K][K][1][F],
// kernel[1] the dense [features][classes] (NHWC Flatten order), bias[0], bias[1].
struct CnnParams {
  std::vector<float> conv_kernel, conv_bias, dense_kernel, dense_bias;
  explicit CnnParams(const DenseParams& p)
      : conv_kernel(p.kernel.at(0)), conv_bias(p.bias.at(0)), dense_kernel(p.kernel.at(1)),
        dense_bias(p.bias.at(1)) {}
  CnnParams(std::vector<float> a, std::vector<float> b, std::vector<float> c, std::vector<float> d)
      : conv_kernel(std::move(a)), conv_bias(std::move(b)), dense_kernel(std::move(c)),
        dense_bias(std::move(d)) {}
  CnnParams() = default;
};

struct RefStep {
  double loss = 0;
  int correct = 0;
  CnnParams grad;
};

// The step in double precision: bf16 operands where the chip's MXU takes bf16 (images, kernels,
// features, d logits, d features), everything else exact-ish.
// `fused`: the chip runs conv + relu + max-pool as one op (conv_pool_fused), whose argmax is the
// first window position holding the max of the fp32 sums before the bias; unfused, the pool's
// gradient goes to the first tap equal to the max of the stored bf16 relu outputs.
RefStep reference_step(const CnnSpec& s, const CnnParams& p, const std::vector<uint8_t>& img,
                       const std::vector<uint8_t>& lbl, uint32_t batch, bool fused) {
  const uint32_t H = s.height, W = s.width, K = s.kernel, F = s.filters, CH = s.conv_h(),
                 CW = s.conv_w(), PH = s.pool_h(), PW = s.pool_w(), D = s.features(), C = s.classes,
                 T = s.taps();
  RefStep r;
  r.grad = {std::vector<float>(T * F), std::vector<float>(F), std::vector<float>(D * C),
            std::vector<float>(C)};
  std::vector<double> gwc(T * F, 0), gbc(F, 0), gwd(size_t{D} * C, 0), gbd(C, 0);
  for (uint32_t b = 0; b < batch; ++b) {
    auto x = [&](uint32_t y, uint32_t xx) {
      return bf16_round(static_cast<float>(img[b * H * W + y * W + xx]) / 255.0f);
    };
    std::vector<float> z(size_t{CH} * CW * F);
    for (uint32_t oy = 0; oy < CH; ++oy)
      for (uint32_t ox = 0; ox < CW; ++ox)
        for (uint32_t f = 0; f < F; ++f) {
          double acc = 0;
          for (uint32_t ky = 0; ky < K; ++ky)
            for (uint32_t kx = 0; kx < K; ++kx)
              acc += double{x(oy + ky, ox + kx)} * bf16_round(p.conv_kernel[(ky * K + kx) * F + f]);
          z[(oy * CW + ox) * F + f] = static_cast<float>(acc);
        }
    std::vector<float> feat(D);
    std::vector<int> arg(D);
    for (uint32_t py = 0; py < PH; ++py)
      for (uint32_t px = 0; px < PW; ++px)
        for (uint32_t f = 0; f < F; ++f) {
          int best = 0;
          float m = -INFINITY;
          for (int pos = 0; pos < 4; ++pos) {
            const float v = z[((2 * py + pos / 2) * CW + 2 * px + pos % 2) * F + f];
            if (v > m) m = v, best = pos;
          }
          const float y = std::max(m + p.conv_bias[f], 0.0f);
          const uint32_t d = (py * PW + px) * F + f;
          feat[d] = bf16_round(y);
          arg[d] = y > 0 ? best : 4;
          if (!fused) {  // the first tap whose stored output equals the pooled value
            for (int pos = 3; pos >= 0; --pos) {
              const float v = z[((2 * py + pos / 2) * CW + 2 * px + pos % 2) * F + f];
              if (bf16_round(std::max(v + p.conv_bias[f], 0.0f)) == feat[d]) best = pos;
            }
            arg[d] = feat[d] > 0 ? best : 4;
          }
        }
    std::vector<double> logit(C);
    double mx = -INFINITY;
    for (uint32_t c = 0; c < C; ++c) {
      double acc = 0;
      for (uint32_t d = 0; d < D; ++d)
        acc += double{feat[d]} * bf16_round(p.dense_kernel[d * C + c]);
      logit[c] = acc + p.dense_bias[c];
      mx = std::max(mx, logit[c]);
    }
    double sum = 0;
    for (uint32_t c = 0; c < C; ++c) sum += std::exp(logit[c] - mx);
    r.loss += std::log(sum) - (logit[lbl[b]] - mx);
    uint32_t am = 0;
    for (uint32_t c = 1; c < C; ++c)
      if (logit[c] > logit[am]) am = c;
    r.correct += am == lbl[b];
    std::vector<float> dlog(C);
    for (uint32_t c = 0; c < C; ++c) {
      const double g = (std::exp(logit[c] - mx) / sum - (c == lbl[b] ? 1.0 : 0.0)) / batch;
      dlog[c] = bf16_round(static_cast<float>(g));
      gbd[c] += dlog[c];
      for (uint32_t d = 0; d < D; ++d) gwd[d * C + c] += double{feat[d]} * dlog[c];
    }
    for (uint32_t d = 0; d < D; ++d) {
      if (arg[d] == 4) continue;
      double acc = 0;
      for (uint32_t c = 0; c < C; ++c)
        acc += double{dlog[c]} * bf16_round(p.dense_kernel[d * C + c]);
      const float g = bf16_round(static_cast<float>(acc));
      const uint32_t f = d % F, pix = d / F, py = pix / PW, px = pix % PW;
      const uint32_t oy = 2 * py + arg[d] / 2, ox = 2 * px + arg[d] % 2;
      gbc[f] += g;
      for (uint32_t ky = 0; ky < K; ++ky)
        for (uint32_t kx = 0; kx < K; ++kx)
          gwc[(ky * K + kx) * F + f] += double{g} * x(oy + ky, ox + kx);
    }
  }
  r.loss /= batch;
  for (size_t i = 0; i < gwc.size(); ++i) r.grad.conv_kernel[i] = static_cast<float>(gwc[i]);
  for (size_t i = 0; i < gbc.size(); ++i) r.grad.conv_bias[i] = static_cast<float>(gbc[i]);
  for (size_t i = 0; i < gwd.size(); ++i) r.grad.dense_kernel[i] = static_cast<float>(gwd[i]);
  for (size_t i = 0; i < gbd.size(); ++i) r.grad.dense_bias[i] = static_cast<float>(gbd[i]);
  return r;
}

std::vector<uint8_t> read_fm(void* ctx, uint64_t addr, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  static_cast<functional::FunctionalModel*>(ctx)->hbm().read(addr, v.data(), bytes);
  return v;
}

struct StepCase {
  int n;
  uint64_t ub;
  uint32_t acc;
  uint32_t batch;
  bool small = false;  // the 8x8-image, 4-filter, 5-class model (test_data_parallel's)
};

class TrainStep : public ::testing::TestWithParam<StepCase> {};

TEST_P(TrainStep, OneStepMatchesTheHostReference) {
  const StepCase tc = GetParam();
  CnnSpec spec;
  if (tc.small) {
    spec.height = spec.width = 8;
    spec.filters = 4;
    spec.classes = 5;
  }
  const OptimizerSpec adam;
  const DenseStackSpec ds = spec.stack();
  DenseStackStep step(ds, adam, {tc.n, tc.ub, tc.acc}, tc.batch, 0x100000);
  functional::ChipConfig cfg;
  cfg.n = tc.n;
  cfg.ub_bytes = tc.ub;
  cfg.acc_rows = tc.acc;
  functional::FunctionalModel fm(cfg);

  const DenseParams p0 = glorot_init(ds, 7);
  const CnnParams p(p0);
  std::mt19937 rng(tc.batch);
  std::vector<uint8_t> img(tc.batch * spec.height * spec.width), lbl(tc.batch);
  for (auto& v : img) v = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng() % 256);
  for (auto& v : lbl) v = static_cast<uint8_t>(rng() % spec.classes);
  std::vector<uint16_t> img16(img.size());
  for (size_t i = 0; i < img.size(); ++i)
    img16[i] = fp::fp32_to_bf16(fp::bits(static_cast<float>(img[i]) / 255.0f));

  for (const auto& w : step.state_image(p0, zero_opt_state(ds)))
    fm.hbm().write(w.first, w.second.data(), w.second.size());
  for (const auto& w : step.batch_image(img16, lbl))
    fm.hbm().write(w.first, w.second.data(), w.second.size());
  const uint64_t prog = (0x100000 + step.layout().bytes + 4095) / 4096 * 4096;
  fm.load_program(prog, step.program());
  const auto run = fm.run(prog);
  ASSERT_EQ(run.status, functional::RunStatus::kHalted) << run.describe();
  EXPECT_TRUE(run.undefined_reads.empty())
      << run.undefined_reads.size() << " undefined reads, first at pc 0x" << std::hex
      << run.undefined_reads[0].pc << " addr 0x" << run.undefined_reads[0].addr;

  float loss = 0, correct = 0;
  step.read_metrics(read_fm, &fm, loss, correct);
  const RefStep ref = reference_step(spec, p, img, lbl, tc.batch,
                                     conv_pool_fused(ds, 0, {tc.n, tc.ub, tc.acc}));
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  EXPECT_NEAR(correct, ref.correct, 0.5);

  DenseParams q1;
  DenseOptState t1;
  step.read_state(read_fm, &fm, q1, t1);
  const CnnParams p1(q1);
  struct {
    CnnParams m, v;
    float beta1_power, beta2_power;
  } s1{CnnParams(t1.m), CnnParams(t1.v), t1.beta1_power, t1.beta2_power};
  EXPECT_FLOAT_EQ(s1.beta1_power, 0.9f);
  EXPECT_FLOAT_EQ(s1.beta2_power, 0.999f);
  // After one step from zero moments m = (1 - b1) g: compare the gradients.
  auto compare = [&](const std::vector<float>& m, const std::vector<float>& g, const char* what) {
    ASSERT_EQ(m.size(), g.size()) << what;
    double scale = 0;
    for (float v : g) scale = std::max(scale, std::fabs(double{v}));
    ASSERT_GT(scale, 0) << what;
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < g.size(); ++i) {
      const double e = std::fabs(m[i] / (1.0 - 0.9f) - g[i]);
      if (e > worst) worst = e, at = i;
    }
    EXPECT_LT(worst, 2e-3 * scale) << what << ": gradient " << at << " off by " << worst
                                   << " (largest gradient " << scale << ")";
  };
  compare(s1.m.conv_kernel, ref.grad.conv_kernel, "conv kernel");
  compare(s1.m.conv_bias, ref.grad.conv_bias, "conv bias");
  compare(s1.m.dense_kernel, ref.grad.dense_kernel, "dense kernel");
  compare(s1.m.dense_bias, ref.grad.dense_bias, "dense bias");
  // The update itself: w1 = w0 - lr_t m / (sqrt v + eps) elementwise (host IEEE float).
  const float lr_t = adam.lr * (std::sqrt(1.0f - 0.999f) / (1.0f - 0.9f));
  for (size_t i = 0; i < p.dense_kernel.size(); i += 97) {
    const float m = s1.m.dense_kernel[i], v = s1.v.dense_kernel[i];
    const float want = p.dense_kernel[i] - (lr_t * m) / (std::sqrt(v) + adam.epsilon);
    EXPECT_NEAR(p1.dense_kernel[i], want, 1e-6f * std::fabs(want) + 1e-9f) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, TrainStep,
                         ::testing::Values(StepCase{4, 8192, 64, 5}, StepCase{16, 65536, 256, 8},
                                           StepCase{16, 65536, 512, 20},
                                           StepCase{16, 65536, 1024, 11},
                                           StepCase{4, 8192, 64, 6, true}),
                         [](const auto& info) {
                           return "N" + std::to_string(info.param.n) + "_Acc" +
                                  std::to_string(info.param.acc) + "_B" +
                                  std::to_string(info.param.batch) +
                                  (info.param.small ? "_small" : "");
                         });

TEST(GraphPasses, AutodiffCastsFuseAndLowerTheExampleStep) {
  Graph g = build_forward(CnnSpec{}.stack(), 16);
  g.chip = kFullChip;
  EXPECT_EQ(g.live(), 15u);
  autodiff(g);
  // every parameter gets its gradient and one Adam update
  for (const char* name : {"dconv1.W", "dconv1.b", "ddense1.W", "ddense1.b", "conv1.W'", "conv1.b'",
                           "dense1.W'", "dense1.b'"})
    EXPECT_GE(g.find(name), 0) << name;
  EXPECT_EQ(g.at(g.find("ddense1.W")).shape, (std::vector<uint32_t>{5408, 10}));
  EXPECT_EQ(g.at(g.find("dflat")).shape, (std::vector<uint32_t>{16, 5408}));
  insert_casts(g);
  // every MXU operand is bf16 (directly or through a transpose of a bf16 value)
  for (const Node& n : g.nodes()) {
    if (n.op != "matmul" && n.op != "conv2d" && n.op != "conv2d_filter_grad") continue;
    for (int i : n.inputs) {
      EXPECT_EQ(g.at(i).dtype, DType::kBf16) << n.name << " input " << i;
    }
  }
  fuse(g);
  for (const Node& n : g.nodes()) {
    if (n.dead) continue;
    for (const char* gone : {"relu", "maxpool", "bias_add", "relu_grad", "maxpool_grad",
                             "softmax_cross_entropy", "reduce_sum"}) {
      EXPECT_NE(n.op, gone) << n.name;
    }
  }
  lower(g);
  for (const Node& n : g.nodes()) {
    if (!n.dead) {
      EXPECT_FALSE(n.phase.empty()) << n.name;
    }
  }
  // an op the chip has no lowering for is refused, by name
  g.add("softmax", "extra", {g.find("flat")}, {16, 10}, DType::kF32);
  try {
    lower(g);
    ADD_FAILURE() << "lowered an unknown op";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'softmax' (extra, layer -)"), std::string::npos)
        << e.what();
  }
}

TEST(TrainStepConfig, ImpossibleConfigurationsAreRefusedWithAReason) {
  const DenseStackSpec spec = CnnSpec{}.stack();
  auto msg = [&](ChipShape c, uint32_t batch) -> std::string {
    try {
      DenseStackStep(spec, {}, c, batch, 0);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_NE(msg({16, 2048, 256}, 8).find("UB"), std::string::npos);
  EXPECT_NE(msg({12, 65536, 256}, 8).find("power of two"), std::string::npos);
  EXPECT_NE(msg({16, 65536, 256}, 0).find("batch"), std::string::npos);
}

// Loop compression (sw/compiler/reroll.h): random programs made of repeated patterns with
// stepped fields, broken by one-off instructions, phase marks and existing loops. The result
// expands to exactly the input (every instruction, in order), never puts a loop across a mark
// or a HALT into a body, keeps existing REPEATs, and compresses what repeats.
TEST(Reroll, ExpandsToExactlyTheInputAndRespectsMarks) {
  std::mt19937_64 g(test::test_seed());
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<Instruction> prog;
    std::vector<uint64_t> marks;
    uint64_t achievable = 1;  // a loop per pattern that repeats (and the HALT)
    while (prog.size() < 3000) {
      const int kind = static_cast<int>(g() % 5);
      if (kind == 0) {  // a one-off instruction
        Instruction i;
        i.op = isa::Opcode::kDmaCopy;
        i.elem_bytes = 2;
        i.src = static_cast<uint32_t>(g() % 4096);
        prog.push_back(i);
        ++achievable;
      } else if (kind == 1) {
        marks.push_back(prog.size());
        if (g() % 8 == 0) {  // a stray HALT and a stepped instruction with a step of its own
          Instruction h;
          h.op = isa::Opcode::kHalt;
          prog.push_back(h);
          Instruction st;
          st.op = isa::Opcode::kVpuSt;
          st.addr = 64;
          st.step = 16;
          prog.push_back(st);
          prog.push_back(st);
          achievable += 3;
        }
      } else if (kind == 2 && g() % 4 == 0) {  // an existing loop
        Instruction r;
        r.op = isa::Opcode::kRepeat;
        r.count = 3;
        r.len = 2;
        prog.push_back(r);
        Instruction b;
        b.op = isa::Opcode::kVpuLd;
        b.addr = 64;
        b.step = 64;
        prog.push_back(b);
        b.op = isa::Opcode::kNop;
        b.addr = 0;
        b.step = 0;
        prog.push_back(b);
        achievable += 3;
      } else {  // a pattern of `len` instructions, `reps` times, stepped fields progressing
        const uint32_t len = 1 + static_cast<uint32_t>(g() % 40);  // some longer than a body
        const uint32_t reps = 1 + static_cast<uint32_t>(g() % 30);
        achievable +=
            len <= isa::REPEAT_MAX_LEN && reps > 1 ? std::min(len + 1, len * reps) : len * reps;
        std::vector<Instruction> body(len);
        std::vector<uint32_t> steps(len);
        for (uint32_t j = 0; j < len; ++j) {
          const isa::Opcode ops[] = {isa::Opcode::kVpuLd, isa::Opcode::kVpuSt,
                                     isa::Opcode::kVpuLi, isa::Opcode::kWait,
                                     isa::Opcode::kVpuOp, isa::Opcode::kSignal};
          body[j].op = ops[g() % 6];
          body[j].vd = static_cast<uint8_t>(g() % 3);
          body[j].addr = static_cast<uint32_t>(g() % 1024);
          body[j].value = static_cast<uint32_t>(g() % 8);
          if (body[j].op == isa::Opcode::kVpuOp || body[j].op == isa::Opcode::kSignal)
            body[j].addr = body[j].value = 0;
          // small, negative and wrapping steps
          const uint32_t kinds[] = {0, 32, 64, static_cast<uint32_t>(-96),
                                    static_cast<uint32_t>(g())};
          steps[j] = kinds[g() % 5];
        }
        for (uint32_t r = 0; r < reps; ++r) {
          for (uint32_t j = 0; j < len; ++j) {
            Instruction i = body[j];
            if (isa::is_stepped(i.op)) {
              i.addr +=
                  i.op == isa::Opcode::kWait || i.op == isa::Opcode::kVpuLi ? 0 : r * steps[j];
              i.value += i.op == isa::Opcode::kWait ? r * steps[j] : 0;
              i.imm += i.op == isa::Opcode::kVpuLi ? r * steps[j] : 0;
            }
            prog.push_back(i);
          }
        }
      }
    }
    Instruction halt;
    halt.op = isa::Opcode::kHalt;
    prog.push_back(halt);
    marks.erase(std::unique(marks.begin(), marks.end()), marks.end());
    std::vector<uint64_t> new_marks = marks;
    RerollStats st;
    const std::vector<Instruction> out = reroll(prog, &new_marks, &st);
    EXPECT_EQ(st.before, prog.size());
    EXPECT_EQ(st.after, out.size());
    ASSERT_EQ(isa::expand_repeats(out), isa::expand_repeats(prog)) << "trial " << trial;
    // greedy, not optimal: within a quarter of one loop per repeating pattern
    EXPECT_LE(out.size(), achievable + achievable / 4) << "trial " << trial;
    // each mark: the expansion of the output before it is the expansion of the input before it
    ASSERT_EQ(new_marks.size(), marks.size());
    for (size_t k = 0; k < marks.size(); ++k) {
      const std::vector<Instruction> a(prog.begin(), prog.begin() + marks[k]);
      const std::vector<Instruction> b(out.begin(), out.begin() + new_marks[k]);
      ASSERT_EQ(isa::expand_repeats(b), isa::expand_repeats(a)) << "mark " << k;
    }
    // loops the input had are still there, bodies without HALT (expand_repeats would throw)
    EXPECT_EQ(out.back().op, isa::Opcode::kHalt);
  }
}

// A run longer than a REPEAT's count can hold (65535): the pass takes a longer body (two
// instructions, 35,000 times) rather than two loops; its expansion is the run, wrapping steps
// included.
TEST(Reroll, RunsBeyondTheCountLimitTakeALongerBody) {
  std::vector<Instruction> prog(70000);
  for (size_t k = 0; k < prog.size(); ++k) {
    prog[k].op = isa::Opcode::kVpuLd;
    prog[k].addr = static_cast<uint32_t>(0xFFFFFF00u + 64 * k);  // wraps around 2^32
  }
  Instruction halt;
  halt.op = isa::Opcode::kHalt;
  prog.push_back(halt);
  RerollStats st;
  const std::vector<Instruction> out = reroll(prog, nullptr, &st);
  EXPECT_EQ(isa::expand_repeats(out), isa::expand_repeats(prog));
  EXPECT_LE(out.size(), 6u);
  EXPECT_EQ(st.loops, 1u);
  EXPECT_EQ(out[0].op, isa::Opcode::kRepeat);
  EXPECT_EQ(out[0].count * out[0].len, 70000);
}

// The example step compresses ~3x and executes exactly the instructions it did before.
TEST(Reroll, TheTrainingStepExecutesTheSameInstructionsFromAThirdOfTheBytes) {
  DenseStackStep step(CnnSpec{}.stack(), {}, {16, 65536, 1024}, 32, 0x100000);
  const StepStats& st = step.stats();
  EXPECT_EQ(isa::expand_repeats(step.program()).size(), st.executed);
  EXPECT_LT(st.instructions * 3, st.executed) << st.instructions << " of " << st.executed;
}

}  // namespace
}  // namespace tessera::compiler

namespace tessera::compiler {
namespace {

// The DMA's peak, counted element by element (the independent reference for dma_run_cycles):
// a piece ends after element i when, on either walk, element i + 1 does not follow in the same
// iteration of loop 0 at the next address, or lies in another 32-byte word.
uint64_t dma_pieces_by_element(const DmaWalk& src, const DmaWalk& dst, int e) {
  auto addresses = [&](const DmaWalk& w) {
    std::vector<std::pair<int64_t, bool>> out;  // address, last of a loop-0 iteration
    std::vector<uint32_t> idx(w.loops.size(), 0);
    const uint64_t n = w.elements();
    for (uint64_t i = 0; i < n; ++i) {
      int64_t a = static_cast<int64_t>(w.base);
      for (size_t l = 0; l < idx.size(); ++l) a += int64_t{idx[l]} * w.loops[l].second;
      const bool contiguous = !w.loops.empty() && w.loops[0].second == e;
      bool end_of_row = true;
      if (!idx.empty()) {
        end_of_row = idx[0] + 1 == w.loops[0].first;
        ++idx[0];
        for (size_t l = 0; l + 1 < idx.size() && idx[l] == w.loops[l].first; ++l) {
          idx[l] = 0;
          ++idx[l + 1];
        }
      }
      out.push_back({a, end_of_row || !contiguous});
    }
    return out;
  };
  const auto s = addresses(src), d = addresses(dst);
  uint64_t pieces = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    auto breaks = [&](const std::vector<std::pair<int64_t, bool>>& w) {
      return i + 1 == w.size() || w[i].second || w[i + 1].first / 32 != w[i].first / 32;
    };
    if (breaks(s) || breaks(d)) ++pieces;
  }
  return pieces;
}

TEST(ProgramBuilderStats, DmaRunCyclesCountTheDmasPiecesElementByElement) {
  std::mt19937_64 rng(test::test_seed());
  for (int trial = 0; trial < 400; ++trial) {
    const int e = rng() % 2 ? 2 : 4;
    auto random_walk = [&] {
      DmaWalk w;
      w.space = rng() % 2 ? isa::Space::kHbm : isa::Space::kUb;
      w.base = 4096 + (rng() % 64) * e;
      const int loops = 1 + static_cast<int>(rng() % 3);
      for (int l = 0; l < loops; ++l) {
        const uint32_t count = 1 + static_cast<uint32_t>(rng() % (l == 0 ? 40 : 4));
        const int32_t stride = l == 0 && rng() % 4 != 0 ? e : e * static_cast<int32_t>(rng() % 64);
        w.loops.push_back({count, stride});
      }
      return w;
    };
    DmaWalk src = random_walk(), dst = random_walk();
    // the same element count: the destination's total split over one or two loops (a divisor
    // of the source's total as its inner count)
    const uint32_t total = static_cast<uint32_t>(src.elements());
    uint32_t inner = 1 + static_cast<uint32_t>(rng() % total);
    while (total % inner) --inner;
    const int32_t outer_stride =
        (static_cast<int32_t>(inner) + static_cast<int32_t>(rng() % 9)) * e;
    dst.loops = {{inner, rng() % 3 ? e : 3 * e}, {total / inner, outer_stride}};
    if (rng() % 2) std::swap(src, dst);
    SCOPED_TRACE("trial " + std::to_string(trial));
    EXPECT_EQ(dma_run_cycles(src, dst, e), dma_pieces_by_element(src, dst, e));
    for (const DmaWalk* w : {&src, &dst}) {
      // the words touched one after another: an element in another 32-byte word than the one
      // before starts a burst
      uint64_t words = 0;
      int64_t last = -1;
      std::vector<uint32_t> idx(w->loops.size(), 0);
      for (uint64_t i = 0; i < w->elements(); ++i) {
        int64_t a = static_cast<int64_t>(w->base);
        for (size_t l = 0; l < idx.size(); ++l) a += int64_t{idx[l]} * w->loops[l].second;
        if (a / 32 != last) ++words;
        last = a / 32;
        for (size_t l = 0; l < idx.size() && ++idx[l] == w->loops[l].first; ++l) idx[l] = 0;
      }
      EXPECT_EQ(dma_words(*w, e), words);
      // the reads: an element in none of the last DMA_READ_SLOTS words read is a read
      std::deque<int64_t> kept;
      uint64_t reads = 0;
      std::fill(idx.begin(), idx.end(), 0u);
      for (uint64_t i = 0; i < w->elements(); ++i) {
        int64_t a = static_cast<int64_t>(w->base);
        for (size_t l = 0; l < idx.size(); ++l) a += int64_t{idx[l]} * w->loops[l].second;
        if (std::find(kept.begin(), kept.end(), a / 32) == kept.end()) {
          ++reads;
          kept.push_back(a / 32);
          if (kept.size() > chip_params::DMA_READ_SLOTS) kept.pop_front();
        }
        for (size_t l = 0; l < idx.size() && ++idx[l] == w->loops[l].first; ++l) idx[l] = 0;
      }
      EXPECT_EQ(dma_read_words(*w, e), reads);
      EXPECT_LE(dma_read_words(*w, e), dma_words(*w, e));  // a kept word is never read again
    }
  }
  // A contiguous bf16 copy of whole aligned words: 16 elements a cycle.
  DmaWalk a{isa::Space::kHbm, 0, {{1024, 2}}}, b{isa::Space::kUb, 64, {{1024, 2}}};
  EXPECT_EQ(dma_run_cycles(a, b, 2), 64u);
  // Misaligned by one element on one side: the pieces end at both sides' word edges.
  b.base = 66;
  EXPECT_EQ(dma_run_cycles(a, b, 2), 65u + 64u - 1u);
  // A gather: one element a cycle.
  a.loops = {{9, 56}, {100, 2}};
  b.loops = {{900, 2}};
  EXPECT_EQ(dma_run_cycles(a, b, 2), 900u);
}

}  // namespace
}  // namespace tessera::compiler

namespace tessera::compiler {
namespace {

// The statistics count what the program executes, the fenced all-reduce blocks of a
// data-parallel step included: every unit's instructions and the MACs against the expanded
// program; the link bytes in the collective phases and only there.
TEST(ProgramBuilderStats, DataParallelStepCountsItsCollectives) {
  DenseStackStep step(CnnSpec{}.stack(), {}, {16, 65536, 1024}, 32, 0x100000, StepKind::kTrain,
                      nullptr, {}, Replication{2, 0});
  const StepStats& st = step.stats();
  std::array<uint64_t, 3> per_unit{};
  uint64_t rows = 0;
  for (const isa::Instruction& i : isa::expand_repeats(step.program())) {
    switch (i.op) {
      case isa::Opcode::kWait:
      case isa::Opcode::kSignal:
        ++per_unit[static_cast<size_t>(i.unit)];
        break;
      case isa::Opcode::kDmaLoop:
      case isa::Opcode::kDmaCopy:
        ++per_unit[0];
        break;
      case isa::Opcode::kMxuMm:
        rows += i.rows;
        [[fallthrough]];
      case isa::Opcode::kMxuLdw:
        ++per_unit[1];
        break;
      case isa::Opcode::kVpuLd:
      case isa::Opcode::kVpuSt:
      case isa::Opcode::kVpuOp:
      case isa::Opcode::kVpuLi:
        ++per_unit[2];
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(st.dma, per_unit[0]);
  EXPECT_EQ(st.mxu, per_unit[1]);
  EXPECT_EQ(st.vpu, per_unit[2]);
  EXPECT_EQ(st.macs, rows * 16 * 16);
  uint64_t vpu = 0, ici = 0;
  for (const auto& p : st.phases) {
    vpu += p.vpu;
    ici += p.ici_flits;
    const bool collective = p.name == "reduce_scatter" || p.name == "allgather";
    EXPECT_EQ(p.ici_flits > 0, collective) << p.name;
    if (collective) {
      const Roofline r = roofline(p, 1);
      EXPECT_GT(r.dma, 0u) << p.name;
      EXPECT_EQ(r.ici, p.ici_flits * 3) << p.name;  // a 40-byte flit, 16 bytes a cycle
    }
  }
  EXPECT_EQ(vpu, st.vpu_cycles);
  EXPECT_EQ(st.vpu_cycles, st.vpu);  // at N = 16 every VPU access is at most two UB words
  EXPECT_EQ(ici, st.ici_flits);
  EXPECT_EQ(step.ici_bound_cycles(), st.ici_flits * 3);
}

// The VPU bound counts a UB access by its words, two a cycle (its two UB ports): at N = 128 an
// fp32 vector is 512 bytes (16 words: 8 cycles), a bf16 one 8 words (4); an ACC row, an
// operation and a sync instruction one cycle each.
TEST(ProgramBuilderStats, VpuCyclesCountWideAccessesByTheirWords) {
  ProgramBuilder b(128, 262144, 1024);
  b.vpu_ld(isa::Kind::kUbF32, 1, 0);
  b.vpu_st(isa::Kind::kUbBf16, 1, 1024);
  b.vpu_ld(isa::Kind::kAcc, 2, 3);
  b.vpu_op(isa::Funct::kAdd, 3, 1, 2);
  b.signal(isa::Unit::kVpu);
  EXPECT_EQ(b.stats().per_unit[2], 5u);
  EXPECT_EQ(b.stats().vpu_cycles(), 8u + 4u + 1u + 1u + 1u);
  ProgramBuilder b16(16, 65536, 256);
  b16.vpu_ld(isa::Kind::kUbF32, 1, 0);  // 64 bytes: two words in one cycle
  b16.vpu_st(isa::Kind::kUbBf16, 1, 64);
  EXPECT_EQ(b16.stats().vpu_cycles(), 2u);
}

// The builder's sync with reads-only SIGNALs: a DMA overwriting the rows an MXU.MM read waits
// for the MXU's SIGNAL ..., reads; a VPU reading the ACC rows it wrote skips that signal and
// gets a full one (emitted on demand, after the reads-only one); a reads-only signal is not
// emitted again where a full one already covers the work, and a full one is where only a
// reads-only one did.
TEST(ProgramBuilderSync, ReadsOnlySignalsServeOnlyOverwritesOfWhatTheMxuRead) {
  ProgramBuilder b(4, 8192, 64);
  b.mxu_ldw(0x0, 8);
  b.mxu_mm(false, 0x100, 8, 16, 0);
  b.signal(isa::Unit::kMxu, true);
  b.dma_copy(lowering::hbm(0x10000, {{64, 2}}), lowering::ub(0x100, {{64, 2}}), 2);  // the MM's rows
  b.vpu_ld(isa::Kind::kAcc, 1, 3);                               // a row the MM wrote
  b.signal(isa::Unit::kMxu, true);                               // covered by the full one
  b.mxu_mm(true, 0x100, 8, 16, 0);
  b.signal(isa::Unit::kMxu, true);
  b.signal(isa::Unit::kMxu);  // nothing new, but only a reads-only one covers it
  const std::vector<Instruction> p = b.finish();
  std::vector<std::string> sync;
  for (const Instruction& i : p)
    if (i.op == isa::Opcode::kSignal || i.op == isa::Opcode::kWait)
      sync.push_back(std::string(i.op == isa::Opcode::kSignal ? "signal " : "wait ") +
                     std::to_string(int(i.unit)) + " sc" + std::to_string(i.sc) +
                     (i.op == isa::Opcode::kWait ? " " + std::to_string(i.value) : "") +
                     (i.reads ? " reads" : ""));
  const std::vector<std::string> want = {
      "signal 1 sc1 reads",  // after the first MM
      "wait 0 sc1 1",        // the DMA: the MXU has read its rows
      "signal 1 sc1",        // on demand: the VPU needs the MM's results
      "wait 2 sc1 2",
      "wait 1 sc0 1",        // the second MM reads what the DMA wrote ...
      "signal 2 sc2",        // ... and accumulates into rows the VPU read
      "wait 1 sc2 1",
      "signal 1 sc1 reads",
      "signal 1 sc1"};
  // (the DMA's own SIGNAL for the second MM's wait comes before it)
  std::vector<std::string> got;
  for (const auto& x : sync)
    if (x.rfind("signal 0", 0) != 0) got.push_back(x);
  EXPECT_EQ(got, want);
  EXPECT_EQ(std::count(sync.begin(), sync.end(), "signal 0 sc0"), 1);
}

}  // namespace
}  // namespace tessera::compiler
