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

#include "sw/compiler/feature_plan.h"
#include "sw/compiler/graph.h"
#include "sw/compiler/lowering_util.h"
#include "sw/compiler/step_lowering.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/allreduce.h"

namespace tessera::compiler {
namespace {
using namespace lowering;

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
uint32_t get32(const std::vector<uint8_t>& v, size_t at) {
  return uint32_t{v[at]} | uint32_t{v[at + 1]} << 8 | uint32_t{v[at + 2]} << 16 |
         uint32_t{v[at + 3]} << 24;
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
  // the graph passes: the lowered graph's ops choose the lowerings and fusions
  graph_ = std::make_shared<const Graph>(compile_graph(spec, opt.kind, chip, batch));
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
  s.graph_ = std::make_shared<const Graph>(compile_graph(spec, s.opt_.kind, chip, batch));
  s.plan_hbm(0, nullptr);
  return s.layout_.bytes;
}

std::pair<uint64_t, uint64_t> DenseStackStep::state_range() const {
  const uint64_t lo = layout_.layers.front().w;
  return {lo, layout_.ones + uint64_t{ones_count()} * 2 - lo};
}

uint32_t DenseStackStep::ones_count() const {
  uint32_t ones = padded(batch_);
  for (const auto& op : plan_features(*graph_, batch_).ops) ones = std::max(ones, op.Mpad);
  return ones;
}

void DenseStackStep::plan_hbm(uint64_t base, const Layout* share) {
  const uint32_t N = chip_.n, B = batch_, Bpad = padded(B), L = spec_.layers.size();
  const FeaturePlan fp = plan_features(*graph_, B);
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
    Y.grads_elems =
        allreduce_padded_elems(static_cast<uint32_t>(elems), rep_.replicas, static_cast<int>(N));
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
        if (!op.by_taps) add(id + ".gradT", uint64_t{op.f.filters} * op.Mpad * 2, fbwd(i), fbwd(i));
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

void DenseStackStep::compile() { StepLowering(*this, *graph_).run(); }

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

DenseParams DenseStackStep::merge_owned(const std::vector<const DenseParams*>& parts) const {
  const uint32_t P = static_cast<uint32_t>(parts.size());
  DenseParams out = *parts[0];
  if (P == 1) return out;
  const uint64_t C = layout_.grads_elems / P;
  // the chip that owns gradient-vector element i: the reduce-scatter leaves chunk c summed on
  // chip c - 1 (mod P), which updates it
  auto owner = [&](uint64_t i) { return static_cast<size_t>((i / C + P - 1) % P); };
  const auto shapes = weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const auto [K, U] = shapes[j];
    const LayerRegions& R = layout_.layers[j];
    const uint64_t go = (R.g - layout_.grads) / 4, gb = (R.g_b - layout_.grads) / 4;
    const uint64_t Kp = padded(K);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t u = 0; u < U; ++u) {  // Keras [K][U]; the vector holds W^T [Up][Kp]
        const size_t at = size_t{k} * U + u;
        out.kernel[j][at] = parts[owner(go + uint64_t{u} * Kp + k)]->kernel[j][at];
      }
    for (uint32_t u = 0; u < U; ++u) out.bias[j][u] = parts[owner(gb + u)]->bias[j][u];
  }
  return out;
}

void DenseStackStep::merge_replica_states(const std::vector<DenseParams>& ps,
                                          const std::vector<DenseOptState>& ss, DenseParams& p,
                                          DenseOptState& s) const {
  const uint32_t P = static_cast<uint32_t>(rep_.replicas);
  if (ps.size() != P || ss.size() != P)
    throw std::invalid_argument("merge_replica_states: " + std::to_string(P) +
                                " replica states are needed, got " + std::to_string(ps.size()));
  std::vector<const DenseParams*> w, m, v;
  for (uint32_t r = 0; r < P; ++r) {
    w.push_back(&ps[r]);
    m.push_back(&ss[r].m);
    v.push_back(&ss[r].v);
  }
  p = merge_owned(w);
  s = ss[0];
  s.m = merge_owned(m);
  s.v = merge_owned(v);
}

DenseParams DenseStackStep::read_gradients(Reader read, void* ctx) const {
  if (!rep_.split())
    throw std::logic_error(
        "read_gradients: the fused step keeps no gradients (its update reads them from the ACC); "
        "compile the split update (Replication::split_update)");
  DenseParams g;
  const auto shapes = weight_shapes(spec_);
  for (size_t j = 0; j < shapes.size(); ++j) {
    const auto [K, U] = shapes[j];
    const LayerRegions& R = layout_.layers[j];
    const uint64_t Kp = padded(K);
    const auto kernel = read(ctx, R.g, U * Kp * 4);  // W^T's U real rows [U][Kp]
    std::vector<float> k(size_t{K} * U);
    for (uint32_t i = 0; i < K; ++i)
      for (uint32_t u = 0; u < U; ++u)
        k[size_t{i} * U + u] = fp::f32(get32(kernel, (u * Kp + i) * 4));
    const auto bias = read(ctx, R.g_b, size_t{U} * 4);
    std::vector<float> b(U);
    for (uint32_t u = 0; u < U; ++u) b[u] = fp::f32(get32(bias, size_t{u} * 4));
    g.kernel.push_back(std::move(k));
    g.bias.push_back(std::move(b));
  }
  return g;
}

DenseParams DenseStackStep::merge_replica_gradients(const std::vector<DenseParams>& gs) const {
  const uint32_t P = static_cast<uint32_t>(rep_.replicas);
  if (gs.size() != P)
    throw std::invalid_argument("merge_replica_gradients: " + std::to_string(P) +
                                " replicas' gradients are needed, got " +
                                std::to_string(gs.size()));
  std::vector<const DenseParams*> parts;
  for (const DenseParams& g : gs) parts.push_back(&g);
  return merge_owned(parts);
}

const Graph& DenseStackStep::graph() const { return *graph_; }

uint64_t DenseStackStep::hbm_bound_cycles() const {
  return hbm_cycles(stats_.hbm_bytes, stats_.instructions, chip_.channels);
}

uint64_t DenseStackStep::ici_bound_cycles() const { return stats_.ici_flits * ici_flit_cycles(); }

uint64_t DenseStackStep::bound_cycles() const {
  uint64_t sum = 0;
  for (const auto& p : stats_.phases) sum += roofline(p, chip_.channels).bound();
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
  if (layout_.grads_elems)
    out.push_back({layout_.grads, std::vector<uint8_t>(layout_.grads_elems * 4)});
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
