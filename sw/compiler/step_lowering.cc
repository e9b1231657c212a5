// StepLowering: the walk over the lowered graph, the setup phase and the helpers every op's
// lowering shares (sw/compiler/step_lowering.h).
#include "sw/compiler/step_lowering.h"

#include <algorithm>
#include <stdexcept>

namespace tessera::compiler {
using namespace lowering;
using Fn = isa::Funct;
namespace {

bool one_of(const std::string& op, std::initializer_list<const char*> ops) {
  for (const char* o : ops)
    if (op == o) return true;
  return false;
}
}  // namespace

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

StepLowering::StepLowering(DenseStackStep& step, const Graph& graph)
    : s_(step),
      g_(graph),
      spec_(step.spec_),
      chip_(step.chip_),
      Y(step.layout_),
      N(step.chip_.n),
      B(step.batch_),
      Bpad(step.padded(step.batch_)),
      L(static_cast<uint32_t>(step.spec_.layers.size())),
      row2n(2 * N),
      row4n(4 * N),
      b(static_cast<int>(N), step.chip_.ub_bytes, step.chip_.acc_rows),
      phases(b, step.stats_) {
  P = {step.padded(spec_.inputs)};
  D = {spec_.inputs};
  for (const auto& l : spec_.layers) {
    P.push_back(step.padded(l.units));
    D.push_back(l.units);
  }
  Cpad = P.back();
  Cc = Cpad / N;
  P0 = P[0];
  fp = plan_features(g_, B);
  nf = static_cast<uint32_t>(fp.ops.size());
  train = step.kind_ == StepKind::kTrain;
  adam = step.opt_.kind == OptimizerSpec::Kind::kAdam;
  split = train && step.rep_.split();
  x0_rows = nf && fp.ops.back().fused_pool && fp.x0_in_place && P0 == fp.ops.back().out.size();
  x0_row = x0_rows ? fp.ops.back().out.w * fp.ops.back().out.c : 0;  // wp F
  x0_hp = x0_rows ? fp.ops.back().out.h : 0;

  UbArena global(0, chip_.ub_bytes, static_cast<int>(N), "setup");
  ub_powers = global.take(3 * row4n);
  ub_lrt = global.take(row4n);
  for (const auto& d : spec_.layers) dropout |= d.dropout > 0;
  ub_dbase = global.take(uint64_t{L} * row4n);  // per layer: H(seed ^ step)
  ub_metrics = global.take(2 * row4n);
  ub_labels = global.take(uint64_t{Bpad} * 4);
  ub_consts = global.take(2 * Cc * row4n);
  uint32_t maxP = 0;
  for (uint32_t l = 1; l <= L; ++l) maxP = std::max(maxP, P[l]);
  for (const auto& op : fp.ops) maxP = std::max(maxP, op.Fpad);
  ub_bias = global.take(uint64_t{maxP} * 4);
  zero_bytes = 32 * N;
  ub_zero = nf ? global.take(zero_bytes) : 0;
  zero_elems = zero_bytes / 2;
  ub_identity = global.take(uint64_t{N} * row2n);  // N bf16 rows: I
  arena_lo = chip_.ub_bytes - global.free();
  arena_hi = chip_.ub_bytes;
  upd_bytes = 3 * row4n + row2n;
}

void StepLowering::run() {
  // Registers: V0 stays zero; V1 loss sum, V2 correct count (forward); the optimizer's in
  // AdamRegs (V1..V12) during the backward pass.
  bool dense_begun = false;
  for (const std::string& ph : graph_phases(g_)) {
    Nodes nodes;
    for (const Node& n : g_.nodes())
      if (!n.dead && n.phase == ph && n.op != "cast_bf16") nodes.push_back(&n);
    const bool backward = ph.compare(0, 3, "bwd") == 0;
    if (backward && !train) continue;  // evaluation: the forward pass only
    if (ph.compare(0, 3, "fwd") == 0 && ph.compare(0, 4, "fwd_") != 0 && !dense_begun) {
      b.vpu_li(1, 0);  // the loss sum and correct count, from the first Dense layer on
      b.vpu_li(2, 0);
      dense_begun = true;
    }
    phases.begin(ph);
    auto only = [&](std::initializer_list<const char*> ops) -> const Node& {
      for (const Node* n : nodes)
        if (one_of(n->op, ops)) return *n;
      throw std::logic_error("compiler: phase " + ph + " has no op this lowering takes");
    };
    if (ph == "setup") {
      setup();
    } else if (ph.compare(0, 4, "fwd_") == 0) {
      feature_forward(only({"fused.conv2d_bias", "fused.conv2d_bias_relu",
                            "fused.conv2d_bias_relu_maxpool", "maxpool", "avgpool"}));
    } else if (ph.compare(0, 3, "fwd") == 0) {
      const Node& n = only({"fused.matmul_bias", "fused.matmul_bias_relu",
                            "fused.matmul_bias_relu_dropout", "fused.matmul_bias_softmax_xent"});
      if (n.op == "fused.matmul_bias_softmax_xent")
        softmax_xent(n);
      else
        dense_forward(n);
    } else if (ph.compare(0, 4, "bwd_") == 0) {
      feature_backward(nodes.front()->layer, nodes);
    } else {
      dense_backward(static_cast<uint32_t>(nodes.front()->layer) - nf + 1, nodes);
    }
  }
  if (split) split_update();
  s_.program_ = phases.finish(s_.mxu_bound_);
}

void StepLowering::setup() {
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
    if (adam) emit_adam_powers(b, std::nullopt, s_.opt_.beta1, s_.opt_.beta2, ub_powers, ub_lrt);
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
}

// ---- helpers ----

uint64_t StepLowering::transient(const std::string& name) const {
  for (const auto& t : Y.transients)
    if (t.name == name) return t.addr;
  throw std::logic_error("no transient " + name);
}

uint64_t StepLowering::x_addr(uint32_t l) const {
  return l == 0 ? (nf ? transient("x0") : Y.images) : transient("x" + std::to_string(l));
}

void StepLowering::note(const std::string& text) {
  s_.plan_.push_back(phases.current() + "  " + text);
}

void StepLowering::zero(uint64_t addr, uint64_t bytes) {
  if (bytes) emit_zero_hbm(b, ub_zero, zero_bytes, addr, bytes);
}

MapRef StepLowering::out_ref(int i) const {
  if (i < 0) {
    const Shape3& s0 = spec_.input_shape;
    return {Y.images, s0.c * 2, s0.size() * 2};
  }
  const FeatureOp& op = fp.ops[i];
  if (i + 1 == int(nf) && fp.x0_in_place) return {transient("x0"), op.act_px, uint64_t{P0} * 2};
  return {transient(feature_name(op, i) + ".out"), op.act_px,
          uint64_t{op.out.h} * op.out.w * op.act_px};
}

MapRef StepLowering::grad_ref(int i) const {
  const FeatureOp& op = fp.ops[i];
  if (i + 1 == int(nf) && fp.dz0_in_place) return {transient("dz0"), op.g_px, uint64_t{P0} * 2};
  return {transient(feature_name(op, i) + ".grad"), op.g_px,
          uint64_t{op.out.h} * op.out.w * op.g_px};
}

// Before op i's output gradient is written (by a writer that covers every input of its
// windows unless `holes`): the bytes nobody writes are zeroed: a conv's padding columns and
// rows beyond M, the inputs no pooling window covers.
void StepLowering::prepare_grad(int i, bool holes) {
  const FeatureOp& op = fp.ops[i];
  if (i + 1 == int(nf) && fp.dz0_in_place) return;
  const MapRef g = grad_ref(i);
  const uint64_t pixels = uint64_t{B} * op.out.h * op.out.w;
  if (holes || (op.conv && op.Fpad != op.f.filters))
    zero(g.addr, (op.conv ? op.Mpad : pixels) * op.g_px);
  else if (op.conv)
    zero(g.addr + pixels * op.g_px, (op.Mpad - pixels) * op.g_px);
}

// The convolutions' operands, gathered into the UB from the maps (no im2col in HBM).
StepLowering::Gather StepLowering::gather_from(const PatchMap& pm) {
  ProgramBuilder& b = this->b;
  const uint32_t ub_zero = this->ub_zero, zero_elems = this->zero_elems;
  return [&b, pm, ub_zero, zero_elems](uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
                                       uint32_t dst, uint32_t pitch, bool fresh, uint32_t) {
    emit_gather_patches(b, pm, r0, rows, c0, cols, dst, pitch, ub_zero, zero_elems, fresh);
  };
}

// x0[sample][d] for samples [r0, r0 + rows) and d in [c0, c0 + cols), into UB rows `pitch`
// bytes apart (x0 pooled-row-major): the Dense layer's A operand, and its weight gradient's
// weight operand
StepLowering::Gather StepLowering::x0_gather() {
  ProgramBuilder& b = this->b;
  const uint64_t x0 = transient("x0");
  const uint32_t x0_row = this->x0_row, Bpad = this->Bpad;
  return [&b, x0, x0_row, Bpad](uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
                                uint32_t dst, uint32_t pitch, bool, uint32_t) {
    for (uint32_t d = c0; d < c0 + cols;) {
      const uint32_t py = d / x0_row, off = d % x0_row;
      const uint32_t len = std::min(c0 + cols - d, x0_row - off);
      b.dma_copy(hbm(x0 + ((uint64_t{py} * Bpad + r0) * x0_row + off) * 2,
                     {{len, 2}, {rows, int32_t(x0_row * 2)}}),
                 ub(dst + (d - c0) * 2, {{len, 2}, {rows, int32_t(pitch)}}), 2);
      d += len;
    }
  };
}

// conv i's forward operand: its input map, or (`emit`: built now) the padded copy
PatchMap StepLowering::conv_source(int i, bool emit) {
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
}

// conv i's input-gradient operand: the output gradient g dilated by the stride and padded
// by k - 1 - pad, read as a stride-1 convolution of the flipped kernel (H + k - 1 rows)
PatchMap StepLowering::grad_source(int i, const MapRef& g) {
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
}

// a bias as the update's tensor: w, m, v one after the other, no bf16 copy
StepLowering::LayerRegions StepLowering::bias_of(const LayerRegions& R) {
  LayerRegions t;
  t.w = R.b;
  t.w_m = R.b_m;
  t.w_v = R.b_v;
  t.g = R.g_b;
  return t;
}

}  // namespace tessera::compiler
