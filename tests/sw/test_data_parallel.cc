// Data-parallel training steps (tessera/compiler.h, Replication; docs/multichip.md) on the
// functional model: the split update (gradients to HBM, then Adam) is bit-identical to the
// fused single-chip step; on a ring of P functional chips every replica ends each step with
// the bf16 weight copies and fp32 biases of the state its owners updated (the sharded update),
// and matches one chip training on the whole global batch up to the summation order of the
// gradients.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "sw/numerics/fp_ref.h"
#include "tessera/compiler.h"
#include "tessera/functional_model.h"
#include "tessera/functional_ring.h"

namespace tessera::compiler {
namespace {

constexpr uint64_t kBase = 0x100000;

std::vector<uint8_t> read_fm(void* ctx, uint64_t addr, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  static_cast<functional::FunctionalModel*>(ctx)->hbm().read(addr, v.data(), bytes);
  return v;
}

struct Batch {
  std::vector<uint16_t> img16;
  std::vector<uint8_t> lbl;
};

Batch random_batch(std::mt19937& rng, uint32_t batch, uint32_t pixels = 784,
                   uint32_t classes = 10) {
  Batch b;
  b.img16.resize(size_t{batch} * pixels);
  b.lbl.resize(batch);
  for (auto& v : b.img16) {
    const uint8_t px = static_cast<uint8_t>(rng() % 3 == 0 ? 0 : rng() % 256);
    v = fp::fp32_to_bf16(fp::bits(static_cast<float>(px) / 255.0f));
  }
  for (auto& v : b.lbl) v = static_cast<uint8_t>(rng() % classes);
  return b;
}

Batch slice(const Batch& b, uint32_t first, uint32_t count) {
  const size_t pixels = b.img16.size() / b.lbl.size();
  Batch s;
  s.img16.assign(b.img16.begin() + pixels * first, b.img16.begin() + pixels * (first + count));
  s.lbl.assign(b.lbl.begin() + first, b.lbl.begin() + first + count);
  return s;
}

void load(functional::FunctionalModel& fm, const std::vector<CnnTrainStep::Write>& ws) {
  for (const auto& w : ws) fm.hbm().write(w.first, w.second.data(), w.second.size());
}

std::vector<float> flat(const CnnParams& p) {
  std::vector<float> v = p.conv_kernel;
  v.insert(v.end(), p.conv_bias.begin(), p.conv_bias.end());
  v.insert(v.end(), p.dense_kernel.begin(), p.dense_kernel.end());
  v.insert(v.end(), p.dense_bias.begin(), p.dense_bias.end());
  return v;
}

struct Chip {
  int n;
  uint64_t ub;
  uint32_t acc;
};

class SplitUpdate : public ::testing::TestWithParam<Chip> {};

// The split program (gradients through HBM, then Adam per tensor) with one replica leaves the
// same bits as the fused program, step after step.
TEST_P(SplitUpdate, BitIdenticalToTheFusedStep) {
  const Chip c = GetParam();
  const CnnSpec spec;
  const uint32_t batch = 6;
  const functional::ChipConfig cfg{c.n, c.ub, c.acc};
  Replication split;
  split.split_update = true;
  CnnTrainStep fused(spec, AdamSpec{}, {c.n, c.ub, c.acc}, batch, kBase);
  CnnTrainStep sp(spec, AdamSpec{}, {c.n, c.ub, c.acc}, batch, kBase, StepKind::kTrain, nullptr,
                  split);
  ASSERT_NE(sp.layout().grads, 0u);
  bool has_update = false;
  for (const auto& ph : sp.stats().phases) has_update = has_update || ph.name == "update";
  EXPECT_TRUE(has_update);
  functional::FunctionalModel a(cfg), b(cfg);
  const CnnParams p0 = glorot_init(spec, 3);
  load(a, fused.state_image(p0, zero_adam_state(spec)));
  load(b, sp.state_image(p0, zero_adam_state(spec)));
  a.load_program(fused.layout().program, fused.program());
  b.load_program(sp.layout().program, sp.program());
  std::mt19937 rng(11);
  for (int s = 0; s < 3; ++s) {
    const Batch bt = random_batch(rng, batch);
    load(a, fused.batch_image(bt.img16, bt.lbl));
    load(b, sp.batch_image(bt.img16, bt.lbl));
    const auto ra = a.run(fused.layout().program);
    const auto rb = b.run(sp.layout().program);
    ASSERT_EQ(ra.status, functional::RunStatus::kHalted) << ra.describe();
    ASSERT_EQ(rb.status, functional::RunStatus::kHalted) << rb.describe();
    EXPECT_TRUE(rb.undefined_reads.empty()) << "the split program reads memory it never wrote";
    float la, ca, lb, cb;
    fused.read_metrics(read_fm, &a, la, ca);
    sp.read_metrics(read_fm, &b, lb, cb);
    EXPECT_EQ(fp::bits(la), fp::bits(lb)) << "step " << s;
    EXPECT_EQ(ca, cb);
    CnnParams pa, pb;
    AdamState sa, sb;
    fused.read_state(read_fm, &a, pa, sa);
    sp.read_state(read_fm, &b, pb, sb);
    const auto wa = flat(pa), wb = flat(pb), ma = flat(sa.m), mb = flat(sb.m), va = flat(sa.v),
               vb = flat(sb.v);
    ASSERT_EQ(0, std::memcmp(wa.data(), wb.data(), wa.size() * 4)) << "weights, step " << s;
    ASSERT_EQ(0, std::memcmp(ma.data(), mb.data(), ma.size() * 4)) << "m, step " << s;
    ASSERT_EQ(0, std::memcmp(va.data(), vb.data(), va.size() * 4)) << "v, step " << s;
    // the bf16 copies the next step's matmuls read
    const HbmLayout& L = fused.layout();
    const HbmLayout& M = sp.layout();
    const uint64_t d = spec.features(), cpad = fused.class_pad();
    EXPECT_EQ(read_fm(&a, L.dense_w16t, d * cpad * 2), read_fm(&b, M.dense_w16t, d * cpad * 2));
    EXPECT_EQ(read_fm(&a, L.conv_w16, fused.tap_pad() * spec.filters * 2),
              read_fm(&b, M.conv_w16, sp.tap_pad() * spec.filters * 2));
  }
}

INSTANTIATE_TEST_SUITE_P(Chips, SplitUpdate,
                         ::testing::Values(Chip{4, 8192, 64}, Chip{16, 65536, 1024}),
                         [](const auto& info) { return "N" + std::to_string(info.param.n); });

// P replicas on a functional ring, per-replica batch b, against one chip with batch P x b: the
// example model, and a small one (8x8 images, 4 filters, 5 classes: 36 features, 3 column
// groups) on 4 and 5 chips, where some chunks hold no columns.
struct DpCase {
  int replicas;
  bool small;
  int steps;
};

class DataParallel : public ::testing::TestWithParam<DpCase> {};

// The largest |a - b| over the largest |b|: a difference relative to the tensor's scale.
double scaled_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0, scale = 1e-30;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(double{a[i]} - b[i]));
    scale = std::max(scale, std::fabs(double{b[i]}));
  }
  return worst / scale;
}

TEST_P(DataParallel, ReplicasStayIdenticalAndTrackOneChip) {
  const int P = GetParam().replicas;
  CnnSpec spec;
  if (GetParam().small) {
    spec.height = spec.width = 8;
    spec.filters = 4;
    spec.classes = 5;
  }
  const uint32_t pixels = spec.height * spec.width;
  const uint32_t b = 4, global = b * P;
  const ChipShape shape{4, 8192, 64};
  const functional::ChipConfig cfg{4, 8192, 64};
  std::vector<CnnTrainStep> steps;
  for (int r = 0; r < P; ++r) {
    Replication rep;
    rep.replicas = P;
    rep.rank = r;
    steps.emplace_back(spec, AdamSpec{}, shape, b, kBase, StepKind::kTrain, nullptr, rep);
  }
  CnnTrainStep one(spec, AdamSpec{}, shape, global, kBase);
  functional::FunctionalRing ring(P, cfg);
  functional::FunctionalModel single(cfg);
  const CnnParams p0 = glorot_init(spec, 5);
  for (int r = 0; r < P; ++r) {
    load(ring.chip(r), steps[r].state_image(p0, zero_adam_state(spec)));
    ring.chip(r).load_program(steps[r].layout().program, steps[r].program());
  }
  load(single, one.state_image(p0, zero_adam_state(spec)));
  single.load_program(one.layout().program, one.program());
  std::mt19937 rng(21);
  const int steps_to_run = GetParam().steps;
  double worst_loss = 0, worst_weight = 0, worst_moment = 0;
  for (int s = 0; s < steps_to_run; ++s) {
    const Batch bt = random_batch(rng, global, pixels, spec.classes);
    for (int r = 0; r < P; ++r) {
      const Batch sh = slice(bt, r * b, b);
      load(ring.chip(r), steps[r].batch_image(sh.img16, sh.lbl));
    }
    load(single, one.batch_image(bt.img16, bt.lbl));
    std::vector<uint64_t> progs;
    for (int r = 0; r < P; ++r) progs.push_back(steps[r].layout().program);
    const functional::RingResult rr = ring.run(progs);
    ASSERT_TRUE(rr.all_halted()) << rr.describe();
    const auto rs = single.run(one.layout().program);
    ASSERT_EQ(rs.status, functional::RunStatus::kHalted) << rs.describe();
    // The update is sharded: each replica's chunk from its owner (merge_replica_states) is
    // the current state; every replica holds the bf16 copies of those weights and the fp32
    // biases, bit for bit as the host rounds them (state_image).
    std::vector<CnnParams> ps(static_cast<size_t>(P));
    std::vector<AdamState> ss(static_cast<size_t>(P));
    for (int r = 0; r < P; ++r) steps[r].read_state(read_fm, &ring.chip(r), ps[r], ss[r]);
    CnnParams p_r0;
    AdamState s_r0;
    steps[0].merge_replica_states(ps, ss, p_r0, s_r0);
    const std::vector<CnnTrainStep::Write> expect = steps[0].state_image(p_r0, s_r0);
    double loss_sum = 0, correct = 0;
    for (int r = 0; r < P; ++r) {
      for (const auto& range : steps[r].replicated_ranges()) {
        const auto w = std::find_if(expect.begin(), expect.end(),
                                    [&](const auto& x) { return x.first == range.first; });
        ASSERT_NE(w, expect.end());
        ASSERT_EQ(w->second.size(), range.second);
        const std::vector<uint8_t> got = read_fm(&ring.chip(r), range.first, range.second);
        ASSERT_EQ(got, w->second) << "replica " << r << ", step " << s << ", the copy at 0x"
                                  << std::hex << range.first;
      }
      EXPECT_EQ(ss[r].beta1_power, s_r0.beta1_power);
      EXPECT_TRUE(rr.chips[r].undefined_reads.empty()) << "replica " << r;
      float l, c;
      steps[r].read_metrics(read_fm, &ring.chip(r), l, c);
      loss_sum += l;
      correct += c;
    }
    float l1, c1;
    one.read_metrics(read_fm, &single, l1, c1);
    // the global loss is the mean of the replicas' means (equal shards)
    EXPECT_NEAR(loss_sum / P, l1, 1e-5 * l1) << "step " << s;
    EXPECT_EQ(correct, c1) << "step " << s;
    // weights: one chip and the ring differ only by the gradients' summation order
    CnnParams p1;
    AdamState s1;
    one.read_state(read_fm, &single, p1, s1);
    const auto w1 = flat(p1), wd = flat(p_r0);
    // (docs/multichip.md, "Equivalence": the bound and why; measured ~2e-8 over 20 steps)
    double worst = 0;
    for (size_t i = 0; i < w1.size(); ++i)
      worst = std::max(worst, std::fabs(double{w1[i]} - wd[i]));
    EXPECT_LT(worst, 1e-6) << "step " << s;
    worst_weight = std::max(worst_weight, worst);
    // the moments too (each part from its owner): up to the same summation-order differences,
    // relative to each tensor's scale (v is ~g^2, far below 1)
    for (const auto& [mine, one_chip] :
         {std::pair{flat(s_r0.m), flat(s1.m)}, std::pair{flat(s_r0.v), flat(s1.v)}})
      EXPECT_LT(scaled_difference(mine, one_chip), 1e-4) << "step " << s;
    worst_moment = std::max({worst_moment, scaled_difference(flat(s_r0.m), flat(s1.m)),
                             scaled_difference(flat(s_r0.v), flat(s1.v))});
    worst_loss = std::max(worst_loss, std::fabs(loss_sum / P - l1) / l1);
  }
  std::cout << P << " replicas" << (GetParam().small ? " (small model)" : "") << ", "
            << steps_to_run << " steps: largest weight difference " << worst_weight
            << ", largest scaled moment difference " << worst_moment
            << ", largest relative loss difference " << worst_loss << "\n";
}

INSTANTIATE_TEST_SUITE_P(Replicas, DataParallel,
                         ::testing::Values(DpCase{2, false, 20}, DpCase{3, false, 3},
                                           DpCase{4, true, 4}, DpCase{5, true, 4}),
                         [](const auto& info) {
                           return std::to_string(info.param.replicas) +
                                  (info.param.small ? "_small" : "");
                         });

// The gradient vector's chunks (GradShards): they cover the tensors once, in whole groups of
// max(N, 16) columns, balanced to within one group of the ideal, and chip r owns chunk r + 1.
TEST(GradShards, ChunksCoverTheGradientsBalancedInWholeGroups) {
  const CnnSpec spec;
  const uint32_t D = spec.features(), C = spec.classes;
  for (const uint32_t n : {4u, 16u})
    for (int P = 1; P <= 4; ++P) {
      SCOPED_TRACE("N " + std::to_string(n) + ", P " + std::to_string(P));
      Replication rep;
      rep.replicas = P;
      rep.split_update = true;
      const CnnTrainStep st(spec, AdamSpec{},
                            ChipShape{int(n), n == 4 ? 8192u : 65536u, n == 4 ? 64u : 256u}, 2,
                            kBase, StepKind::kTrain, nullptr, rep);
      const GradShards& S = st.shards();
      const uint32_t cpad = st.class_pad();
      EXPECT_EQ(S.small, spec.taps() * spec.filters + spec.filters + cpad);
      ASSERT_EQ(S.col.size(), size_t(P) + 1);
      EXPECT_EQ(S.col.front(), 0u);
      EXPECT_EQ(S.col.back(), D);
      EXPECT_EQ(S.chunk % n, 0u);
      EXPECT_EQ(st.layout().grads_elems, uint64_t{S.chunk} * P);
      const uint32_t group = std::max(n, 16u);
      const double ideal = double(S.small + C * D) / P;
      uint32_t largest = 0;
      for (int k = 0; k < P; ++k) {
        ASSERT_LE(S.col[k], S.col[k + 1]);
        if (k > 0) EXPECT_EQ(S.col[k] % group, 0u) << "boundary " << k;
        const uint32_t size = (k == 0 ? S.small : 0) + C * (S.col[k + 1] - S.col[k]);
        EXPECT_LE(size, S.chunk);
        largest = std::max(largest, size);
        EXPECT_EQ(S.owner(k), (k + P - 1) % P);
      }
      EXPECT_LT(largest, ideal + C * group) << "unbalanced";
      EXPECT_LT(S.chunk, largest + n);
    }
}

}  // namespace
}  // namespace tessera::compiler
