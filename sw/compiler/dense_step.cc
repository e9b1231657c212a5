// DenseStackStep: lowers a training step of a Dense stack op by op (tessera/dense_step.h;
// docs/compiler.md, "Dense stacks").
//
//   phase      work
//   setup      VPU: b1^t, b2^t, lr_t (Adam) from the step's learning rate (the host's row)
//   fwd_l      matmul x_{l-1} W_l (W^T rows, MXU.LDW t) -> VPU bias, relu -> x_l (bf16, HBM);
//              the last layer: bias, softmax, cross-entropy, accuracy, d logits (bf16)
//   bwd_l      DMA dz_l -> dz_l^T; matmul dz_l W_l^T -> VPU relu gradient by x_{l-1} > 0 ->
//              dz_{l-1} (l > 1); matmul dz_l^T x_{l-1} -> VPU optimizer on W_l^T and its bf16
//              copy (the gradient read from the ACC); matmul 1^T dz_l -> optimizer on b_l
// Layer l's input gradient is computed before its weights change (it reads the old copy).
#include "tessera/dense_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <tuple>

#include "sw/compiler/conv_pool_lowering.h"
#include "sw/compiler/feature_lowering.h"
#include "sw/compiler/lowering_util.h"
#include "tessera/allreduce.h"
#include "sw/compiler/matmul_lowering.h"
#include "sw/compiler/program_builder.h"
#include "sw/compiler/reroll.h"
#include "sw/compiler/vpu_math.h"
#include "sw/numerics/fp_ref.h"

namespace tessera::compiler {
namespace {
using namespace lowering;
using Fn = isa::Funct;
constexpr isa::Kind kF32 = isa::Kind::kUbF32;
constexpr isa::Kind kBf16 = isa::Kind::kUbBf16;
constexpr isa::Kind kAcc = isa::Kind::kAcc;
constexpr isa::Space kHbm = isa::Space::kHbm;
constexpr isa::Space kUb = isa::Space::kUb;

// The HBM planner's interval first-fit: each buffer takes the lowest offset (32-byte aligned)
// where it overlaps no placed buffer whose phase interval intersects its own.
uint64_t plan_transients(std::vector<DenseStackStep::Layout::Transient>& ts) {
  std::vector<size_t> order(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return ts[x].bytes > ts[y].bytes; });
  std::vector<size_t> placed;
  uint64_t total = 0;
  for (size_t i : order) {
    auto& t = ts[i];
    uint64_t at = 0;
    for (bool moved = true; moved;) {
      moved = false;
      for (size_t j : placed) {
        const auto& p = ts[j];
        const bool live = p.first <= t.last && t.first <= p.last;
        if (live && at < p.addr + p.bytes && p.addr < at + t.bytes) {
          at = (p.addr + p.bytes + 31) / 32 * 32;
          moved = true;
        }
      }
    }
    t.addr = at;
    placed.push_back(i);
    total = std::max(total, at + t.bytes);
  }
  return total;
}

void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + i] = static_cast<uint8_t>(x >> (8 * i));
}
// A forward epilogue piece: ACC + bias (the fp32 rows at ub_bias, one per column tile), relu
// if asked, as bf16 rows of the piece's scratch (ct N values a row). V3, V4.
void emit_bias_relu(ProgramBuilder& b, const Block& k, uint32_t ub_bias, bool relu) {
  const uint32_t row2n = 2 * b.n(), row4n = 4 * b.n(), pitch = k.ct * row2n;
  for (uint32_t c = 0; c < k.ct; ++c) {
    b.vpu_ld(kF32, 4, ub_bias + (k.c0 + c) * row4n);
    for (uint32_t r = 0; r < k.rows; ++r) {
      b.vpu_ld(kAcc, 3, k.acc(r, c));
      b.vpu_op(Fn::kAdd, 3, 3, 4);
      if (relu) b.vpu_op(Fn::kMax, 3, 3, 0);
      b.vpu_st(kBf16, 3, k.scratch + r * pitch + c * row2n);
    }
  }
}
uint32_t get32(const std::vector<uint8_t>& v, size_t at) {
  return uint32_t{v[at]} | uint32_t{v[at + 1]} << 8 | uint32_t{v[at + 2]} << 16 |
         uint32_t{v[at + 3]} << 24;
}
// x = H(x) (dropout_hash) on the VPU: 22 instructions; clobbers t and s.
void emit_hash(ProgramBuilder& b, int x, int t, int s) {
  auto add_not_shl = [&](uint32_t k) {
    b.vpu_li(s, k);
    b.vpu_op(Fn::kShl, t, x, s);
    b.vpu_li(s, 0xFFFFFFFFu);
    b.vpu_op(Fn::kIXor, t, t, s);
    b.vpu_op(Fn::kIAdd, x, x, t);
  };
  auto xor_shr = [&](uint32_t k) {
    b.vpu_li(s, k);
    b.vpu_op(Fn::kShr, t, x, s);
    b.vpu_op(Fn::kIXor, x, x, t);
  };
  add_not_shl(15);
  xor_shr(10);
  b.vpu_li(s, 3);
  b.vpu_op(Fn::kShl, t, x, s);
  b.vpu_op(Fn::kIAdd, x, x, t);
  xor_shr(6);
  add_not_shl(11);
  xor_shr(16);
}
}  // namespace

uint32_t dropout_hash(uint32_t key) {
  key += ~(key << 15);
  key ^= key >> 10;
  key += key << 3;
  key ^= key >> 6;
  key += ~(key << 11);
  key ^= key >> 16;
  return key;
}

bool dropout_keep(uint32_t seed, uint32_t step, uint32_t sample, uint32_t unit, float rate) {
  uint32_t h = dropout_hash(dropout_hash(dropout_hash(seed ^ step) + sample) + unit);
  const float f = fp::f32((h >> 9) | 0x3F800000u);
  return !(f < 1.0f + rate);
}

bool conv_pool_fused(const DenseStackSpec& spec, size_t i, const ChipShape& chip) {
  using K = FeatureLayerSpec::Kind;
  if (i + 1 >= spec.features.size()) return false;
  const FeatureLayerSpec &c = spec.features[i], &p = spec.features[i + 1];
  if (c.kind != K::kConv || !c.relu || p.kind != K::kMaxPool || p.pool != 2) return false;
  const auto shapes = feature_shapes(spec);
  const Shape3 &in = shapes[i], &out = shapes[i + 1];
  const uint64_t n = static_cast<uint64_t>(chip.n);
  // A stride-1 conv of a multiple of N channels streams its input by implicit GEMM, whose
  // pieces are single output rows: there the pool stays a layer of its own. Elsewhere: two
  // output rows a piece in an ACC half; two pieces' scratch (2 N bytes an ACC row) in a quarter
  // of the UB.
  if (c.stride == 1 && in.c % n == 0) return false;
  return out.h % 2 == 0 && out.w % 2 == 0 && c.filters % n == 0 &&
         2 * uint64_t{out.w} <= chip.acc_rows / 2 && 8 * uint64_t{out.w} * n <= chip.ub_bytes / 4;
}

// The routing's stage (pool_routed_in_weight_gradient): this many pooled rows of dp and codes;
// a contraction group then spans at most (kRouteStageRows - 2) 2 wo conv rows.
constexpr uint32_t kRouteStageRows = 6;

bool pool_routed_in_weight_gradient(const DenseStackSpec& spec, size_t i, const ChipShape& chip) {
  if (!conv_pool_fused(spec, i, chip)) return false;
  for (size_t j = 0; j < i; ++j)
    if (spec.features[j].kind == FeatureLayerSpec::Kind::kConv) return false;
  const auto shapes = feature_shapes(spec);
  const Shape3 &in = shapes[i], &pooled = shapes[i + 2];
  return in.c == 1 && spec.features[i].stride == 1 &&
         2 * uint64_t{kRouteStageRows} * pooled.w * pooled.c * 4 <= chip.ub_bytes / 3;
}

std::vector<Shape3> feature_shapes(const DenseStackSpec& spec) {
  std::vector<Shape3> shapes{spec.input_shape};
  if (spec.features.empty()) return shapes;
  const Shape3& s0 = spec.input_shape;
  if (s0.size() == 0)
    throw std::invalid_argument("the input shape " + std::to_string(s0.h) + " x " +
                                std::to_string(s0.w) + " x " + std::to_string(s0.c) +
                                " has a zero dimension");
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const FeatureLayerSpec& f = spec.features[i];
    const Shape3 in = shapes.back();
    const std::string at = "layer " + std::to_string(i);
    if (f.kind == FeatureLayerSpec::Kind::kConv) {
      const std::string name = at + " (Conv2D): ";
      if (f.filters == 0) throw std::invalid_argument(name + "filters 0");
      if (f.kernel < 1 || f.kernel > 7)
        throw std::invalid_argument(name + "kernel_size " + std::to_string(f.kernel) +
                                    ": 1 to 7 are lowered");
      if (f.stride != 1 && f.stride != 2)
        throw std::invalid_argument(name + "strides " + std::to_string(f.stride) +
                                    ": 1 or 2 are lowered");
      const auto g = lowering::conv_geom(in, f);
      if (g.out.h == 0 || g.out.w == 0)
        throw std::invalid_argument(name + "a " + std::to_string(f.kernel) + " x " +
                                    std::to_string(f.kernel) + " kernel (padding valid) on a " +
                                    std::to_string(in.h) + " x " + std::to_string(in.w) +
                                    " input leaves no output");
      shapes.push_back(g.out);
    } else {
      const std::string name =
          at +
          (f.kind == FeatureLayerSpec::Kind::kMaxPool ? " (MaxPool2D): " : " (AveragePooling2D): ");
      if (f.pool != 2 && f.pool != 3)
        throw std::invalid_argument(name + "pool_size " + std::to_string(f.pool) +
                                    ": 2 or 3 are lowered (strides = pool_size)");
      if (in.h < f.pool || in.w < f.pool)
        throw std::invalid_argument(name + "pool " + std::to_string(f.pool) + " on a " +
                                    std::to_string(in.h) + " x " + std::to_string(in.w) +
                                    " input leaves no output");
      shapes.push_back({in.h / f.pool, in.w / f.pool, in.c});
    }
  }
  return shapes;
}

float OptimizerSpec::lr_at(uint64_t t) const {
  if (schedule == Schedule::kConstant || decay_steps == 0) return lr;
  const double f = static_cast<double>(std::min(t, decay_steps)) / static_cast<double>(decay_steps);
  const double m = schedule == Schedule::kCosine ? 0.5 * (1.0 + std::cos(M_PI * f)) : 1.0 - f;
  return static_cast<float>(static_cast<double>(lr) * m);
}

OptimizerSpec::Schedule parse_schedule(const std::string& name) {
  for (auto s : {OptimizerSpec::Schedule::kConstant, OptimizerSpec::Schedule::kCosine,
                 OptimizerSpec::Schedule::kLinear})
    if (name == schedule_name(s)) return s;
  throw std::invalid_argument("learning-rate schedule '" + name +
                              "': not one of constant, cosine, linear");
}

const char* schedule_name(OptimizerSpec::Schedule s) {
  switch (s) {
    case OptimizerSpec::Schedule::kCosine:
      return "cosine";
    case OptimizerSpec::Schedule::kLinear:
      return "linear";
    default:
      return "constant";
  }
}

std::vector<std::pair<uint32_t, uint32_t>> weight_shapes(const DenseStackSpec& spec) {
  std::vector<std::pair<uint32_t, uint32_t>> w;
  const auto shapes = feature_shapes(spec);
  for (size_t i = 0; i < spec.features.size(); ++i)
    if (spec.features[i].kind == FeatureLayerSpec::Kind::kConv)
      w.push_back({spec.features[i].kernel * spec.features[i].kernel * shapes[i].c,
                   spec.features[i].filters});
  uint32_t in = spec.inputs;
  for (const auto& l : spec.layers) {
    w.push_back({in, l.units});
    in = l.units;
  }
  return w;
}

namespace {
// The lowering plan of the layers before Flatten: shapes, padded sizes, pitches, which ops
// run backward. conv: rows M = B Ho Wo of the im2col (Mpad rounded up to N), K = k k C
// (Kpad), filters F (Fpad); the input gradient's operand has Min = B H W rows of Kd = k k F.
struct FeatureOp {
  FeatureLayerSpec f;
  Shape3 in, out;
  lowering::ConvGeom g;
  bool conv = false;
  uint32_t M = 0, Mpad = 0, Kpad = 0, Fpad = 0, Kdpad = 0, Cpad = 0, Min = 0;
  uint32_t act_px = 0;      // output pixel pitch in HBM (bytes): conv F x 2, pool C x 2
  uint32_t g_px = 0;        // output-gradient pixel pitch: conv Fpad x 2 ([Mpad][Fpad]), pool C x 2
  bool bwd = false;         // a conv at or before it: it runs backward
  bool dx = false;          // a conv before it: it computes its input gradient
  bool pool_fused = false;  // conv: the max-pool after it runs in its epilogue (conv_pool_fused)
  bool fused_pool = false;  // max-pool: taken by the conv before it
  bool route_in_dw = false;  // conv, and its fused pool: the routing in the conv's weight gradient
  int param = -1;            // conv: its index among the layers with weights
};
struct FeaturePlan {
  std::vector<FeatureOp> ops;
  int first_conv = -1;
  uint32_t convs = 0;
  bool x0_in_place = false;   // the last op writes the Flatten buffer x0 itself
  bool dz0_in_place = false;  // the last op reads its output gradient from dz0 itself
};
FeaturePlan plan_features(const DenseStackSpec& spec, const ChipShape& chip, uint32_t batch) {
  const uint32_t n = chip.n;
  FeaturePlan fp;
  const auto shapes = feature_shapes(spec);
  auto pad = [&](uint64_t v) { return static_cast<uint32_t>((v + n - 1) / n * n); };
  for (size_t i = 0; i < spec.features.size(); ++i) {
    FeatureOp op;
    op.f = spec.features[i];
    op.in = shapes[i];
    op.out = shapes[i + 1];
    op.conv = op.f.kind == FeatureLayerSpec::Kind::kConv;
    if (op.conv) {
      op.g = lowering::conv_geom(op.in, op.f);
      op.M = batch * op.out.h * op.out.w;
      op.Mpad = pad(op.M);
      op.Kpad = pad(uint64_t{op.f.kernel} * op.f.kernel * op.in.c);
      op.Fpad = pad(op.f.filters);
      op.Kdpad = pad(uint64_t{op.f.kernel} * op.f.kernel * op.f.filters);
      op.Cpad = pad(op.in.c);
      op.Min = batch * op.in.h * op.in.w;
      op.act_px = op.f.filters * 2;
      op.g_px = op.Fpad * 2;
      op.param = static_cast<int>(fp.convs++);
      if (fp.first_conv < 0) fp.first_conv = static_cast<int>(i);
    } else {
      op.act_px = op.g_px = op.in.c * 2;
    }
    op.bwd = fp.first_conv >= 0;
    op.dx = fp.first_conv >= 0 && fp.first_conv < static_cast<int>(i);
    op.pool_fused = op.conv && conv_pool_fused(spec, i, chip);
    op.fused_pool = i > 0 && fp.ops.back().pool_fused;
    op.route_in_dw = op.conv ? pool_routed_in_weight_gradient(spec, i, chip)
                             : op.fused_pool && fp.ops.back().route_in_dw;
    fp.ops.push_back(op);
  }
  if (!fp.ops.empty()) {
    const FeatureOp& last = fp.ops.back();
    const uint32_t P0 = pad(spec.inputs), bpad = pad(batch);
    const uint64_t pixels = uint64_t{last.out.h} * last.out.w;
    fp.x0_in_place = !last.conv || P0 == last.out.size();
    fp.dz0_in_place = !last.conv || (last.Fpad == last.f.filters && P0 == last.out.size() &&
                                     uint64_t{bpad} * pixels >= last.Mpad);
  }
  return fp;
}
// A convolution reads its input map in place when every tap lands inside it; else a copy
// with the padding zeros, padded_rows x padded_cols pixels (the rows and columns the taps
// reach).
bool reads_in_place(const FeatureOp& op) {
  const auto& g = op.g;
  return g.pt == 0 && g.pl == 0 && g.s * (g.out.h - 1) + g.k <= g.in.h &&
         g.s * (g.out.w - 1) + g.k <= g.in.w;
}
// One input channel at stride 1: the weight gradient is computed as dW = patches^T dz (the
// patch rows of one tap are contiguous runs of an image row, dz is read as it lies), with no
// dz^T; the optimizer then walks W^T transposed. Needs F a multiple of N (W^T's rows are the
// ACC lanes).
bool weight_grad_by_taps(const FeatureOp& op, uint32_t n) {
  return op.in.c == 1 && op.g.s == 1 && op.f.filters % n == 0;
}
uint32_t padded_rows(const FeatureOp& op) { return op.g.s * (op.g.out.h - 1) + op.g.k; }
uint32_t padded_cols(const FeatureOp& op) { return op.g.s * (op.g.out.w - 1) + op.g.k; }
std::string feature_name(const FeatureOp& op, size_t i) {
  return std::string(op.conv                                         ? "conv"
                     : op.f.kind == FeatureLayerSpec::Kind::kMaxPool ? "maxpool"
                                                                     : "avgpool") +
         std::to_string(i + 1);
}
}  // namespace

DenseStackStep::DenseStackStep(const DenseStackSpec& spec, const OptimizerSpec& opt,
                               const ChipShape& chip, uint32_t batch, uint64_t hbm_base,
                               StepKind kind, const Layout* share_state, const Choices& choices,
                               const Replication& replication)
    : spec_(spec),
      opt_(opt),
      chip_(chip),
      choices_(choices),
      rep_(replication),
      batch_(batch),
      kind_(kind) {
  if (replication.replicas < 1 || replication.rank < 0 || replication.rank >= replication.replicas)
    throw std::invalid_argument("replication: replicas must be >= 1 and rank in 0 .. replicas - 1");
  if (kind != StepKind::kTrain) rep_ = Replication{};  // evaluation runs on one chip
  if (chip.n < 4 || (chip.n & (chip.n - 1)))
    throw std::invalid_argument("array size N = " + std::to_string(chip.n) +
                                ": a power of two >= 4");
  if (batch == 0) throw std::invalid_argument("batch size 0");
  if (spec.inputs == 0) throw std::invalid_argument("the model has no inputs");
  if (spec.layers.empty()) throw std::invalid_argument("the model has no Dense layer");
  if (!(opt.label_smoothing >= 0 && opt.label_smoothing <= 1))
    throw std::invalid_argument("label smoothing " + std::to_string(opt.label_smoothing) +
                                ": in [0, 1]");
  // beta 1 would divide by 1 - beta^t = 0 (beta_1) or stop training (beta_2)
  if (opt.kind == OptimizerSpec::Kind::kAdam)
    for (const auto& [name, beta] : {std::pair{"beta_1", opt.beta1}, {"beta_2", opt.beta2}})
      if (!(beta >= 0 && beta < 1))
        throw std::invalid_argument(std::string("Adam's ") + name + " " + std::to_string(beta) +
                                    ": in [0, 1)");
  if (!spec.features.empty()) {
    const uint64_t flat = feature_shapes(spec).back().size();
    if (flat != spec.inputs)
      throw std::invalid_argument("Flatten: the last feature map has " + std::to_string(flat) +
                                  " values, the spec's inputs are " + std::to_string(spec.inputs));
  }
  for (size_t l = 0; l < spec.layers.size(); ++l)
    if (spec.layers[l].units == 0)
      throw std::invalid_argument("layer " + std::to_string(l + 1) + " (Dense): units 0");
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const auto& d = spec.layers[l];
    if (d.dropout == 0) continue;
    if (l + 1 == spec.layers.size() || !d.relu)
      throw std::invalid_argument("layer " + std::to_string(l + 1) +
                                  ": Dropout follows a hidden relu Dense layer only");
    if (!(d.dropout > 0 && d.dropout < 1))
      throw std::invalid_argument("layer " + std::to_string(l + 1) + ": Dropout rate " +
                                  std::to_string(d.dropout) + " must be in (0, 1)");
  }
  if (spec.classes() < 2)
    throw std::invalid_argument("the last Dense layer (softmax) needs >= 2 units, has " +
                                std::to_string(spec.classes()));
  if (opt.kind == OptimizerSpec::Kind::kSgd && !(opt.momentum >= 0 && opt.momentum < 1))
    throw std::invalid_argument("SGD momentum " + std::to_string(opt.momentum) +
                                ": must be in [0, 1)");
  plan_hbm(hbm_base, share_state);
  compile();
}

uint64_t DenseStackStep::data_bytes(const DenseStackSpec& spec, const ChipShape& chip,
                                    uint32_t batch, const Replication& replication) {
  DenseStackStep s;
  s.spec_ = spec;
  s.chip_ = chip;
  s.batch_ = batch;
  s.rep_ = replication;
  s.plan_hbm(0, nullptr);
  return s.layout_.bytes;
}

std::pair<uint64_t, uint64_t> DenseStackStep::state_range() const {
  const uint64_t lo = layout_.layers.front().w;
  return {lo, layout_.ones + uint64_t{ones_count()} * 2 - lo};
}

uint32_t DenseStackStep::ones_count() const {
  uint32_t ones = padded(batch_);
  for (const auto& op : plan_features(spec_, chip_, batch_).ops) ones = std::max(ones, op.Mpad);
  return ones;
}

void DenseStackStep::plan_hbm(uint64_t base, const Layout* share) {
  const uint32_t N = chip_.n, B = batch_, Bpad = padded(B), L = spec_.layers.size();
  const FeaturePlan fp = plan_features(spec_, chip_, B);
  const uint32_t nf = fp.ops.size();
  Layout& Y = layout_;
  Y = Layout{};
  Y.base = base;
  uint64_t at = base;
  auto take = [&](uint64_t bytes) {
    const uint64_t a = at;
    at = (at + bytes + 31) / 32 * 32;
    return a;
  };
  std::vector<uint32_t> P{padded(spec_.inputs)};
  for (const auto& l : spec_.layers) P.push_back(padded(l.units));
  const uint32_t Cpad = P.back(), Cc = Cpad / N;
  Y.images = take(nf ? uint64_t{Bpad} * spec_.input_shape.size() * 2 : uint64_t{Bpad} * P[0] * 2);
  Y.labels = take(uint64_t{Bpad} * 4);
  const uint32_t ones = ones_count();
  if (share) {
    Y.layers = share->layers;
    Y.powers = share->powers;
    Y.lr = share->lr;
    Y.consts = share->consts;
  } else {
    const auto shapes = weight_shapes(spec_);
    for (size_t j = 0; j < shapes.size(); ++j) {
      const auto [K, U] = shapes[j];
      LayerRegions r;
      const uint64_t wb = uint64_t{padded(U)} * padded(K);
      r.w = take(3 * wb * 4);
      if (j + L >= shapes.size()) {  // a Dense layer: w, m (, v) interleaved
        r.streams = opt_.kind == OptimizerSpec::Kind::kAdam ? 3 : 2;
        r.w_m = r.w + 4 * N;
        r.w_v = r.streams == 3 ? r.w + 8 * N : r.w + 2 * wb * 4;
      } else {
        r.w_m = r.w + wb * 4;
        r.w_v = r.w + 2 * wb * 4;
      }
      r.w16 = take(wb * 2);
      r.b = take(padded(U) * 4);
      r.b_m = take(padded(U) * 4);
      r.b_v = take(padded(U) * 4);
      Y.layers.push_back(r);
    }
    Y.powers = take(3 * N * 4);
    Y.lr = take(N * 4);
    Y.consts = take(2 * Cc * N * 4);
  }
  Y.ones = take(uint64_t{ones} * 2);
  Y.metrics = take(2 * N * 4);
  Y.probs = take(uint64_t{Bpad} * Cpad * 4);
  // the gradient vector: per layer the kernel's U real rows of W^T [U][Kp] (the padding rows'
  // gradients are zero: no epilogue writes them, no update needs them), the bias [Up]
  if (rep_.split() && !share) {
    uint64_t elems = 0;
    const auto shapes = weight_shapes(spec_);
    for (size_t j = 0; j < shapes.size(); ++j)
      elems += uint64_t{shapes[j].second} * padded(shapes[j].first) + padded(shapes[j].second);
    if (elems > 0xFFFFFFFFull / 4)
      throw std::invalid_argument("data parallelism: the gradient vector of " +
                                  std::to_string(elems) + " values is above the all-reduce's 2^30");
    Y.grads_elems = allreduce_padded_elems(static_cast<uint32_t>(elems), rep_.replicas,
                                           static_cast<int>(N));
    Y.grads = take(Y.grads_elems * 4);
    uint64_t g = Y.grads;
    for (size_t j = 0; j < shapes.size(); ++j) {
      Y.layers[j].g = g;
      g += uint64_t{shapes[j].second} * padded(shapes[j].first) * 4;
      Y.layers[j].g_b = g;
      g += uint64_t{padded(shapes[j].second)} * 4;
    }
  }
  // Transients. Phases: the feature ops forward 1 .. nf, the Dense layers forward nf + l,
  // backward nf + 2L + 1 - l, the feature ops backward (last first) up to nf + 2L + nf.
  auto bwd = [&](uint32_t l) { return int(nf + 2 * L + 1 - l); };
  auto ffwd = [&](uint32_t i) { return int(1 + i); };
  auto fbwd = [&](uint32_t i) { return int(nf + 2 * L + nf - i); };
  auto add = [&](const std::string& name, uint64_t bytes, int first, int last) {
    Y.transients.push_back({name, 0, bytes, first, last});
  };
  for (uint32_t l = 1; l < L; ++l)  // x_l: written by fwd_l, read by bwd_{l+1}
    add("x" + std::to_string(l), uint64_t{Bpad} * P[l] * 2, int(nf + l), bwd(l + 1));
  for (uint32_t l = 1; l <= L; ++l) {  // dz_l: from fwd_L (l = L) or bwd_{l+1}, to bwd_l
    const int first = l == L ? int(nf + L) : bwd(l + 1);
    add("dz" + std::to_string(l), uint64_t{Bpad} * P[l] * 2, first, bwd(l));
    add("dzT" + std::to_string(l), uint64_t{P[l]} * Bpad * 2, bwd(l), bwd(l));
  }
  if (nf) {
    const uint32_t last = nf - 1;
    // (a pool the conv before it takes is written in that conv's phase)
    auto written = [&](uint32_t i) { return fp.ops[i].fused_pool ? ffwd(i - 1) : ffwd(i); };
    // (a pool routed in the conv's weight gradient: its gradient is read in the conv's phase)
    auto read = [&](uint32_t i) {
      return !fp.ops[i].conv && fp.ops[i].route_in_dw ? fbwd(i - 1) : fbwd(i);
    };
    add("x0", uint64_t{Bpad} * P[0] * 2, written(last), bwd(1));
    if (fp.first_conv >= 0) add("dz0", uint64_t{Bpad} * P[0] * 2, bwd(1), read(last));
    for (uint32_t i = 0; i < nf; ++i) {
      const FeatureOp& op = fp.ops[i];
      const std::string id = feature_name(op, i);
      const uint64_t pixels = uint64_t{B} * op.out.h * op.out.w;
      if (op.pool_fused)  // the argmax codes, from the forward to the pool's backward
        add(id + ".argmax", uint64_t{B} * fp.ops[i + 1].out.size() * 2, ffwd(i),
            fp.ops[i + 1].bwd ? read(i + 1) : ffwd(i));
      if ((i != last || !fp.x0_in_place) && !op.pool_fused)
        add(id + ".out", pixels * op.act_px, written(i),
            i == last           ? ffwd(i)
            : fp.ops[i + 1].bwd ? fbwd(i + 1)
                                : ffwd(i + 1));
      if (op.conv && !reads_in_place(op))
        add(id + ".padded", uint64_t{B} * padded_rows(op) * padded_cols(op) * op.in.c * 2, ffwd(i),
            op.bwd ? fbwd(i) : ffwd(i));
      if (!op.bwd) continue;
      if ((i != last || !fp.dz0_in_place) && !(op.conv && op.route_in_dw)) {
        const uint64_t bytes = op.conv ? uint64_t{op.Mpad} * op.g_px : pixels * op.g_px;
        add(id + ".grad", bytes, i == last ? fbwd(i) : fbwd(i + 1), read(i));
      }
      if (op.conv) {
        if (!weight_grad_by_taps(op, N))
          add(id + ".gradT", uint64_t{op.f.filters} * op.Mpad * 2, fbwd(i), fbwd(i));
        if (op.dx) {
          add(id + ".grad_map",
              uint64_t{B} * (op.in.h + op.g.k - 1) * (op.in.w + op.g.k - 1) * op.f.filters * 2,
              fbwd(i), fbwd(i));
          add(id + ".kernel_flip", uint64_t{op.Kdpad} * op.Cpad * 2, fbwd(i), fbwd(i));
        }
      }
    }
  }
  for (const auto& t : Y.transients) Y.transient_unshared += t.bytes;
  Y.transient_bytes = plan_transients(Y.transients);
  const uint64_t tbase = take(Y.transient_bytes);
  for (auto& t : Y.transients) t.addr += tbase;
  Y.bytes = at - base;
}

void DenseStackStep::compile() {
  const uint32_t N = chip_.n, B = batch_, Bpad = padded(B), L = spec_.layers.size();
  const uint32_t row2n = 2 * N, row4n = 4 * N;
  std::vector<uint32_t> P{padded(spec_.inputs)}, D{spec_.inputs};
  for (const auto& l : spec_.layers) {
    P.push_back(padded(l.units));
    D.push_back(l.units);
  }
  const uint32_t Cpad = P.back(), Cc = Cpad / N;
  const Layout& Y = layout_;
  auto transient = [&](const std::string& name) {
    for (const auto& t : Y.transients)
      if (t.name == name) return t.addr;
    throw std::logic_error("no transient " + name);
  };
  const FeaturePlan fp = plan_features(spec_, chip_, B);
  const uint32_t nf = fp.ops.size();
  auto x_addr = [&](uint32_t l) {
    return l == 0 ? (nf ? transient("x0") : Y.images) : transient("x" + std::to_string(l));
  };
  const bool train = kind_ == StepKind::kTrain;
  const bool adam = opt_.kind == OptimizerSpec::Kind::kAdam;
  const bool split = train && rep_.split();
  // x0 pooled-row-major (a fused conv + max-pool writes the Flatten input): [hp][Bpad][wp F],
  // so the first Dense layer's operand loads read the batch's runs of a pooled row back to
  // back (one run where a load spans whole pooled rows) instead of rows P0 apart
  const bool x0_rows = nf && fp.ops.back().fused_pool && fp.x0_in_place &&
                       P[0] == fp.ops.back().out.size();
  const uint32_t x0_row = x0_rows ? fp.ops.back().out.w * fp.ops.back().out.c : 0;  // wp F
  const uint32_t x0_hp = x0_rows ? fp.ops.back().out.h : 0;

  ProgramBuilder b(static_cast<int>(N), chip_.ub_bytes, chip_.acc_rows);
  // x0[sample][d] for samples [r0, r0 + rows) and d in [c0, c0 + cols), into UB rows `pitch`
  // bytes apart: the Dense layer's A operand, and its weight gradient's weight operand
  auto x0_gather = [&b, &transient, x0_row, Bpad](uint64_t r0, uint32_t rows, uint32_t c0,
                                                   uint32_t cols, uint32_t dst, uint32_t pitch,
                                                   bool, uint32_t) {
    const uint64_t x0 = transient("x0");
    for (uint32_t d = c0; d < c0 + cols;) {
      const uint32_t py = d / x0_row, off = d % x0_row;
      const uint32_t len = std::min(c0 + cols - d, x0_row - off);
      b.dma_copy(hbm(x0 + ((uint64_t{py} * Bpad + r0) * x0_row + off) * 2,
                     {{len, 2}, {rows, int32_t(x0_row * 2)}}),
                 ub(dst + (d - c0) * 2, {{len, 2}, {rows, int32_t(pitch)}}), 2);
      d += len;
    }
  };
  StepPhases phases(b, stats_);
  auto phase = [&](const std::string& name) { phases.begin(name); };
  auto note = [&](const std::string& text) { plan_.push_back(phases.current() + "  " + text); };
  // Global UB: powers, lr_t, metrics, labels, class constants, one layer's bias.
  UbArena global(0, chip_.ub_bytes, static_cast<int>(N), "setup");
  const uint32_t ub_powers = global.take(3 * row4n), ub_lrt = global.take(row4n);
  bool dropout = false;
  for (const auto& d : spec_.layers) dropout |= d.dropout > 0;
  const uint32_t ub_dbase = global.take(uint64_t{L} * row4n);  // per layer: H(seed ^ step)
  const uint32_t ub_metrics = global.take(2 * row4n);
  const uint32_t ub_labels = global.take(uint64_t{Bpad} * 4);
  const uint32_t ub_consts = global.take(2 * Cc * row4n);
  uint32_t maxP = 0;
  for (uint32_t l = 1; l <= L; ++l) maxP = std::max(maxP, P[l]);
  for (const auto& op : fp.ops) maxP = std::max(maxP, op.Fpad);
  const uint32_t ub_bias = global.take(uint64_t{maxP} * 4);
  const uint32_t zero_bytes = 32 * N, ub_zero = nf ? global.take(zero_bytes) : 0;
  const uint32_t ub_identity = global.take(uint64_t{N} * row2n);  // N bf16 rows: I
  const uint64_t arena_lo = chip_.ub_bytes - global.free(), arena_hi = chip_.ub_bytes;

  // Registers: V0 stays zero; V1 loss sum, V2 correct count (forward); the optimizer's in
  // AdamRegs (V1..V12) during the backward pass.
  phase("setup");
  b.vpu_li(0, 0);
  if (train) {
    copy_linear(b, kHbm, Y.powers, kUb, ub_powers, 3 * N, 4);
    // the step count, and each Dropout layer's H(seed ^ step)
    b.vpu_ld(kF32, 1, ub_powers + 2 * row4n);
    b.vpu_li(2, 1);
    b.vpu_op(Fn::kIAdd, 1, 1, 2);
    b.vpu_st(kF32, 1, ub_powers + 2 * row4n);
    if (dropout) {
      for (uint32_t l = 1; l <= L; ++l) {
        if (spec_.layers[l - 1].dropout == 0) continue;
        b.vpu_li(2, spec_.layers[l - 1].dropout_seed);
        b.vpu_op(Fn::kIXor, 2, 2, 1);
        emit_hash(b, 2, 3, 4);
        b.vpu_st(kF32, 2, ub_dbase + (l - 1) * row4n);
      }
    }
    // the step's learning rate (the host's schedule) into the lr_t row
    copy_linear(b, kHbm, Y.lr, kUb, ub_lrt, N, 4);
    if (adam) emit_adam_powers(b, std::nullopt, opt_.beta1, opt_.beta2, ub_powers, ub_lrt);
    b.signal(isa::Unit::kVpu);
    copy_linear(b, kUb, ub_powers, kHbm, Y.powers, 3 * N, 4);
  }
  copy_linear(b, kHbm, Y.labels, kUb, ub_labels, Bpad, 4);
  copy_linear(b, kHbm, Y.consts, kUb, ub_consts, 2 * Cc * N, 4);
  // the identity (the transposes' MXU operand): row t = (lane == t), from the lane indices
  b.vpu_ld(kF32, 3, ub_consts);
  b.vpu_lif(4, 1.0f);
  for (uint32_t t = 0; t < N; ++t) {
    b.vpu_lif(5, static_cast<float>(t));
    b.vpu_op(Fn::kCmpEq, 6, 3, 5);
    b.vpu_op(Fn::kSel, 7, 4, 0, 6);
    b.vpu_st(kBf16, 7, ub_identity + t * row2n);
  }
  for (uint32_t i = 0; nf && i < zero_bytes / row4n; ++i) b.vpu_st(kF32, 0, ub_zero + i * row4n);
  b.signal(isa::Unit::kDma);

  // ---- the layers before Flatten ----
  auto zero = [&](uint64_t addr, uint64_t bytes) {
    if (bytes) emit_zero_hbm(b, ub_zero, zero_bytes, addr, bytes);
  };
  const uint32_t P0 = P[0];
  // op i's output as the next op reads it (i = -1: the images)
  auto out_ref = [&](int i) -> MapRef {
    if (i < 0) {
      const Shape3& s0 = spec_.input_shape;
      return {Y.images, s0.c * 2, s0.size() * 2};
    }
    const FeatureOp& op = fp.ops[i];
    if (i + 1 == int(nf) && fp.x0_in_place) return {transient("x0"), op.act_px, uint64_t{P0} * 2};
    return {transient(feature_name(op, i) + ".out"), op.act_px,
            uint64_t{op.out.h} * op.out.w * op.act_px};
  };
  // the gradient of op i's output (a conv's: before its relu) as op i's backward reads it
  auto grad_ref = [&](int i) -> MapRef {
    const FeatureOp& op = fp.ops[i];
    if (i + 1 == int(nf) && fp.dz0_in_place) return {transient("dz0"), op.g_px, uint64_t{P0} * 2};
    return {transient(feature_name(op, i) + ".grad"), op.g_px,
            uint64_t{op.out.h} * op.out.w * op.g_px};
  };
  // Before op i's output gradient is written (by a writer that covers every input of its
  // windows unless `holes`): the bytes nobody writes are zeroed: a conv's padding columns and
  // rows beyond M, the inputs no pooling window covers.
  auto prepare_grad = [&](int i, bool holes) {
    const FeatureOp& op = fp.ops[i];
    if (i + 1 == int(nf) && fp.dz0_in_place) return;
    const MapRef g = grad_ref(i);
    const uint64_t pixels = uint64_t{B} * op.out.h * op.out.w;
    if (holes || (op.conv && op.Fpad != op.f.filters))
      zero(g.addr, (op.conv ? op.Mpad : pixels) * op.g_px);
    else if (op.conv)
      zero(g.addr + pixels * op.g_px, (op.Mpad - pixels) * op.g_px);
  };
  // The convolutions' operands, gathered into the UB from the maps (no im2col in HBM).
  const uint32_t zero_elems = zero_bytes / 2;
  auto gather_from = [&b, ub_zero, zero_elems](const PatchMap& pm) {
    return [&b, pm, ub_zero, zero_elems](uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
                                         uint32_t dst, uint32_t pitch, bool fresh, uint32_t) {
      emit_gather_patches(b, pm, r0, rows, c0, cols, dst, pitch, ub_zero, zero_elems, fresh);
    };
  };
  // conv i's forward operand: its input map, or (`emit`: built now) the padded copy
  auto conv_source = [&](int i, bool emit) {
    const FeatureOp& op = fp.ops[i];
    const MapRef x = out_ref(i - 1);
    PatchMap pm;
    pm.k = op.g.k;
    pm.s = op.g.s;
    pm.c = op.in.c;
    pm.ho = op.out.h;
    pm.wo = op.out.w;
    pm.batch = B;
    if (reads_in_place(op)) {
      pm.map = x;
      pm.w = op.in.w;
      return pm;
    }
    const uint32_t hp = padded_rows(op), wp = padded_cols(op), C = op.in.c;
    const uint64_t at = transient(feature_name(op, i) + ".padded");
    pm.map = {at, C * 2, uint64_t{hp} * wp * C * 2};
    pm.w = wp;
    if (emit) {  // x at (pt, pl), the rows and columns the taps reach
      const uint32_t hc = std::min(op.in.h, hp - op.g.pt), wc = std::min(op.in.w, wp - op.g.pl);
      emit_zero_frame(b, ub_zero, zero_elems, at, B, hp, wp, C, op.g.pt, op.g.pl, hc, wc);
      emit_place_map(b, x, op.in.w, hc, wc, C, B, at, hp, wp, op.g.pt, op.g.pl, 1, 1);
    }
    return pm;
  };
  // conv i's input-gradient operand: the output gradient g dilated by the stride and padded
  // by k - 1 - pad, read as a stride-1 convolution of the flipped kernel (H + k - 1 rows)
  auto grad_source = [&](int i, const MapRef& g) {
    const FeatureOp& op = fp.ops[i];
    const uint32_t k = op.g.k, s = op.g.s, F = op.f.filters;
    const uint32_t hd = op.in.h + k - 1, wd = op.in.w + k - 1;
    const uint32_t y0 = k - 1 - op.g.pt, x0 = k - 1 - op.g.pl;
    const uint64_t at = transient(feature_name(op, i) + ".grad_map");
    if (s == 1)
      emit_zero_frame(b, ub_zero, zero_elems, at, B, hd, wd, F, y0, x0, op.out.h, op.out.w);
    else
      zero(at, uint64_t{B} * hd * wd * F * 2);
    emit_place_map(b, g, op.out.w, op.out.h, op.out.w, F, B, at, hd, wd, y0, x0, s, s);
    PatchMap pm;
    pm.map = {at, F * 2, uint64_t{hd} * wd * F * 2};
    pm.w = wd;
    pm.k = k;
    pm.c = F;
    pm.ho = op.in.h;
    pm.wo = op.in.w;
    pm.batch = B;
    return pm;
  };
  for (uint32_t i = 0; i < nf; ++i) {
    const FeatureOp& op = fp.ops[i];
    if (op.fused_pool) continue;  // ran in the conv's epilogue
    const std::string id = feature_name(op, i);
    phase("fwd_" + id);
    // the op whose output this phase writes: the pool a conv takes, else the op's
    const uint32_t io = op.pool_fused ? i + 1 : i;
    const MapRef x = out_ref(int(i) - 1), y = out_ref(int(io));
    const bool last = io + 1 == nf;
    const uint64_t x0 = last ? transient("x0") : 0;
    const uint64_t flat = fp.ops[io].out.size();
    if (last && fp.x0_in_place) {  // x0 [Bpad][P0]: padding columns and samples zero
      if (P0 != flat)
        zero(x0, uint64_t{Bpad} * P0 * 2);
      else if (x0_rows)  // [hp][Bpad][wp F]: each pooled row's padding samples
        for (uint32_t py = 0; py < x0_hp; ++py)
          zero(x0 + (uint64_t{py} * Bpad + B) * x0_row * 2, uint64_t{Bpad - B} * x0_row * 2);
      else
        zero(x0 + uint64_t{B} * P0 * 2, uint64_t{Bpad - B} * P0 * 2);
    }
    if (!op.conv) {
      emit_pool_forward(b, arena_lo, arena_hi, op.f.kind == FeatureLayerSpec::Kind::kMaxPool,
                        op.f.pool, op.in, op.out, B, x, y);
      note(id + ": pool " + std::to_string(op.f.pool) + " on " + std::to_string(op.in.h) + " x " +
           std::to_string(op.in.w) + " x " + std::to_string(op.in.c));
      continue;
    }
    const LayerRegions& R = Y.layers[op.param];
    const PatchMap src = conv_source(int(i), true);
    copy_linear(b, kHbm, R.b, kUb, ub_bias, op.Fpad, 4);
    b.signal(isa::Unit::kDma);
    Matmul mm;
    mm.name = "Conv2D forward";
    mm.M = op.M;
    mm.Kt = op.Kpad / N;
    mm.Ct = op.Fpad / N;
    mm.a_gather = gather_from(src);
    mm.a_run = src.run();
    mm.w = R.w16;
    mm.w_pitch = op.Kpad * 2;
    mm.w_by_column = true;
    mm.epi_row_bytes = row2n;
    const uint32_t F = op.f.filters;
    const bool relu = op.f.relu;
    note(id + ": " + std::to_string(op.g.k) + " x " + std::to_string(op.g.k) + " stride " +
         std::to_string(op.g.s) + (op.f.same ? " same" : " valid") + ", " +
         std::to_string(op.in.h) + " x " + std::to_string(op.in.w) + " x " +
         std::to_string(op.in.c) + " -> " + std::to_string(op.out.h) + " x " +
         std::to_string(op.out.w) + " x " + std::to_string(F) + "; operand " +
         std::to_string(op.M) + " x " + std::to_string(op.Kpad) + " read from " +
         (reads_in_place(op) ? std::string("the input map")
                             : id + ".padded (" + std::to_string(padded_rows(op)) + " x " +
                                   std::to_string(padded_cols(op)) + ")"));
    Epilogue fepi{nullptr, [&](const Block& k) {
                    const uint32_t pitch = k.ct * row2n;
                    emit_bias_relu(b, k, ub_bias, relu);
                    b.signal(isa::Unit::kVpu);
                    const uint32_t valid = std::min(k.ct * N, F - k.c0 * N);
                    b.dma_copy(ub(k.scratch, {{valid, 2}, {k.rows, int32_t(pitch)}}),
                               hbm(y.addr + (uint64_t{k.r0} * F + k.c0 * N) * 2,
                                   {{valid, 2}, {k.rows, int32_t(F * 2)}}),
                               2);
                  }};
    if (op.pool_fused) {  // the max-pool in the epilogue: pairs of output rows a piece
      const FeatureOp& pool = fp.ops[io];
      if (y.px != F * 2 || y.sample != uint64_t{pool.out.size()} * 2)
        throw std::logic_error(id + ": the pooled map is not compact");
      mm.row_align = 2 * op.out.w;
      ConvPoolOut po{y.addr, transient(id + ".argmax"), op.out.w, F};
      if (last && x0_rows) {
        po.rows_batch = Bpad;
        po.hp = pool.out.h;
      }
      fepi.run = [&b, po, ub_bias](const Block& k) { emit_conv_pool_epilogue(b, k, po, ub_bias); };
      note(id + " + " + feature_name(pool, io) + ": the 2 x 2 max-pool, its argmax codes (" + id +
           ".argmax) and the relu in the epilogue");
    }
    // implicit GEMM over the (padded) input map at stride 1, as for the input gradient
    std::string how;
    const uint32_t C = op.in.c, k = op.g.k;
    if (choices_.implicit_gemm && !op.pool_fused && op.g.s == 1 && C % N == 0 &&
        op.Kpad == k * k * C && src.map.px == C * 2 && src.map.space == isa::Space::kHbm &&
        op.M == uint64_t{B} * op.out.h * op.out.w) {
      ImplicitA ia;
      ia.addr = src.map.addr;
      ia.px = src.map.px;
      ia.sample = src.map.sample;
      ia.w = src.w;
      ia.k = k;
      ia.ho = op.out.h;
      ia.wo = op.out.w;
      ia.batch = B;
      Matmul mi = mm;
      mi.a_gather = nullptr;
      how = emit_matmul_implicit(b, mi, ia, arena_lo, arena_hi, chip_.acc_rows, fepi);
    }
    note(how.empty() ? emit_matmul(b, mm, arena_lo, arena_hi, chip_.acc_rows, fepi) : how);
    if (last && !fp.x0_in_place) {  // repack into x0's [Bpad][P0] rows
      zero(x0, uint64_t{Bpad} * P0 * 2);
      const uint32_t pixels = op.out.h * op.out.w;
      b.dma_copy(hbm(y.addr, {{F, 2}, {pixels, int32_t(F * 2)}, {B, int32_t(pixels * F * 2)}}),
                 hbm(x0, {{F, 2}, {pixels, int32_t(F * 2)}, {B, int32_t(P0 * 2)}}), 2);
    }
  }
  b.vpu_li(1, 0);
  b.vpu_li(2, 0);

  // ---- forward ----
  for (uint32_t l = 1; l <= L; ++l) {
    phase("fwd" + std::to_string(l));
    const LayerRegions& R = Y.layers[fp.convs + l - 1];
    const bool last = l == L, relu = !last && spec_.layers[l - 1].relu;
    copy_linear(b, kHbm, R.b, kUb, ub_bias, P[l], 4);
    b.signal(isa::Unit::kDma);
    Matmul op;
    op.name = last ? "softmax layer" : "Dense forward";
    op.M = Bpad;
    op.Kt = P[l - 1] / N;
    op.Ct = P[l] / N;
    op.a = x_addr(l - 1);
    op.a_pitch = P[l - 1] * 2;
    if (l == 1 && x0_rows) {
      op.a_gather = x0_gather;
      op.a_run = x0_row;
    }
    op.w = R.w16;
    op.w_pitch = P[l - 1] * 2;
    op.w_by_column = true;
    if (!last) {
      op.epi_row_bytes = row2n;
      const uint64_t out = x_addr(l);
      const float rate = train ? spec_.layers[l - 1].dropout : 0.0f;
      note(emit_matmul(
          b, op, arena_lo, arena_hi, chip_.acc_rows,
          {nullptr, [&](const Block& k) {
             const uint32_t pitch = k.ct * row2n;
             if (rate > 0) {  // relu(z + b), then Dropout: kept units x 1 / (1 - rate), dropped 0
               b.vpu_ld(kF32, 8, ub_consts);  // lane index (the class-index row), as an int
               b.vpu_op(Fn::kF2I, 8, 8);
               for (uint32_t r = 0; r < k.rows; ++r) {
                 b.vpu_ld(kF32, 5, ub_dbase + (l - 1) * row4n);
                 b.vpu_li(7, rep_.rank * B + k.r0 + r);  // the sample, in the global batch
                 b.vpu_op(Fn::kIAdd, 5, 5, 7);
                 emit_hash(b, 5, 7, 9);
                 for (uint32_t c = 0; c < k.ct; ++c) {
                   b.vpu_ld(kAcc, 3, k.acc(r, c));
                   b.vpu_ld(kF32, 4, ub_bias + (k.c0 + c) * row4n);
                   b.vpu_op(Fn::kAdd, 3, 3, 4);
                   b.vpu_op(Fn::kMax, 3, 3, 0);
                   b.vpu_li(7, (k.c0 + c) * N);  // the unit
                   b.vpu_op(Fn::kIAdd, 6, 8, 7);
                   b.vpu_op(Fn::kIAdd, 6, 6, 5);
                   emit_hash(b, 6, 7, 9);
                   b.vpu_li(9, 9);
                   b.vpu_op(Fn::kShr, 6, 6, 9);
                   b.vpu_li(9, 0x3F800000u);
                   b.vpu_op(Fn::kIOr, 6, 6, 9);
                   b.vpu_lif(10, 1.0f + rate);
                   b.vpu_op(Fn::kCmpLt, 6, 6, 10);  // dropped
                   b.vpu_lif(10, 1.0f / (1.0f - rate));
                   b.vpu_op(Fn::kMul, 3, 3, 10);
                   b.vpu_op(Fn::kSel, 3, 0, 3, 6);
                   b.vpu_st(kBf16, 3, k.scratch + r * pitch + c * row2n);
                 }
               }
             } else {
               emit_bias_relu(b, k, ub_bias, relu);
             }
             b.signal(isa::Unit::kVpu);
             b.dma_copy(ub(k.scratch, {{k.ct * N, 2}, {k.rows, int32_t(pitch)}}),
                        hbm(out + (uint64_t{k.r0} * P[l] + k.c0 * N) * 2,
                            {{k.ct * N, 2}, {k.rows, int32_t(P[l] * 2)}}),
                        2);
           }}));
      continue;
    }
    // the softmax layer: every class tile in one group; scratch per row: logits / exps (fp32),
    // d logits (bf16), probabilities (fp32, evaluate)
    op.whole_columns = true;
    if (chip_.acc_rows / 2 < Cc)
      throw std::invalid_argument("the softmax layer's " + std::to_string(D[l]) +
                                  " classes need more ACC rows than half the chip's " +
                                  std::to_string(chip_.acc_rows) + " (a sample's row per " +
                                  "class tile, double-buffered)");
    op.epi_row_bytes = row4n + row2n + (train ? 0 : row4n);
    const uint64_t dz = train ? transient("dz" + std::to_string(L)) : 0;
    // (the replicas' gradients add up to the global batch's)
    const float inv_b = 1.0f / static_cast<float>(uint64_t{B} * rep_.replicas);
    // label smoothing eps: the target of class c is hi for the label, lo for the other real
    // classes (Keras's (1 - eps) one-hot + eps / C), and the loss ln S - sum_c t_c (z_c - max)
    // = ln S - (1 - eps) (z_label - max) - lo sum_c (z_c - max); eps 0 emits the plain loss,
    // as does evaluation (smoothing is a training target; the test loss is the cross-entropy)
    const float ls = train ? opt_.label_smoothing : 0.0f, ls_lo = ls / static_cast<float>(D[l]),
                ls_hi = (1.0f - ls) + ls_lo;
    note(emit_matmul(
        b, op, arena_lo, arena_hi, chip_.acc_rows,
        {nullptr, [&](const Block& k) {
           if (k.ct != Cc) throw std::logic_error("softmax group split");
           // fp32 rows first (4N-aligned), then the bf16 d logits
           const uint32_t zrow = k.scratch, prow = zrow + k.rows * Cc * row4n,
                          drow = prow + (train ? 0 : k.rows * Cc * row4n);
           for (uint32_t r = 0; r < k.rows; ++r) {
             const uint32_t smp = k.r0 + r;
             const uint32_t z_at = zrow + r * Cc * row4n, d_at = drow + r * Cc * row2n,
                            p_at = prow + r * Cc * row4n;
             if (smp >= B) {  // padding samples: no loss, zero d logits
               for (uint32_t c = 0; c < Cc; ++c) {
                 b.vpu_st(kBf16, 0, d_at + c * row2n);
                 if (!train) b.vpu_st(kF32, 0, p_at + c * row4n);
               }
               continue;
             }
             // z = acc + b, masked to -inf beyond the classes; running max in V3
             for (uint32_t c = 0; c < Cc; ++c) {
               b.vpu_ld(kAcc, 7, k.acc(r, c));
               b.vpu_ld(kF32, 8, ub_bias + c * row4n);
               b.vpu_op(Fn::kAdd, 7, 7, 8);
               b.vpu_ld(kF32, 8, ub_consts + (Cc + c) * row4n);
               b.vpu_lif(9, -INFINITY);
               b.vpu_op(Fn::kSel, 7, 7, 9, 8);
               b.vpu_st(kF32, 7, z_at + c * row4n);
               if (c == 0)
                 b.vpu_op(Fn::kIOr, 3, 7, 0);
               else
                 b.vpu_op(Fn::kMax, 3, 3, 7);
             }
             b.vpu_op(Fn::kRMax, 3, 3);
             b.vpu_ld(kF32, 4, ub_labels + (smp / N) * row4n);
             b.vpu_op(Fn::kBcast, 4, 4, 0, 0, smp % N);
             // e = exp(z - max) (0 beyond the classes), V5 the label's z - max, V6 the sum of e
             for (uint32_t c = 0; c < Cc; ++c) {
               b.vpu_ld(kF32, 7, z_at + c * row4n);
               b.vpu_op(Fn::kSub, 7, 7, 3);
               b.vpu_ld(kF32, 13, ub_consts + c * row4n);
               b.vpu_op(Fn::kCmpEq, 13, 4, 13);
               b.vpu_op(Fn::kSel, 14, 7, 0, 13);
               if (c == 0)
                 b.vpu_op(Fn::kIOr, 5, 14, 0);
               else
                 b.vpu_op(Fn::kAdd, 5, 5, 14);
               if (ls > 0) {  // V15: sum of z - max over the real classes
                 b.vpu_ld(kF32, 12, ub_consts + (Cc + c) * row4n);
                 b.vpu_op(Fn::kSel, 12, 7, 0, 12);
                 if (c == 0)
                   b.vpu_op(Fn::kIOr, 15, 12, 0);
                 else
                   b.vpu_op(Fn::kAdd, 15, 15, 12);
               }
               emit_exp(b, 7, 7, 8, 9, 10, 11);
               b.vpu_ld(kF32, 13, ub_consts + (Cc + c) * row4n);
               b.vpu_op(Fn::kSel, 7, 7, 0, 13);
               b.vpu_st(kF32, 7, z_at + c * row4n);
               if (c == 0)
                 b.vpu_op(Fn::kIOr, 6, 7, 0);
               else
                 b.vpu_op(Fn::kAdd, 6, 6, 7);
             }
             b.vpu_op(Fn::kRSum, 6, 6);
             if (ls > 0) b.vpu_op(Fn::kRSum, 15, 15);
             // p = e / sum; d logits = (p - target) / B
             for (uint32_t c = 0; c < Cc; ++c) {
               b.vpu_ld(kF32, 7, z_at + c * row4n);
               b.vpu_op(Fn::kDiv, 7, 7, 6);
               if (!train) b.vpu_st(kF32, 7, p_at + c * row4n);
               b.vpu_ld(kF32, 13, ub_consts + c * row4n);
               b.vpu_op(Fn::kCmpEq, 13, 4, 13);
               if (ls > 0) {  // hi for the label, lo for the other real classes, 0 beyond
                 b.vpu_lif(14, ls_hi);
                 b.vpu_lif(12, ls_lo);
                 b.vpu_op(Fn::kSel, 14, 14, 12, 13);
                 b.vpu_ld(kF32, 13, ub_consts + (Cc + c) * row4n);
                 b.vpu_op(Fn::kSel, 14, 14, 0, 13);
               } else {
                 b.vpu_lif(14, 1.0f);
                 b.vpu_op(Fn::kSel, 14, 14, 0, 13);
               }
               b.vpu_op(Fn::kSub, 7, 7, 14);
               b.vpu_lif(14, inv_b);
               b.vpu_op(Fn::kMul, 7, 7, 14);
               b.vpu_st(kBf16, 7, d_at + c * row2n);
             }
             b.vpu_op(Fn::kRSum, 5, 5);  // z_label - max
             emit_log(b, 7, 6, 8, 9, 10, 11, 12);
             if (ls > 0) {  // loss = ln(sum e) - ((1 - eps) (z_label - max) + lo sum (z - max))
               b.vpu_lif(14, 1.0f - ls);
               b.vpu_op(Fn::kMul, 14, 5, 14);
               b.vpu_lif(13, ls_lo);
               b.vpu_op(Fn::kMul, 13, 15, 13);
               b.vpu_op(Fn::kAdd, 14, 14, 13);
               b.vpu_op(Fn::kSub, 7, 7, 14);
             } else {
               b.vpu_op(Fn::kSub, 7, 7, 5);  // loss = ln(sum e) - (z_label - max)
             }
             b.vpu_op(Fn::kAdd, 1, 1, 7);
             b.vpu_op(Fn::kCmpEq, 7, 5, 0);  // the label's logit is the largest
             b.vpu_lif(14, 1.0f);
             b.vpu_op(Fn::kSel, 7, 14, 0, 7);
             b.vpu_op(Fn::kAdd, 2, 2, 7);
           }
           b.signal(isa::Unit::kVpu);
           if (train)
             b.dma_copy(
                 ub(drow, {{Cpad, 2}, {k.rows, int32_t(Cc * row2n)}}),
                 hbm(dz + uint64_t{k.r0} * Cpad * 2, {{Cpad, 2}, {k.rows, int32_t(Cpad * 2)}}), 2);
           else
             b.dma_copy(
                 ub(prow, {{Cpad, 4}, {k.rows, int32_t(Cc * row4n)}}),
                 hbm(Y.probs + uint64_t{k.r0} * Cpad * 4, {{Cpad, 4}, {k.rows, int32_t(Cpad * 4)}}),
                 4);
         }}));
  }
  b.vpu_lif(15, static_cast<float>(B));
  b.vpu_op(Fn::kDiv, 1, 1, 15);
  b.vpu_st(kF32, 1, ub_metrics);
  b.vpu_st(kF32, 2, ub_metrics + row4n);
  b.signal(isa::Unit::kVpu);
  copy_linear(b, kUb, ub_metrics, kHbm, Y.metrics, 2 * N, 4);

  // ---- backward ----
  if (train) {
    const AdamRegs ar;
    // optimizer epilogue on a [rows][ct N] piece of a tensor in HBM rows of `pitch` elements
    // (W^T or the bias as one row): `load` w, m, v into the scratch, else the update with the
    // gradient from the ACC and the stores; w16: the bf16 copy (0: none)
    // `transposed`: the ACC holds the gradient's transpose (block rows are the tensor's
    // columns, lanes its rows), and w, m, v are walked element by element to match
    // a bias as the update's tensor: w, m, v one after the other, no bf16 copy
    auto bias_of = [](const LayerRegions& R) {
      LayerRegions t;
      t.w = R.b;
      t.w_m = R.b_m;
      t.w_v = R.b_v;
      t.g = R.g_b;
      return t;
    };
    // `R.streams` > 1 (a Dense layer): w, m, v interleaved, one run a row of the piece each way
    auto update = [&](bool load, const Block& k, const LayerRegions& R, uint32_t pitch,
                      bool transposed = false) {
      const uint64_t w = R.w, m = R.w_m, v = R.w_v, w16 = R.w16;
      const uint32_t cn = k.ct * N, n4 = k.rows * k.ct * row4n;
      const uint32_t S = R.streams, uw = k.scratch, u16 = uw + 3 * n4;
      // the piece's w, m, v in the UB: three [rows][cn] blocks, or [rows][ct][S][N] interleaved
      const uint32_t um = S > 1 ? uw + row4n : uw + n4, uv = S > 1 ? uw + 2 * row4n : um + n4;
      if (transposed && S > 1) throw std::logic_error("compiler: interleaved transposed update");
      const uint64_t off =
          transposed ? uint64_t{k.c0} * N * pitch + k.r0 : uint64_t{k.r0} * pitch + k.c0 * N;
      auto tensor = [&](uint64_t base, int e) {
        return transposed ? hbm(base + off * e, {{cn, int32_t(pitch * e)}, {k.rows, e}})
                          : hbm(base + off * e, {{cn, e}, {k.rows, int32_t(pitch * e)}});
      };
      auto rows4 = [&](uint64_t base) { return tensor(base, 4); };
      auto urows = [&](uint32_t base, int e) {
        return ub(base, {{cn, e}, {k.rows, int32_t(cn * e)}});
      };
      // interleaved: the S tensors' runs of the piece's rows, as one
      auto state = [&]() {
        return hbm(w + off * S * 4, {{S * cn, 4}, {k.rows, int32_t(pitch * S * 4)}});
      };
      auto ustate = [&]() { return ub(uw, {{S * cn, 4}, {k.rows, int32_t(S * cn * 4)}}); };
      if (split) {  // the gradient to the gradient vector, the update after the all-reduce
        if (load) return;
        for (uint32_t r = 0; r < k.rows; ++r)
          for (uint32_t c = 0; c < k.ct; ++c) {
            b.vpu_ld(kAcc, ar.g, k.acc(r, c));
            b.vpu_st(kF32, ar.g, uw + (r * cn + c * N) * 4);
          }
        b.signal(isa::Unit::kVpu);
        b.dma_copy(urows(uw, 4), rows4(R.g), 4);
        return;
      }
      if (load) {
        if (S > 1) {
          b.dma_copy(state(), ustate(), 4);
        } else {
          b.dma_copy(rows4(w), urows(uw, 4), 4);
          b.dma_copy(rows4(m), urows(um, 4), 4);
          if (adam) b.dma_copy(rows4(v), urows(uv, 4), 4);
        }
        b.signal(isa::Unit::kDma);
        return;
      }
      if (adam) {  // vector j = (r, c): with the ACC's tiles interleaved row by row (r = j / ct,
                   // c = j % ct: the ACC, UB and bf16 addresses all step evenly through the
                   // piece, one REPEAT), else column by column (r = j % rows, c = j / rows:
                   // they step evenly down a column, one REPEAT each)
        auto row = [&](uint32_t j) { return k.interleaved ? j / k.ct : j % k.rows; };
        auto col = [&](uint32_t j) { return k.interleaved ? j % k.ct : j / k.rows; };
        auto elem = [&](uint32_t j) { return row(j) * cn + col(j) * N; };
        auto at = [&](uint32_t j) {  // byte offset of vector j's w (m, v: um, uv instead of uw)
          return S > 1 ? (row(j) * k.ct + col(j)) * S * row4n : elem(j) * 4;
        };
        emit_adam_pipelined(
            b, ar, k.rows * k.ct,
            [&](uint32_t j, int g, int m, int v) {
              b.vpu_ld(kAcc, g, k.acc(row(j), col(j)));
              b.vpu_ld(kF32, m, um + at(j));
              b.vpu_ld(kF32, v, uv + at(j));
            },
            [&](uint32_t j, int w) { b.vpu_ld(kF32, w, uw + at(j)); },
            [&](uint32_t j, int m, int v) {
              b.vpu_st(kF32, m, um + at(j));
              b.vpu_st(kF32, v, uv + at(j));
            },
            [&](uint32_t j, int w) {
              b.vpu_st(kF32, w, uw + at(j));
              if (w16) b.vpu_st(kBf16, w, u16 + elem(j) * 2);
            });
      }
      for (uint32_t r = 0; !adam && r < k.rows; ++r)
        for (uint32_t c = 0; c < k.ct; ++c) {
          const uint32_t e = r * cn + c * N, at = S > 1 ? (r * k.ct + c) * S * row4n : e * 4;
          b.vpu_ld(kAcc, ar.g, k.acc(r, c));
          b.vpu_ld(kF32, ar.w, uw + at);
          b.vpu_ld(kF32, ar.m, um + at);
          // SGD: m (velocity) = mu m - lr g; w += velocity
          b.vpu_op(Fn::kMul, ar.t1, ar.b1, ar.m);
          b.vpu_op(Fn::kMul, ar.t2, ar.lr_t, ar.g);
          b.vpu_op(Fn::kSub, ar.m, ar.t1, ar.t2);
          b.vpu_op(Fn::kAdd, ar.w, ar.w, ar.m);
          b.vpu_st(kF32, ar.w, uw + at);
          b.vpu_st(kF32, ar.m, um + at);
          if (w16) b.vpu_st(kBf16, ar.w, u16 + e * 2);
        }
      b.signal(isa::Unit::kVpu);
      if (S > 1) {
        b.dma_copy(ustate(), state(), 4);
      } else {
        b.dma_copy(urows(uw, 4), rows4(w), 4);
        b.dma_copy(urows(um, 4), rows4(m), 4);
        if (adam) b.dma_copy(urows(uv, 4), rows4(v), 4);
      }
      if (w16) b.dma_copy(urows(u16, 2), tensor(w16, 2), 2);
    };
    const uint32_t upd_bytes = 3 * row4n + row2n;
    for (uint32_t l = L; l >= 1; --l) {
      phase("bwd" + std::to_string(l));
      const LayerRegions& R = Y.layers[fp.convs + l - 1];
      const uint64_t dz = transient("dz" + std::to_string(l));
      const uint64_t dzt = transient("dzT" + std::to_string(l));
      // dz^T [D_l][Bpad], the activation rows of the weight gradient
      if (!emit_transpose_mxu(b, arena_lo, arena_hi, chip_.acc_rows, ub_identity, dz, Bpad, D[l],
                              P[l], P[l] * 2, dzt, Bpad * 2))
        emit_transpose(b, arena_lo, arena_hi, dz, Bpad, D[l], P[l], P[l] * 2, dzt, Bpad * 2);
      if (l > 1 || fp.first_conv >= 0) {  // dx = dz W^T, the relu gradient by x_{l-1} > 0
        Matmul op;
        op.name = "Dense input gradient";
        op.M = Bpad;
        op.Kt = P[l] / N;
        op.Ct = P[l - 1] / N;
        op.a = dz;
        op.a_pitch = P[l] * 2;
        op.w = R.w16;
        op.w_pitch = P[l - 1] * 2;
        op.w_by_column = false;
        op.epi_row_bytes = 2 * row2n;
        // (l = 1: the gradient of the Flatten input; relu if the last feature op is a relu conv)
        const bool relu =
            l > 1 ? spec_.layers[l - 2].relu : fp.ops.back().conv && fp.ops.back().f.relu;
        // kept units pass d x 1 / (1 - rate)
        const float drop = l > 1 ? spec_.layers[l - 2].dropout : 0.0f;
        const uint64_t x = x_addr(l - 1), out = transient("dz" + std::to_string(l - 1));
        auto load_x = [&](const Block& k) {  // x_{l-1} of the piece, for the relu mask
          const uint32_t pitch = k.ct * row2n, xs = k.scratch + k.rows * pitch;
          const uint64_t off = uint64_t{k.r0} * P[l - 1] + k.c0 * N;
          b.dma_copy(hbm(x + off * 2, {{k.ct * N, 2}, {k.rows, int32_t(P[l - 1] * 2)}}),
                     ub(xs, {{k.ct * N, 2}, {k.rows, int32_t(pitch)}}), 2);
          b.signal(isa::Unit::kDma);
        };
        Epilogue epi;
        if (relu) epi.load = load_x;
        epi.run = [&](const Block& k) {
          const uint32_t pitch = k.ct * row2n, xs = k.scratch + k.rows * pitch;
          const uint64_t off = uint64_t{k.r0} * P[l - 1] + k.c0 * N;
          for (uint32_t r = 0; r < k.rows; ++r)
            for (uint32_t c = 0; c < k.ct; ++c) {
              b.vpu_ld(kAcc, 3, k.acc(r, c));
              if (relu) {
                b.vpu_ld(kBf16, 4, xs + r * pitch + c * row2n);
                b.vpu_op(Fn::kCmpLt, 4, 0, 4);
                if (drop > 0) {
                  b.vpu_lif(5, 1.0f / (1.0f - drop));
                  b.vpu_op(Fn::kMul, 3, 3, 5);
                }
                b.vpu_op(Fn::kSel, 3, 3, 0, 4);
              }
              b.vpu_st(kBf16, 3, k.scratch + r * pitch + c * row2n);
            }
          b.signal(isa::Unit::kVpu);
          b.dma_copy(ub(k.scratch, {{k.ct * N, 2}, {k.rows, int32_t(pitch)}}),
                     hbm(out + off * 2, {{k.ct * N, 2}, {k.rows, int32_t(P[l - 1] * 2)}}), 2);
        };
        note(emit_matmul(b, op, arena_lo, arena_hi, chip_.acc_rows, epi));
      }
      // optimizer constants (the AdamRegs: b1 = momentum, lr_t = lr for SGD)
      if (adam) {
        emit_adam_constants(b, ar, opt_.beta1, opt_.beta2, opt_.epsilon, ub_lrt);
      } else {
        b.vpu_lif(ar.b1, opt_.momentum);
        b.vpu_ld(kF32, ar.lr_t, ub_lrt);
      }
      // d W^T = dz^T x_{l-1}: rows the units, columns the inputs
      Matmul dw;
      dw.name = "Dense weight gradient";
      dw.M = D[l];
      dw.Kt = Bpad / N;
      dw.Ct = P[l - 1] / N;
      dw.a = dzt;
      dw.a_pitch = Bpad * 2;
      dw.w = x_addr(l - 1);
      if (l == 1 && x0_rows) {
        dw.w_gather = x0_gather;
        dw.w_run = x0_row;
      }
      dw.w_pitch = P[l - 1] * 2;
      dw.w_by_column = false;
      dw.epi_row_bytes = upd_bytes;
      dw.epi_buffers = 2;
      dw.interleave = true;
      dw.acc_interleave = true;
      note(emit_matmul(b, dw, arena_lo, arena_hi, chip_.acc_rows,
                       {[&](const Block& k) { update(true, k, R, P[l - 1]); },
                        [&](const Block& k) { update(false, k, R, P[l - 1]); }}));
      // d b = 1^T dz: one row
      Matmul db;
      db.name = "Dense bias gradient";
      db.M = 1;
      db.Kt = Bpad / N;
      db.Ct = P[l] / N;
      db.a = Y.ones;
      db.a_pitch = Bpad * 2;
      db.w = dz;
      db.w_pitch = P[l] * 2;
      db.w_by_column = false;
      db.epi_row_bytes = upd_bytes;
      note(emit_matmul(b, db, arena_lo, arena_hi, chip_.acc_rows,
                       {[&](const Block& k) { update(true, k, bias_of(R), P[l]); },
                        [&](const Block& k) { update(false, k, bias_of(R), P[l]); }}));
    }
    // ---- the layers before Flatten, backward (last first) ----
    for (int i = int(nf) - 1; i >= 0 && i >= fp.first_conv; --i) {
      const FeatureOp& op = fp.ops[i];
      if (op.fused_pool && op.route_in_dw) continue;  // routed in the conv's weight gradient
      const std::string id = feature_name(op, i);
      phase("bwd_" + id);
      const bool last = i + 1 == int(nf);
      const bool routed = op.conv && op.route_in_dw;  // its dz made in the UB, never stored
      const MapRef g = routed ? MapRef{} : grad_ref(i);
      const FeatureOp* prev = i > 0 ? &fp.ops[i - 1] : nullptr;
      const bool prev_relu = prev && prev->conv && prev->f.relu;
      if (op.fused_pool) {  // dz of the conv before: dp routed by the argmax codes
        const MapRef gin = grad_ref(i - 1);
        const uint32_t F = op.out.c;
        if (g.px != F * 2 || g.sample != uint64_t{op.out.size()} * 2 || gin.px != F * 2)
          throw std::logic_error(id + ": the pooled gradient is not compact");
        prepare_grad(i - 1, false);
        emit_pool_route(b, arena_lo, arena_hi, B, op.out.h, op.out.w, F, g.addr,
                        transient(feature_name(fp.ops[i - 1], i - 1) + ".argmax"), gin.addr);
        note(id + ": the pooled gradient routed by the argmax codes, with the relu gradient");
        continue;
      }
      if (!op.conv) {
        const MapRef x = out_ref(i - 1), gin = grad_ref(i - 1);
        prepare_grad(i - 1, op.in.h % op.f.pool || op.in.w % op.f.pool);
        emit_pool_backward(b, arena_lo, arena_hi, op.f.kind == FeatureLayerSpec::Kind::kMaxPool,
                           op.f.pool, prev_relu, op.in, op.out, B, x, g, gin);
        note(id + ": pooling gradient" + std::string(prev_relu ? " with the relu gradient" : ""));
        continue;
      }
      const LayerRegions& R = Y.layers[op.param];
      const uint32_t F = op.f.filters, C = op.in.c;
      if (last && !fp.dz0_in_place) {  // dz0's [Bpad][P0] rows into [Mpad][Fpad]
        prepare_grad(i, false);
        const uint32_t pixels = op.out.h * op.out.w;
        b.dma_copy(
            hbm(transient("dz0"), {{F, 2}, {pixels, int32_t(F * 2)}, {B, int32_t(P0 * 2)}}),
            hbm(g.addr, {{F, 2}, {pixels, int32_t(op.g_px)}, {B, int32_t(pixels * op.g_px)}}), 2);
      }
      // dz^T [F][Mpad]: the weight gradient's activation rows
      const bool by_taps = weight_grad_by_taps(op, N);
      const uint64_t dzt = by_taps ? 0 : transient(id + ".gradT");
      if (!by_taps && !emit_transpose_mxu(b, arena_lo, arena_hi, chip_.acc_rows, ub_identity,
                                          g.addr, op.Mpad, F, op.Fpad, op.g_px, dzt, op.Mpad * 2))
        emit_transpose(b, arena_lo, arena_hi, g.addr, op.Mpad, F, op.Fpad, op.g_px, dzt,
                       op.Mpad * 2);
      if (op.dx) {  // dx = im2col(dz) x flip(W), before the weights change
        const uint64_t wflip = transient(id + ".kernel_flip");
        zero(wflip, uint64_t{op.Kdpad} * op.Cpad * 2);
        emit_flip_kernel(b, op.g, R.w16, op.Kpad * 2, wflip, op.Cpad * 2);
        prepare_grad(i - 1, false);
        const MapRef x = out_ref(i - 1), gin = grad_ref(i - 1);
        Matmul mm;
        mm.name = "Conv2D input gradient";
        mm.M = op.Min;
        mm.Kt = op.Kdpad / N;
        mm.Ct = op.Cpad / N;
        mm.w = wflip;
        mm.w_pitch = op.Cpad * 2;
        mm.w_by_column = false;
        mm.epi_row_bytes = 2 * row2n;
        auto load_x = [&](const Block& k) {  // the producer's relu output, for the mask
          const uint32_t pitch = k.ct * row2n, xs = k.scratch + k.rows * pitch;
          const uint32_t valid = std::min(k.ct * N, C - k.c0 * N);
          b.dma_copy(hbm(x.addr + uint64_t{k.r0} * x.px + k.c0 * N * 2,
                         {{valid, 2}, {k.rows, int32_t(x.px)}}),
                     ub(xs, {{valid, 2}, {k.rows, int32_t(pitch)}}), 2);
          b.signal(isa::Unit::kDma);
        };
        Epilogue epi;
        if (prev_relu) epi.load = load_x;
        epi.run = [&](const Block& k) {
          const uint32_t pitch = k.ct * row2n, xs = k.scratch + k.rows * pitch;
          const uint32_t valid = std::min(k.ct * N, C - k.c0 * N);
          for (uint32_t r = 0; r < k.rows; ++r)
            for (uint32_t c = 0; c < k.ct; ++c) {
              b.vpu_ld(kAcc, 3, k.acc(r, c));
              if (prev_relu) {
                b.vpu_ld(kBf16, 4, xs + r * pitch + c * row2n);
                b.vpu_op(Fn::kCmpLt, 4, 0, 4);
                b.vpu_op(Fn::kSel, 3, 3, 0, 4);
              }
              b.vpu_st(kBf16, 3, k.scratch + r * pitch + c * row2n);
            }
          b.signal(isa::Unit::kVpu);
          b.dma_copy(ub(k.scratch, {{valid, 2}, {k.rows, int32_t(pitch)}}),
                     hbm(gin.addr + uint64_t{k.r0} * gin.px + k.c0 * N * 2,
                         {{valid, 2}, {k.rows, int32_t(gin.px)}}),
                     2);
        };
        // Implicit GEMM where a k-tile stays in a kernel row of a compact map: at stride 1
        // staged straight from the gradient (no padded map in HBM), else from the padded,
        // dilated map; where no staging fits, the patch gather.
        const uint32_t k = op.g.k;
        const bool implicit = choices_.implicit_gemm && F % N == 0 && op.Kdpad == k * k * F;
        ImplicitA ia;
        ia.px = F * 2;
        ia.w = op.in.w + k - 1;
        ia.h = op.in.h + k - 1;
        ia.k = k;
        ia.ho = op.in.h;
        ia.wo = op.in.w;
        ia.batch = B;
        std::string how;
        if (implicit && op.g.s == 1 && g.px == F * 2) {
          ia.direct = true;
          ia.src = g.addr;
          ia.src_sample = g.sample;
          ia.src_w = op.out.w;
          ia.src_h = op.out.h;
          ia.y0 = k - 1 - op.g.pt;
          ia.x0 = k - 1 - op.g.pl;
          ia.ub_zero = ub_zero;
          ia.zero_bytes = zero_bytes;
          how = emit_matmul_implicit(b, mm, ia, arena_lo, arena_hi, chip_.acc_rows, epi);
        }
        if (how.empty()) {
          const PatchMap dmap = grad_source(i, g);
          // (at stride 1 the direct staging's search was this one's: no second try)
          if (implicit && !ia.direct && dmap.map.px == F * 2) {
            ia.direct = false;
            ia.addr = dmap.map.addr;
            ia.sample = dmap.map.sample;
            how = emit_matmul_implicit(b, mm, ia, arena_lo, arena_hi, chip_.acc_rows, epi);
          }
          if (how.empty()) {
            mm.a_gather = gather_from(dmap);
            mm.a_run = dmap.run();
            how = emit_matmul(b, mm, arena_lo, arena_hi, chip_.acc_rows, epi);
          }
        }
        note(how);
      }
      if (adam) {
        emit_adam_constants(b, ar, opt_.beta1, opt_.beta2, opt_.epsilon, ub_lrt);
      } else {
        b.vpu_lif(ar.b1, opt_.momentum);
        b.vpu_ld(kF32, ar.lr_t, ub_lrt);
      }
      // The fused pair's first convolution over the images (valid padding): item by item,
      // a pooled row of a sample each (conv_pool_lowering.h), its sums then updated from the ACC.
      if (routed && i == 0 && !op.f.same &&
          conv_pool_weight_gradient_fits(static_cast<int>(N), arena_hi - arena_lo, op.in.h,
                                         op.in.w, op.f.kernel, F)) {
        const FeatureOp& pool = fp.ops[i + 1];
        const MapRef dp = grad_ref(i + 1);
        if (dp.px != F * 2 || dp.sample != uint64_t{pool.out.size()} * 2)
          throw std::logic_error(id + ": the pooled gradient is not compact");
        const uint32_t T = op.f.kernel * op.f.kernel, Fc = F / N;
        const uint32_t jg = std::min(Fc, chip_.acc_rows / (T + 1));
        for (uint32_t j0 = 0; j0 < Fc; j0 += jg) {
          ConvPoolWeightGrad g;
          g.images = Y.images;
          g.batch = B;
          g.h = op.in.h;
          g.w = op.in.w;
          g.k = op.f.kernel;
          g.f = F;
          g.dp = dp.addr;
          g.codes = transient(id + ".argmax");
          g.j0 = j0;
          g.j1 = std::min(Fc, j0 + jg);
          emit_conv_pool_weight_gradient(b, arena_lo, arena_hi, g);
          // the sums: rows t < T the kernel's column of taps (W^T transposed), row T the bias
          UbArena ua(arena_lo, arena_hi, static_cast<int>(N), "Conv2D weight update");
          Block kw{0, T, j0, g.j1 - j0, T + 1, 0, 0, 0, false};
          kw.scratch = ua.take(uint64_t{T} * kw.ct * upd_bytes);
          Block kb{0, 1, j0, g.j1 - j0, T + 1, 0, 0, T, false};
          kb.scratch = ua.take(uint64_t{kb.ct} * upd_bytes);
          update(true, kw, R, op.Kpad, true);
          update(false, kw, R, op.Kpad, true);
          update(true, kb, bias_of(R), op.Fpad);
          update(false, kb, bias_of(R), op.Fpad);
        }
        note(id + " + " + feature_name(pool, i + 1) +
             ": weight gradient item by item (a pooled row of a sample each: its im2col^T rows "
             "from the image, dz routed from dp by the argmax codes in the UB, never stored)");
        continue;
      }
      const PatchMap xmap = conv_source(i, false);
      Matmul dw;
      dw.name = "Conv2D weight gradient";
      dw.Kt = op.Mpad / N;
      dw.w_by_column = false;
      dw.epi_row_bytes = upd_bytes;
      dw.acc_interleave = true;
      const uint32_t K = xmap.cols();
      uint64_t dw_hi = arena_hi;  // the routing's staging buffers (if any) above the matmul's
      if (by_taps) {  // [d W; d b] = [patches(x) ones]^T dz: rows the taps and a ones row
        dw.M = K + 1;
        dw.Ct = op.Fpad / N;
        const uint64_t ones = Y.ones;
        // One input channel: the samples the group's positions lie in are staged in the UB
        // once (one contiguous copy of at most two samples), and the k k taps gathered from
        // there instead of k k walks over HBM (runs of an output row, a DRAM page each).
        const uint32_t plane = xmap.ho * xmap.wo;
        // (only where the two buffers take at most a quarter of the arena; emit_matmul drops
        // them when no tiling fits beside them)
        if (xmap.c == 1 && xmap.map.sample <= 8192 &&
            4 * xmap.map.sample <= (arena_hi - arena_lo) / 4)
          dw.a_stage_bytes = static_cast<uint32_t>(2 * xmap.map.sample);
        dw.a_gather = [&b, xmap, ub_zero, zero_elems, K, ones, plane](
                          uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols, uint32_t dst,
                          uint32_t pitch, bool, uint32_t stage_at) {
          const uint32_t taps =
              static_cast<uint32_t>(std::min<uint64_t>(rows, K - std::min<uint64_t>(r0, K)));
          const uint64_t last = std::min<uint64_t>(c0 + cols, xmap.rows());
          const uint64_t b0 = c0 / plane, nb = last > c0 ? (last - 1) / plane - b0 + 1 : 0;
          PatchMap from = xmap;  // the map in HBM, or its staged samples
          if (taps && stage_at != kNoStage && nb >= 1 && nb <= 2) {
            const uint32_t elems = static_cast<uint32_t>(nb * xmap.map.sample / 2);
            b.dma_copy(hbm(xmap.map.addr + b0 * xmap.map.sample, {{elems, 2}}),
                       ub(stage_at, {{elems, 2}}), 2);
            from.map.addr =
                stage_at - b0 * xmap.map.sample;  // wraps; the walks add b0's offset back
            from.map.space = isa::Space::kUb;
          }
          if (taps)
            emit_gather_patches_t(b, from, static_cast<uint32_t>(r0), taps, c0, cols, dst, pitch,
                                  ub_zero, zero_elems);
          if (r0 + rows > K)  // the ones row: d b = 1^T dz, the bias gradient's own operand
            b.dma_copy(hbm(ones + uint64_t{c0} * 2, {{cols, 2}}),
                       ub(dst + (K - static_cast<uint32_t>(r0)) * pitch, {{cols, 2}}), 2);
        };
        dw.a_run = xmap.wo;
        dw.w = g.addr;
        dw.w_pitch = op.g_px;
        if (routed) {  // dz from dp and the argmax codes, in the weight loads
          const FeatureOp& pool = fp.ops[i + 1];
          const MapRef dp = grad_ref(i + 1);
          if (dp.px != F * 2 || dp.sample != uint64_t{pool.out.size()} * 2)
            throw std::logic_error(id + ": the pooled gradient is not compact");
          auto ro = std::make_shared<RouteOperand>();
          ro->dp = dp.addr;
          ro->codes = transient(id + ".argmax");
          ro->wo = op.out.w;
          ro->f = F;
          ro->m = op.M;
          // a stage holds kRouteStageRows pooled rows of dp and codes: a group of at most
          // (kRouteStageRows - 2) 2 wo conv rows lies in as many
          ro->stage_bytes = static_cast<uint32_t>(uint64_t{kRouteStageRows} * pool.out.w * F * 4);
          dw_hi -= 2 * uint64_t{ro->stage_bytes};
          ro->stage[0] = static_cast<uint32_t>(dw_hi);
          ro->stage[1] = static_cast<uint32_t>(dw_hi + ro->stage_bytes);
          dw.max_group_tiles = std::max(1u, (kRouteStageRows - 2) * 2 * op.out.w / N);
          dw.operand_buffers = 3;
          dw.w_gather = [&b, ro](uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
                                 uint32_t dst, uint32_t pitch, bool, uint32_t) {
            emit_route_operand(b, *ro, r0, rows, c0, cols, dst, pitch);
          };
          dw.w_run = F;
          note(id + " + " + feature_name(pool, i + 1) +
               ": the pooled gradient routed by the argmax codes into the weight gradient's "
               "operand loads (dz never stored)");
        }
      } else {  // d W^T = dz^T patches(x): rows the filters, columns (ky, kx, c)
        dw.M = F;
        dw.Ct = op.Kpad / N;
        dw.a = dzt;
        dw.a_pitch = op.Mpad * 2;
        dw.w_gather = gather_from(xmap);
        dw.w_run = xmap.run();
      }
      // by taps: a piece's rows below K update W (transposed), row K the bias
      auto dw_update = [&](bool load, const Block& k) {
        if (!by_taps) return update(load, k, R, op.Kpad);
        Block kw = k;
        kw.rows = k.r0 < K ? std::min(k.rows, K - k.r0) : 0;
        if (kw.rows) update(load, kw, R, op.Kpad, true);
        if (k.r0 + k.rows <= K) return;
        Block kb = k;
        kb.r0 = 0;
        kb.rows = 1;
        kb.ar0 = k.ar0 + kw.rows;
        // after W's part, on a row: the piece's spare bf16 space (no bf16 copy of the bias)
        // covers the rounding
        kb.scratch = (k.scratch + kw.rows * k.ct * upd_bytes + row4n - 1) / row4n * row4n;
        update(load, kb, bias_of(R), op.Fpad);
      };
      note(emit_matmul(b, dw, arena_lo, dw_hi, chip_.acc_rows,
                       {[&](const Block& k) { dw_update(true, k); },
                        [&](const Block& k) { dw_update(false, k); }}));
      if (by_taps) continue;
      Matmul db;  // d b = 1^T dz
      db.name = "Conv2D bias gradient";
      db.M = 1;
      db.Kt = op.Mpad / N;
      db.Ct = op.Fpad / N;
      db.a = Y.ones;
      db.a_pitch = op.Mpad * 2;
      db.w = g.addr;
      db.w_pitch = op.g_px;
      db.w_by_column = false;
      db.epi_row_bytes = upd_bytes;
      note(emit_matmul(b, db, arena_lo, arena_hi, chip_.acc_rows,
                       {[&](const Block& k) { update(true, k, bias_of(R), op.Fpad); },
                        [&](const Block& k) { update(false, k, bias_of(R), op.Fpad); }}));
    }
    if (split) emit_split_update(b, phases, arena_lo, arena_hi, ub_lrt);
  }

  program_ = phases.finish(mxu_bound_);
}

void DenseStackStep::emit_split_update(ProgramBuilder& b, StepPhases& phases, uint64_t arena_lo,
                                       uint64_t arena_hi, uint32_t ub_lrt) {
  const uint32_t N = chip_.n, row4n = 4 * N, row2n = 2 * N;
  const Layout& Y = layout_;
  const bool adam = opt_.kind == OptimizerSpec::Kind::kAdam;
  // ---- reduce_scatter: chip r ends with chunk (r + 1) mod P of the gradient vector summed
  // (fenced: its own sync) ----
  const uint32_t P = static_cast<uint32_t>(rep_.replicas);
  if (P > 1) {
    phases.begin("reduce_scatter");
    AllReduceSpec ars;
    ars.chips = rep_.replicas;
    ars.rank = rep_.rank;
    ars.n = static_cast<int>(N);
    ars.hbm_addr = static_cast<uint32_t>(Y.grads);
    ars.elems = static_cast<uint32_t>(Y.grads_elems);
    ars.ub_base = static_cast<uint32_t>(arena_lo);
    ars.ub_bytes = static_cast<uint32_t>(arena_hi - arena_lo);
    ars.reduce_scatter_only = true;
    std::vector<isa::Instruction> block = ring_allreduce_program(ars);
    block.pop_back();  // its HALT
    b.fenced_block(block);
  }
  // ---- update: the optimizer on this chip's chunk of every tensor, from its summed gradients
  phases.begin("update");
  const AdamRegs ar;
  if (adam) {
    emit_adam_constants(b, ar, opt_.beta1, opt_.beta2, opt_.epsilon, ub_lrt);
  } else {
    b.vpu_lif(ar.b1, opt_.momentum);
    b.vpu_ld(kF32, ar.lr_t, ub_lrt);
  }
  // One tensor of `elems` values (a multiple of N) as a flat vector: its gradient at g, w, m, v
  // (`streams` > 1: interleaved N values at a time from w, as LayerRegions), the bf16 copy at
  // w16 (0: none); in chunks through two buffer sets, chunk q + 1 loaded while the VPU updates q.
  auto update_flat = [&](uint64_t elems, uint32_t streams, uint64_t w, uint64_t m, uint64_t v,
                         uint64_t g, uint64_t w16) {
    const uint32_t S = streams, tensors = S > 1 ? 1 : (adam ? 3 : 2);
    const uint64_t per_elem = 4 + 4 * uint64_t{S > 1 ? S : tensors} + (w16 ? 2 : 0);
    const uint64_t room = arena_hi - arena_lo > 20 * 64 ? arena_hi - arena_lo - 20 * 64 : 0;
    const uint64_t fit = room / (2 * per_elem) / N * N;
    if (fit == 0)
      throw std::invalid_argument("the update phase needs more UB than the chip's " +
                                  std::to_string(chip_.ub_bytes) + " bytes");
    const uint32_t DR = static_cast<uint32_t>(std::min<uint64_t>({elems, fit, 65535u / S * N / N}));
    UbArena a(arena_lo, arena_hi, static_cast<int>(N), "update");
    uint32_t gb[2], wb[2], mb[2], vb[2], hb[2];
    for (int i = 0; i < 2; ++i) {
      gb[i] = a.take(uint64_t{DR} * 4);
      wb[i] = a.take(uint64_t{DR} * 4 * (S > 1 ? S : 1));
      mb[i] = S > 1 ? wb[i] + row4n : a.take(uint64_t{DR} * 4);
      vb[i] = S > 1 ? wb[i] + 2 * row4n : (adam ? a.take(uint64_t{DR} * 4) : 0);
      hb[i] = w16 ? a.take(uint64_t{DR} * 2) : 0;
    }
    const uint32_t stride = S > 1 ? S * row4n : row4n;  // bytes from one vector's w to the next
    const uint64_t chunks = (elems + DR - 1) / DR;
    auto load = [&](uint64_t q) {
      const uint64_t e0 = q * DR, n = std::min<uint64_t>(DR, elems - e0);
      const int i = static_cast<int>(q % 2);
      copy_linear(b, kHbm, g + e0 * 4, kUb, gb[i], n, 4);
      if (S > 1) {
        copy_linear(b, kHbm, w + e0 * S * 4, kUb, wb[i], n * S, 4);
      } else {
        copy_linear(b, kHbm, w + e0 * 4, kUb, wb[i], n, 4);
        copy_linear(b, kHbm, m + e0 * 4, kUb, mb[i], n, 4);
        if (adam) copy_linear(b, kHbm, v + e0 * 4, kUb, vb[i], n, 4);
      }
      b.signal(isa::Unit::kDma);
    };
    load(0);
    for (uint64_t q = 0; q < chunks; ++q) {
      const uint64_t e0 = q * DR, n = std::min<uint64_t>(DR, elems - e0);
      const int i = static_cast<int>(q % 2);
      if (q + 1 < chunks) load(q + 1);
      const uint32_t count = static_cast<uint32_t>(n / N);
      if (adam) {
        emit_adam_pipelined(
            b, ar, count,
            [&](uint32_t j, int gr, int mr, int vr) {
              b.vpu_ld(kF32, gr, gb[i] + j * row4n);
              b.vpu_ld(kF32, mr, mb[i] + j * stride);
              b.vpu_ld(kF32, vr, vb[i] + j * stride);
            },
            [&](uint32_t j, int wr) { b.vpu_ld(kF32, wr, wb[i] + j * stride); },
            [&](uint32_t j, int mr, int vr) {
              b.vpu_st(kF32, mr, mb[i] + j * stride);
              b.vpu_st(kF32, vr, vb[i] + j * stride);
            },
            [&](uint32_t j, int wr) {
              b.vpu_st(kF32, wr, wb[i] + j * stride);
              if (w16) b.vpu_st(kBf16, wr, hb[i] + j * row2n);
            });
      } else {
        for (uint32_t j = 0; j < count; ++j) {  // as the fused epilogue: m = mu m - lr g; w += m
          b.vpu_ld(kF32, ar.g, gb[i] + j * row4n);
          b.vpu_ld(kF32, ar.w, wb[i] + j * stride);
          b.vpu_ld(kF32, ar.m, mb[i] + j * stride);
          b.vpu_op(Fn::kMul, ar.t1, ar.b1, ar.m);
          b.vpu_op(Fn::kMul, ar.t2, ar.lr_t, ar.g);
          b.vpu_op(Fn::kSub, ar.m, ar.t1, ar.t2);
          b.vpu_op(Fn::kAdd, ar.w, ar.w, ar.m);
          b.vpu_st(kF32, ar.w, wb[i] + j * stride);
          b.vpu_st(kF32, ar.m, mb[i] + j * stride);
          if (w16) b.vpu_st(kBf16, ar.w, hb[i] + j * row2n);
        }
      }
      b.signal(isa::Unit::kVpu);
      if (S > 1) {
        copy_linear(b, kUb, wb[i], kHbm, w + e0 * S * 4, n * S, 4);
      } else {
        copy_linear(b, kUb, wb[i], kHbm, w + e0 * 4, n, 4);
        copy_linear(b, kUb, mb[i], kHbm, m + e0 * 4, n, 4);
        if (adam) copy_linear(b, kUb, vb[i], kHbm, v + e0 * 4, n, 4);
      }
      if (w16) copy_linear(b, kUb, hb[i], kHbm, w16 + e0 * 2, n, 2);
    }
  };
  // the parts of the tensors in gradient-vector chunk `chunk` ([e0, e1) of each, N-aligned)
  const uint64_t C = Y.grads_elems / P;
  auto parts = [&](uint32_t chunk, const std::function<void(const LayerRegions&, bool bias,
                                                            uint64_t e0, uint64_t e1)>& f) {
    const uint64_t c0 = uint64_t{chunk} * C, c1 = c0 + C;
    const auto shapes = weight_shapes(spec_);
    for (size_t j = 0; j < shapes.size(); ++j) {
      const LayerRegions& R = Y.layers[j];
      const uint64_t bias = padded(shapes[j].second),
                     kernel = uint64_t{shapes[j].second} * padded(shapes[j].first);
      for (const auto& [go, n, is_bias] : {std::tuple{(R.g - Y.grads) / 4, kernel, false},
                                           std::tuple{(R.g_b - Y.grads) / 4, bias, true}}) {
        const uint64_t a = std::max(go, c0), z = std::min(go + n, c1);
        if (a < z) f(R, is_bias, a - go, z - go);
      }
    }
  };
  const uint32_t own = (static_cast<uint32_t>(rep_.rank) + 1) % P;
  parts(own, [&](const LayerRegions& R, bool bias, uint64_t e0, uint64_t e1) {
    if (bias) {
      update_flat(e1 - e0, 1, R.b + e0 * 4, R.b_m + e0 * 4, R.b_v + e0 * 4, R.g_b + e0 * 4, 0);
      return;
    }
    const uint64_t S = R.streams;  // interleaved state: N values of each stream in turn
    update_flat(e1 - e0, R.streams, R.w + e0 * S * 4, R.w_m + e0 * 4, R.w_v + e0 * 4,
                R.g + e0 * 4, R.w16 + e0 * 2);
  });
  // ---- allgather: every chunk's bf16 copies and fp32 biases, which the forward and backward
  // passes read, from the chip that updated them to every other (fenced: its own sync) ----
  if (P > 1) {
    phases.begin("allgather");
    std::vector<std::vector<GatherRegion>> chunks(P);
    for (uint32_t k = 0; k < P; ++k)
      parts(k, [&](const LayerRegions& R, bool bias, uint64_t e0, uint64_t e1) {
        const int e = bias ? 4 : 2;
        const uint64_t base = bias ? R.b : R.w16;
        for (uint64_t a = e0; a < e1;) {  // loop counts of at most 16 bits
          const uint64_t n = std::min<uint64_t>(e1 - a, 32768);
          GatherRegion g;
          g.addr = static_cast<uint32_t>(base + a * e);
          g.elem_bytes = e;
          g.loops = {{static_cast<uint32_t>(n), e}};
          chunks[k].push_back(g);
          a += n;
        }
      });
    std::vector<isa::Instruction> block = ring_allgather_program(rep_.replicas, rep_.rank, chunks);
    block.pop_back();  // its HALT
    b.fenced_block(block);
  }
}

std::vector<std::pair<uint64_t, uint64_t>> DenseStackStep::replicated_ranges() const {
  std::vector<std::pair<uint64_t, uint64_t>> r;
  const auto shapes = weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const uint64_t U = padded(shapes[j].second), K = padded(shapes[j].first);
    r.push_back({layout_.layers[j].w16, U * K * 2});
    r.push_back({layout_.layers[j].b, U * 4});
  }
  return r;
}

void DenseStackStep::merge_replica_states(const std::vector<DenseParams>& ps,
                                          const std::vector<DenseOptState>& ss, DenseParams& p,
                                          DenseOptState& s) const {
  const uint32_t P = static_cast<uint32_t>(rep_.replicas);
  if (ps.size() != P || ss.size() != P)
    throw std::invalid_argument("merge_replica_states: " + std::to_string(P) +
                                " replica states are needed, got " + std::to_string(ps.size()));
  p = ps[0];
  s = ss[0];
  if (P == 1) return;
  const uint64_t C = layout_.grads_elems / P;
  // the chip that updated gradient-vector element i: chunk c's is chip c - 1 (mod P)
  auto owner = [&](uint64_t i) { return static_cast<size_t>((i / C + P - 1) % P); };
  const auto shapes = weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const auto [K, U] = shapes[j];
    const LayerRegions& R = layout_.layers[j];
    const uint64_t go = (R.g - layout_.grads) / 4, gb = (R.g_b - layout_.grads) / 4;
    const uint64_t Kp = padded(K);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t u = 0; u < U; ++u) {  // Keras [K][U]; the vector holds W^T [Up][Kp]
        const size_t o = owner(go + uint64_t{u} * Kp + k), at = size_t{k} * U + u;
        p.kernel[j][at] = ps[o].kernel[j][at];
        s.m.kernel[j][at] = ss[o].m.kernel[j][at];
        s.v.kernel[j][at] = ss[o].v.kernel[j][at];
      }
    for (uint32_t u = 0; u < U; ++u) {
      const size_t o = owner(gb + u);
      p.bias[j][u] = ps[o].bias[j][u];
      s.m.bias[j][u] = ss[o].m.bias[j][u];
      s.v.bias[j][u] = ss[o].v.bias[j][u];
    }
  }
}

uint64_t DenseStackStep::bound_cycles() const {
  uint64_t sum = 0;
  for (const auto& p : stats_.phases)
    sum += std::max({p.mxu_bound, p.vpu, p.hbm_bytes / kHbmBytesPerCycle});
  return sum;
}

std::vector<uint8_t> DenseStackStep::program_bytes() const { return isa::encode_program(program_); }

std::vector<DenseStackStep::Write> DenseStackStep::state_image(const DenseParams& p,
                                                               const DenseOptState& s) const {
  const uint32_t N = chip_.n, Bpad = padded(batch_);
  const auto shapes = weight_shapes(spec_);
  const uint32_t J = shapes.size();
  auto check = [&](const DenseParams& q, const char* what) {
    if (q.kernel.size() != J || q.bias.size() != J)
      throw std::invalid_argument(std::string(what) + ": " + std::to_string(q.kernel.size()) +
                                  " layers with weights, the model has " + std::to_string(J));
    for (uint32_t j = 0; j < J; ++j)
      if (q.kernel[j].size() != size_t{shapes[j].first} * shapes[j].second ||
          q.bias[j].size() != shapes[j].second)
        throw std::invalid_argument(std::string(what) + ": layer with weights " +
                                    std::to_string(j + 1) + " has the wrong number of values");
  };
  check(p, "weights");
  check(s.m, "first moments");
  check(s.v, "second moments");
  std::vector<Write> out;
  auto transposed = [&](const std::vector<float>& k, uint32_t j, bool bf16) {
    const int e = bf16 ? 2 : 4;
    const uint32_t K = shapes[j].first, U = shapes[j].second, Kp = padded(K);
    std::vector<uint8_t> img(size_t{padded(U)} * Kp * e, 0);
    for (uint32_t i = 0; i < K; ++i)
      for (uint32_t u = 0; u < U; ++u) {
        const uint32_t bits = fp::bits(k[size_t{i} * U + u]);
        const size_t at = (size_t{u} * Kp + i) * e;
        if (bf16) {
          const uint16_t h = fp::fp32_to_bf16(bits);
          img[at] = static_cast<uint8_t>(h);
          img[at + 1] = static_cast<uint8_t>(h >> 8);
        } else {
          put32(img, at, bits);
        }
      }
    return img;
  };
  auto vec = [&](const std::vector<float>& v, uint32_t pad) {
    std::vector<uint8_t> img(size_t{pad} * 4, 0);
    for (size_t i = 0; i < v.size(); ++i) put32(img, i * 4, fp::bits(v[i]));
    return img;
  };
  for (uint32_t j = 0; j < J; ++j) {
    const LayerRegions& R = layout_.layers[j];
    const uint32_t Up = padded(shapes[j].second);
    // w, m, v: one image of the layer's region (three tensors or interleaved)
    const uint64_t wb = uint64_t{Up} * padded(shapes[j].first);
    std::vector<uint8_t> state(3 * wb * 4);
    for (const auto& [base, k] : {std::pair{R.w, &p.kernel[j]}, std::pair{R.w_m, &s.m.kernel[j]},
                                  std::pair{R.w_v, &s.v.kernel[j]}}) {
      const auto img = transposed(*k, j, false);
      for (uint64_t e = 0; e < wb; ++e) std::memcpy(&state[R.at(base, e, N) - R.w], &img[e * 4], 4);
    }
    out.push_back({R.w, std::move(state)});
    out.push_back({R.w16, transposed(p.kernel[j], j, true)});
    out.push_back({R.b, vec(p.bias[j], Up)});
    out.push_back({R.b_m, vec(s.m.bias[j], Up)});
    out.push_back({R.b_v, vec(s.v.bias[j], Up)});
  }
  std::vector<uint8_t> pw(3 * N * 4);
  for (uint32_t i = 0; i < N; ++i) {
    put32(pw, i * 4, fp::bits(s.beta1_power));
    put32(pw, (N + i) * 4, fp::bits(s.beta2_power));
    put32(pw, (2 * N + i) * 4, s.steps);
  }
  out.push_back({layout_.powers, pw});
  out.push_back(lr_image(opt_.lr));
  const uint32_t C = spec_.classes(), Cpad = padded(C);
  std::vector<uint8_t> cs(size_t{2} * Cpad * 4);
  for (uint32_t c = 0; c < Cpad; ++c) {
    put32(cs, c * 4, fp::bits(static_cast<float>(c)));
    put32(cs, (Cpad + c) * 4, c < C ? 0xFFFFFFFFu : 0u);
  }
  out.push_back({layout_.consts, cs});
  const size_t n_ones = ones_count();
  (void)Bpad;
  std::vector<uint8_t> ones(n_ones * 2);
  for (size_t i = 0; i < n_ones; ++i) {
    ones[2 * i] = 0x80;  // bf16 1.0 = 0x3F80
    ones[2 * i + 1] = 0x3F;
  }
  out.push_back({layout_.ones, ones});
  // the gradient vector's padding stays zero (the all-reduce sums it; the update reads it)
  if (layout_.grads_elems) out.push_back({layout_.grads, std::vector<uint8_t>(layout_.grads_elems * 4)});
  return out;
}

DenseStackStep::Write DenseStackStep::lr_image(float lr) const {
  const size_t N = static_cast<size_t>(chip_.n);
  std::vector<uint8_t> row(N * 4);
  for (size_t i = 0; i < N; ++i) put32(row, i * 4, fp::bits(lr));
  return {layout_.lr, row};
}

std::vector<DenseStackStep::Write> DenseStackStep::batch_image(
    const std::vector<uint16_t>& images, const std::vector<uint8_t>& labels) const {
  const uint32_t B = batch_, Bpad = padded(B);
  // a feature map: NHWC as it is; a Flatten input: rows padded to N
  const uint32_t K = spec_.features.empty() ? spec_.inputs : uint32_t(spec_.input_shape.size());
  const uint32_t P0 = spec_.features.empty() ? padded(K) : K;
  if (images.size() != size_t{B} * K || labels.size() != B)
    throw std::invalid_argument("batch: " + std::to_string(images.size()) + " values and " +
                                std::to_string(labels.size()) + " labels for " + std::to_string(B) +
                                " samples of " + std::to_string(K));
  std::vector<uint8_t> img(size_t{Bpad} * P0 * 2, 0);
  for (uint32_t s = 0; s < B; ++s)
    for (uint32_t k = 0; k < K; ++k) {
      const uint16_t h = images[size_t{s} * K + k];
      img[(size_t{s} * P0 + k) * 2] = static_cast<uint8_t>(h);
      img[(size_t{s} * P0 + k) * 2 + 1] = static_cast<uint8_t>(h >> 8);
    }
  std::vector<uint8_t> lb(size_t{Bpad} * 4, 0);
  for (uint32_t s = 0; s < B; ++s) {
    if (labels[s] >= spec_.classes())
      throw std::invalid_argument("label " + std::to_string(labels[s]) + " of sample " +
                                  std::to_string(s) + ": the model has " +
                                  std::to_string(spec_.classes()) + " classes");
    put32(lb, size_t{s} * 4, fp::bits(static_cast<float>(labels[s])));
  }
  return {{layout_.images, img}, {layout_.labels, lb}};
}

void DenseStackStep::read_state(Reader read, void* ctx, DenseParams& p, DenseOptState& s) const {
  const auto shapes = weight_shapes(spec_);
  const uint32_t J = shapes.size();
  for (DenseParams* q : {&p, &s.m, &s.v}) {
    q->kernel.assign(J, {});
    q->bias.assign(J, {});
  }
  for (uint32_t j = 0; j < J; ++j) {
    const LayerRegions& R = layout_.layers[j];
    const uint32_t K = shapes[j].first, U = shapes[j].second, Kp = padded(K);
    const auto state = read(ctx, R.w, size_t{padded(U)} * Kp * 4 * 3);  // w, m, v
    auto kernel = [&](uint64_t addr) {
      std::vector<float> k(size_t{K} * U);
      for (uint32_t i = 0; i < K; ++i)
        for (uint32_t u = 0; u < U; ++u)
          k[size_t{i} * U + u] =
              fp::f32(get32(state, R.at(addr, uint64_t{u} * Kp + i, chip_.n) - R.w));
      return k;
    };
    auto bias = [&](uint64_t addr) {
      const auto bytes = read(ctx, addr, size_t{U} * 4);
      std::vector<float> v(U);
      for (uint32_t u = 0; u < U; ++u) v[u] = fp::f32(get32(bytes, u * 4));
      return v;
    };
    p.kernel[j] = kernel(R.w);
    s.m.kernel[j] = kernel(R.w_m);
    s.v.kernel[j] = kernel(R.w_v);
    p.bias[j] = bias(R.b);
    s.m.bias[j] = bias(R.b_m);
    s.v.bias[j] = bias(R.b_v);
  }
  const auto pw = read(ctx, layout_.powers, 3 * chip_.n * 4);
  s.beta1_power = fp::f32(get32(pw, 0));
  s.beta2_power = fp::f32(get32(pw, chip_.n * 4));
  s.steps = get32(pw, 2 * chip_.n * 4);
}

void DenseStackStep::read_metrics(Reader read, void* ctx, float& loss, float& correct) const {
  const auto m = read(ctx, layout_.metrics, 2 * chip_.n * 4);
  loss = fp::f32(get32(m, 0));
  correct = fp::f32(get32(m, chip_.n * 4));
}

std::vector<float> DenseStackStep::read_probabilities(Reader read, void* ctx) const {
  const uint32_t C = spec_.classes(), Cpad = padded(C);
  const auto bytes = read(ctx, layout_.probs, size_t{batch_} * Cpad * 4);
  std::vector<float> out(size_t{batch_} * C);
  for (uint32_t s = 0; s < batch_; ++s)
    for (uint32_t c = 0; c < C; ++c)
      out[size_t{s} * C + c] = fp::f32(get32(bytes, (size_t{s} * Cpad + c) * 4));
  return out;
}

DenseParams glorot_init(const DenseStackSpec& spec, uint64_t seed) {
  uint64_t state = seed;
  DenseParams p;
  const auto shapes = weight_shapes(spec);
  size_t conv = 0;
  for (const auto& [K, U] : shapes) {
    // Keras's fans: a Conv2D's are k k in and k k filters (its receptive field)
    double field = 1;
    while (conv < spec.features.size() && spec.features[conv].kind != FeatureLayerSpec::Kind::kConv)
      ++conv;
    if (conv < spec.features.size()) {
      field = double(spec.features[conv].kernel) * spec.features[conv].kernel;
      ++conv;
    }
    p.kernel.push_back(glorot(state, size_t{K} * U, K, U * field));
    p.bias.push_back(std::vector<float>(U, 0.0f));
  }
  return p;
}

DenseOptState zero_opt_state(const DenseStackSpec& spec) {
  DenseOptState s;
  for (const auto& [K, U] : weight_shapes(spec))
    for (DenseParams* q : {&s.m, &s.v}) {
      q->kernel.push_back(std::vector<float>(size_t{K} * U, 0.0f));
      q->bias.push_back(std::vector<float>(U, 0.0f));
    }
  return s;
}

}  // namespace tessera::compiler
