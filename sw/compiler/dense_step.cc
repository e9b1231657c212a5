// DenseStackStep: lowers a training step of a Dense stack op by op (tessera/dense_step.h;
// docs/compiler.md, "Dense stacks").
//
//   phase      work
//   setup      VPU: b1^t, b2^t, lr_t (Adam)
//   fwd_l      matmul x_{l-1} W_l (W^T rows, MXU.LDW t) -> VPU bias, relu -> x_l (bf16, HBM);
//              the last layer: bias, softmax, cross-entropy, accuracy, d logits (bf16)
//   bwd_l      DMA dz_l -> dz_l^T; matmul dz_l W_l^T -> VPU relu gradient by x_{l-1} > 0 ->
//              dz_{l-1} (l > 1); matmul dz_l^T x_{l-1} -> VPU optimizer on W_l^T and its bf16
//              copy (the gradient read from the ACC); matmul 1^T dz_l -> optimizer on b_l
// Layer l's input gradient is computed before its weights change (it reads the old copy).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "harness/fp_ref.h"
#include "sw/compiler/lowering_util.h"
#include "sw/compiler/program_builder.h"
#include "sw/compiler/reroll.h"
#include "sw/compiler/vpu_math.h"
#include "tessera/dense_step.h"

namespace tessera::compiler {
namespace {
using namespace lowering;
using Fn = isa::Funct;
constexpr isa::Kind kF32 = isa::Kind::kUbF32;
constexpr isa::Kind kBf16 = isa::Kind::kUbBf16;
constexpr isa::Kind kAcc = isa::Kind::kAcc;
constexpr isa::Space kHbm = isa::Space::kHbm;
constexpr isa::Space kUb = isa::Space::kUb;

// One MXU matmul C[M][Ct N] = A[M][Kt N] x B, operands bf16 in HBM.
struct Matmul {
  const char* name = "";
  uint32_t M = 0, Kt = 0, Ct = 0;
  uint64_t a = 0;
  uint32_t a_pitch = 0;  // bytes between A rows
  uint64_t w = 0;
  uint32_t w_pitch = 0;  // bytes between weight rows
  // true: weight row c is output column c and holds the contraction (W^T rows: MXU.LDW t);
  // false: weight row j is contraction index j and holds the output columns
  bool w_by_column = false;
  bool whole_columns = false;  // every column tile in one group (the softmax's rows)
  uint32_t epi_row_bytes = 0;  // UB scratch the epilogue needs per ACC row of the group
};
// The epilogue of a piece of one (row block, column group): rows r0 .. r0 + rows of the output
// (ar0 .. ar0 + rows of the block); the ACC row of (piece row r, tile c) is
// acc0 + c * R + ar0 + r.
struct Block {
  uint32_t r0, rows, c0, ct, R;
  uint32_t scratch;  // UB: epi_row_bytes x rows x ct bytes (pieces alternate two buffers)
  uint32_t acc0, ar0;
};
// An epilogue in two parts, software-pipelined by emit_matmul: `load` (DMA into the piece's
// scratch; may be empty) is emitted a piece ahead of `run` (VPU from the ACC, DMA out).
struct Epilogue {
  std::function<void(const Block&)> load, run;
};

// The generic tiled matmul. Row blocks of R rows x column groups of CT tiles fill half the ACC
// (blocks alternate halves, so block k's epilogue overlaps block k + 1's matmul); (R, CT) is the
// pair with the least HBM traffic (A is read once per column group, the weights once per row
// block). The contraction runs in groups of KG tiles, A and weight rows double-buffered in the
// UB (the builder's sync lets the DMA load the next group while the MXU works). The epilogue
// runs in pieces of rows through two alternating scratch buffers, so a piece's DMA overlaps the
// VPU work of the one before. Returns the tiling as text (for tessera compile --dump).
std::string emit_matmul(ProgramBuilder& b, const Matmul& op, uint64_t ub_lo, uint64_t ub_hi,
                        uint32_t acc_rows, const Epilogue& epi) {
  const uint32_t N = b.n();
  const uint32_t half = acc_rows / 2;
  const uint64_t arena = ub_hi - ub_lo, tile = uint64_t{N} * N * 2;
  uint32_t R = 0, CT = 0, PR = 0;
  uint64_t best = ~0ull;
  for (uint32_t ct = op.whole_columns ? op.Ct : 1; ct <= op.Ct; ++ct) {
    if (ct > half) break;
    const uint32_t r = std::min(op.M, half / ct);
    // epilogue pieces: two buffers in at most half the arena
    const uint32_t pr =
        op.epi_row_bytes
            ? static_cast<uint32_t>(std::min<uint64_t>(r, arena / 4 / (uint64_t{ct} * op.epi_row_bytes)))
            : r;
    if (pr < 1) continue;
    const uint64_t left = arena - 2 * uint64_t{pr} * ct * op.epi_row_bytes;
    uint32_t rr = r;  // rows shrink until one contraction tile of A and W double-buffers
    while (rr > 1 && 2 * (uint64_t{rr} * 2 * N + ct * tile) + 256 > left) rr = (rr + 1) / 2;
    if (2 * (uint64_t{rr} * 2 * N + ct * tile) + 256 > left) continue;
    const uint64_t traffic = uint64_t{op.M} * op.Kt * N * ceil_div(op.Ct, ct) +
                             uint64_t{op.Ct} * N * op.Kt * N * ceil_div(op.M, rr);
    if (traffic < best) {
      best = traffic;
      R = rr;
      CT = ct;
      PR = std::min(pr, rr);
    }
  }
  UbArena a(ub_lo, ub_hi, static_cast<int>(N), op.name);
  if (!CT) a.take(arena + 1);  // throws, naming the op: does not fit
  uint32_t scratch[2] = {0, 0};
  if (op.epi_row_bytes)
    for (auto& sc : scratch) sc = a.take(uint64_t{PR} * CT * op.epi_row_bytes);
  const uint64_t per_tile = (uint64_t{R} * 2 * N + CT * tile);
  const uint32_t KG =
      static_cast<uint32_t>(std::min<uint64_t>(op.Kt, a.free() / (2 * per_tile + 128)));
  if (KG < 1) a.take(a.free() + 1);
  uint32_t abuf[2], wbuf[2];
  for (int i = 0; i < 2; ++i) {
    abuf[i] = a.take(uint64_t{R} * KG * N * 2);
    wbuf[i] = a.take(uint64_t{CT} * N * KG * N * 2);
  }
  const uint32_t KGN = KG * N, groups = ceil_div(op.Kt, KG);
  struct Blk {
    uint32_t r0, rows, c0, ct, acc0;
  };
  std::vector<Blk> blocks;
  for (uint32_t r0 = 0; r0 < op.M; r0 += R)
    for (uint32_t c0 = 0; c0 < op.Ct; c0 += CT)
      blocks.push_back({r0, std::min(R, op.M - r0), c0, std::min(CT, op.Ct - c0),
                        static_cast<uint32_t>(blocks.size() % 2) * half});
  uint32_t slot = 0;
  auto emit_mm = [&](const Blk& k) {
    const uint32_t ctn = k.ct * N;
    std::vector<uint32_t> slots;  // the buffer each group was loaded into
    auto load = [&](uint32_t g) {
      const uint32_t kgn = std::min(KG, op.Kt - g * KG) * N, i = slot++ % 2;
      slots.push_back(i);
      b.dma_copy(hbm(op.a + uint64_t{k.r0} * op.a_pitch + uint64_t{g} * KGN * 2,
                     {{kgn, 2}, {k.rows, int32_t(op.a_pitch)}}),
                 ub(abuf[i], {{kgn, 2}, {k.rows, int32_t(KGN * 2)}}), 2);
      if (op.w_by_column)
        b.dma_copy(hbm(op.w + uint64_t{k.c0} * N * op.w_pitch + uint64_t{g} * KGN * 2,
                       {{kgn, 2}, {ctn, int32_t(op.w_pitch)}}),
                   ub(wbuf[i], {{kgn, 2}, {ctn, int32_t(KGN * 2)}}), 2);
      else
        b.dma_copy(hbm(op.w + uint64_t{g} * KGN * op.w_pitch + uint64_t{k.c0} * N * 2,
                       {{ctn, 2}, {kgn, int32_t(op.w_pitch)}}),
                   ub(wbuf[i], {{ctn, 2}, {kgn, int32_t(CT * N * 2)}}), 2);
      b.signal(isa::Unit::kDma);
    };
    load(0);
    for (uint32_t g = 0; g < groups; ++g) {
      if (g + 1 < groups) load(g + 1);
      const uint32_t kg = std::min(KG, op.Kt - g * KG), i = slots[g];
      for (uint32_t kt = 0; kt < kg; ++kt)
        for (uint32_t c = 0; c < k.ct; ++c) {
          if (op.w_by_column)
            b.mxu_ldw(wbuf[i] + (c * N * KGN + kt * N) * 2, KGN * 2, true);
          else
            b.mxu_ldw(wbuf[i] + (kt * N * CT * N + c * N) * 2, CT * N * 2);
          b.mxu_mm(g > 0 || kt > 0, abuf[i] + kt * N * 2, KGN * 2, k.rows, k.acc0 + c * R);
        }
      b.signal(isa::Unit::kMxu);
    }
  };
  // Pipelined: block k + 1's matmul is emitted before block k's epilogue, and each piece's
  // load before the piece before it runs.
  uint32_t piece = 0;
  emit_mm(blocks[0]);
  for (size_t k = 0; k < blocks.size(); ++k) {
    if (k + 1 < blocks.size()) emit_mm(blocks[k + 1]);
    const Blk& bk = blocks[k];
    std::vector<Block> pieces;
    for (uint32_t p0 = 0; p0 < bk.rows; p0 += PR, ++piece)
      pieces.push_back({bk.r0 + p0, std::min(PR, bk.rows - p0), bk.c0, bk.ct, R,
                        scratch[piece % 2], bk.acc0, p0});
    if (epi.load) epi.load(pieces[0]);
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (epi.load && i + 1 < pieces.size()) epi.load(pieces[i + 1]);
      epi.run(pieces[i]);
    }
  }
  return std::string(op.name) + ": [" + std::to_string(op.M) + " x " + std::to_string(op.Kt * N) +
         "] x [" + std::to_string(op.Kt * N) + " x " + std::to_string(op.Ct * N) + "]" +
         (op.w_by_column ? " (weight tiles transposed, MXU.LDW t)" : "") + "; row blocks of " +
         std::to_string(R) + ", column groups of " + std::to_string(CT) + " tiles, contraction " +
         std::to_string(op.Kt) + " tiles in groups of " + std::to_string(KG) + "; " +
         std::to_string(best * 2) + " operand bytes from HBM; epilogue pieces of " +
         std::to_string(PR) + " rows, 2 x " + std::to_string(uint64_t{PR} * CT * op.epi_row_bytes) +
         " bytes of UB";
}

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

DenseStackStep::DenseStackStep(const DenseStackSpec& spec, const OptimizerSpec& opt,
                               const ChipShape& chip, uint32_t batch, uint64_t hbm_base,
                               StepKind kind, const Layout* share_state)
    : spec_(spec), opt_(opt), chip_(chip), batch_(batch), kind_(kind) {
  if (chip.n < 4 || (chip.n & (chip.n - 1)))
    throw std::invalid_argument("array size N = " + std::to_string(chip.n) +
                                ": a power of two >= 4");
  if (batch == 0) throw std::invalid_argument("batch size 0");
  if (spec.inputs == 0) throw std::invalid_argument("the model has no inputs");
  if (spec.layers.empty()) throw std::invalid_argument("the model has no Dense layer");
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
                                    uint32_t batch) {
  DenseStackStep s;
  s.spec_ = spec;
  s.chip_ = chip;
  s.batch_ = batch;
  s.plan_hbm(0, nullptr);
  return s.layout_.bytes;
}

std::pair<uint64_t, uint64_t> DenseStackStep::state_range() const {
  const uint64_t lo = layout_.layers.front().w;
  return {lo, layout_.ones + padded(batch_) * 2 - lo};
}

void DenseStackStep::plan_hbm(uint64_t base, const Layout* share) {
  const uint32_t N = chip_.n, B = batch_, Bpad = padded(B), L = spec_.layers.size();
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
  Y.images = take(uint64_t{Bpad} * P[0] * 2);
  Y.labels = take(uint64_t{Bpad} * 4);
  if (share) {
    Y.layers = share->layers;
    Y.powers = share->powers;
    Y.consts = share->consts;
  } else {
    for (uint32_t l = 1; l <= L; ++l) {
      LayerRegions r;
      const uint64_t wb = uint64_t{P[l]} * P[l - 1];
      r.w = take(wb * 4);
      r.w_m = take(wb * 4);
      r.w_v = take(wb * 4);
      r.w16 = take(wb * 2);
      r.b = take(P[l] * 4);
      r.b_m = take(P[l] * 4);
      r.b_v = take(P[l] * 4);
      Y.layers.push_back(r);
    }
    Y.powers = take(3 * N * 4);
    Y.consts = take(2 * Cc * N * 4);
  }
  Y.ones = take(uint64_t{Bpad} * 2);
  Y.metrics = take(2 * N * 4);
  Y.probs = take(uint64_t{Bpad} * Cpad * 4);
  // Transients. Phases: fwd_l = l (1..L), bwd_l = 2L + 1 - l.
  auto bwd = [&](uint32_t l) { return int(2 * L + 1 - l); };
  for (uint32_t l = 1; l < L; ++l)  // x_l: written by fwd_l, read by bwd_{l+1}
    Y.transients.push_back({"x" + std::to_string(l), 0, uint64_t{Bpad} * P[l] * 2, int(l),
                            bwd(l + 1)});
  for (uint32_t l = 1; l <= L; ++l) {  // dz_l: from fwd_L (l = L) or bwd_{l+1}, to bwd_l
    const int first = l == L ? int(L) : bwd(l + 1);
    Y.transients.push_back({"dz" + std::to_string(l), 0, uint64_t{Bpad} * P[l] * 2, first, bwd(l)});
    Y.transients.push_back({"dzT" + std::to_string(l), 0, uint64_t{P[l]} * Bpad * 2, bwd(l),
                            bwd(l)});
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
  auto x_addr = [&](uint32_t l) { return l == 0 ? Y.images : transient("x" + std::to_string(l)); };
  const bool train = kind_ == StepKind::kTrain;
  const bool adam = opt_.kind == OptimizerSpec::Kind::kAdam;

  ProgramBuilder b(static_cast<int>(N), chip_.ub_bytes, chip_.acc_rows);
  StepPhases phases(b, stats_);
  auto phase = [&](const std::string& name) { phases.begin(name); };
  auto note = [&](const std::string& text) {
    plan_.push_back(phases.current() + "  " + text);
  };
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
  const uint32_t ub_bias = global.take(uint64_t{maxP} * 4);
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
    if (adam) emit_adam_powers(b, opt_.lr, opt_.beta1, opt_.beta2, ub_powers, ub_lrt);
    b.signal(isa::Unit::kVpu);
    copy_linear(b, kUb, ub_powers, kHbm, Y.powers, 3 * N, 4);
  }
  copy_linear(b, kHbm, Y.labels, kUb, ub_labels, Bpad, 4);
  copy_linear(b, kHbm, Y.consts, kUb, ub_consts, 2 * Cc * N, 4);
  b.signal(isa::Unit::kDma);
  b.vpu_li(1, 0);
  b.vpu_li(2, 0);

  // ---- forward ----
  for (uint32_t l = 1; l <= L; ++l) {
    phase("fwd" + std::to_string(l));
    const LayerRegions& R = Y.layers[l - 1];
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
    op.w = R.w16;
    op.w_pitch = P[l - 1] * 2;
    op.w_by_column = true;
    if (!last) {
      op.epi_row_bytes = row2n;
      const uint64_t out = x_addr(l);
      const float rate = train ? spec_.layers[l - 1].dropout : 0.0f;
      note(emit_matmul(b, op, arena_lo, arena_hi, chip_.acc_rows, {nullptr, [&](const Block& k) {
        const uint32_t pitch = k.ct * row2n;
        if (rate > 0) {  // relu(z + b), then Dropout: kept units x 1 / (1 - rate), dropped 0
          b.vpu_ld(kF32, 8, ub_consts);  // lane index (the class-index row), as an int
          b.vpu_op(Fn::kF2I, 8, 8);
          for (uint32_t r = 0; r < k.rows; ++r) {
            b.vpu_ld(kF32, 5, ub_dbase + (l - 1) * row4n);
            b.vpu_li(7, k.r0 + r);  // the sample
            b.vpu_op(Fn::kIAdd, 5, 5, 7);
            emit_hash(b, 5, 7, 9);
            for (uint32_t c = 0; c < k.ct; ++c) {
              b.vpu_ld(kAcc, 3, k.acc0 + c * k.R + k.ar0 + r);
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
        for (uint32_t c = 0; c < k.ct; ++c) {
          b.vpu_ld(kF32, 4, ub_bias + (k.c0 + c) * row4n);
          for (uint32_t r = 0; r < k.rows; ++r) {
            b.vpu_ld(kAcc, 3, k.acc0 + c * k.R + k.ar0 + r);
            b.vpu_op(Fn::kAdd, 3, 3, 4);
            if (relu) b.vpu_op(Fn::kMax, 3, 3, 0);
            b.vpu_st(kBf16, 3, k.scratch + r * pitch + c * row2n);
          }
        }
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
    const float inv_b = 1.0f / static_cast<float>(B);
    note(emit_matmul(b, op, arena_lo, arena_hi, chip_.acc_rows, {nullptr, [&](const Block& k) {
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
          b.vpu_ld(kAcc, 7, k.acc0 + c * k.R + k.ar0 + r);
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
        // p = e / sum; d logits = (p - onehot) / B
        for (uint32_t c = 0; c < Cc; ++c) {
          b.vpu_ld(kF32, 7, z_at + c * row4n);
          b.vpu_op(Fn::kDiv, 7, 7, 6);
          if (!train) b.vpu_st(kF32, 7, p_at + c * row4n);
          b.vpu_ld(kF32, 13, ub_consts + c * row4n);
          b.vpu_op(Fn::kCmpEq, 13, 4, 13);
          b.vpu_lif(14, 1.0f);
          b.vpu_op(Fn::kSel, 14, 14, 0, 13);
          b.vpu_op(Fn::kSub, 7, 7, 14);
          b.vpu_lif(14, inv_b);
          b.vpu_op(Fn::kMul, 7, 7, 14);
          b.vpu_st(kBf16, 7, d_at + c * row2n);
        }
        b.vpu_op(Fn::kRSum, 5, 5);  // z_label - max
        emit_log(b, 7, 6, 8, 9, 10, 11, 12);
        b.vpu_op(Fn::kSub, 7, 7, 5);  // loss = ln(sum e) - (z_label - max)
        b.vpu_op(Fn::kAdd, 1, 1, 7);
        b.vpu_op(Fn::kCmpEq, 7, 5, 0);  // the label's logit is the largest
        b.vpu_lif(14, 1.0f);
        b.vpu_op(Fn::kSel, 7, 14, 0, 7);
        b.vpu_op(Fn::kAdd, 2, 2, 7);
      }
      b.signal(isa::Unit::kVpu);
      if (train)
        b.dma_copy(ub(drow, {{Cpad, 2}, {k.rows, int32_t(Cc * row2n)}}),
                   hbm(dz + uint64_t{k.r0} * Cpad * 2, {{Cpad, 2}, {k.rows, int32_t(Cpad * 2)}}),
                   2);
      else
        b.dma_copy(ub(prow, {{Cpad, 4}, {k.rows, int32_t(Cc * row4n)}}),
                   hbm(Y.probs + uint64_t{k.r0} * Cpad * 4,
                       {{Cpad, 4}, {k.rows, int32_t(Cpad * 4)}}),
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
    auto update = [&](bool load, const Block& k, uint64_t w, uint64_t m, uint64_t v,
                      uint64_t w16, uint32_t pitch) {
      const uint32_t cn = k.ct * N, n4 = k.rows * k.ct * row4n;
      const uint32_t uw = k.scratch, um = uw + n4, uv = um + n4, u16 = uv + n4;
      const uint64_t off = uint64_t{k.r0} * pitch + k.c0 * N;
      auto rows4 = [&](uint64_t base) {
        return hbm(base + off * 4, {{cn, 4}, {k.rows, int32_t(pitch * 4)}});
      };
      auto urows = [&](uint32_t base, int e) {
        return ub(base, {{cn, e}, {k.rows, int32_t(cn * e)}});
      };
      if (load) {
        b.dma_copy(rows4(w), urows(uw, 4), 4);
        b.dma_copy(rows4(m), urows(um, 4), 4);
        if (adam) b.dma_copy(rows4(v), urows(uv, 4), 4);
        b.signal(isa::Unit::kDma);
        return;
      }
      for (uint32_t r = 0; r < k.rows; ++r)
        for (uint32_t c = 0; c < k.ct; ++c) {
          const uint32_t e = r * cn + c * N;
          b.vpu_ld(kAcc, ar.g, k.acc0 + c * k.R + k.ar0 + r);
          b.vpu_ld(kF32, ar.w, uw + e * 4);
          b.vpu_ld(kF32, ar.m, um + e * 4);
          if (adam) {
            b.vpu_ld(kF32, ar.v, uv + e * 4);
            emit_adam_update(b, ar);
            b.vpu_st(kF32, ar.v, uv + e * 4);
          } else {  // m: velocity = mu m - lr g; w += velocity
            b.vpu_op(Fn::kMul, ar.t1, ar.b1, ar.m);
            b.vpu_op(Fn::kMul, ar.t2, ar.lr_t, ar.g);
            b.vpu_op(Fn::kSub, ar.m, ar.t1, ar.t2);
            b.vpu_op(Fn::kAdd, ar.w, ar.w, ar.m);
          }
          b.vpu_st(kF32, ar.w, uw + e * 4);
          b.vpu_st(kF32, ar.m, um + e * 4);
          if (w16) b.vpu_st(kBf16, ar.w, u16 + e * 2);
        }
      b.signal(isa::Unit::kVpu);
      b.dma_copy(urows(uw, 4), rows4(w), 4);
      b.dma_copy(urows(um, 4), rows4(m), 4);
      if (adam) b.dma_copy(urows(uv, 4), rows4(v), 4);
      if (w16)
        b.dma_copy(urows(u16, 2), hbm(w16 + off * 2, {{cn, 2}, {k.rows, int32_t(pitch * 2)}}), 2);
    };
    const uint32_t upd_bytes = 3 * row4n + row2n;
    for (uint32_t l = L; l >= 1; --l) {
      phase("bwd" + std::to_string(l));
      const LayerRegions& R = Y.layers[l - 1];
      const uint64_t dz = transient("dz" + std::to_string(l));
      const uint64_t dzt = transient("dzT" + std::to_string(l));
      // dz^T [D_l][Bpad], the activation rows of the weight gradient, through the UB in blocks
      // of rb samples: dz rows in (contiguous runs), transposed UB to UB, out as runs of rb
      {
        UbArena t(arena_lo, arena_hi, static_cast<int>(N), "Dense gradient transpose");
        const uint64_t per_sample = uint64_t{P[l]} * 2;
        const uint32_t Rb = static_cast<uint32_t>(std::min<uint64_t>(
            {Bpad, 65535, std::max<uint64_t>(1, (t.free() - 512) / (4 * per_sample))}));
        uint32_t in[2], tr[2];
        for (int i = 0; i < 2; ++i) {
          in[i] = t.take(uint64_t{Rb} * per_sample);
          tr[i] = t.take(uint64_t{Rb} * per_sample);
        }
        for (uint32_t b0 = 0, i = 0; b0 < Bpad; b0 += Rb, i ^= 1) {
          const uint32_t rb = std::min(Rb, Bpad - b0);
          b.dma_copy(hbm(dz + uint64_t{b0} * per_sample, {{P[l], 2}, {rb, int32_t(per_sample)}}),
                     ub(in[i], {{P[l], 2}, {rb, int32_t(per_sample)}}), 2);
          b.dma_copy(ub(in[i], {{rb, int32_t(per_sample)}, {D[l], 2}}),
                     ub(tr[i], {{rb, 2}, {D[l], int32_t(rb * 2)}}), 2);
          b.dma_copy(ub(tr[i], {{rb, 2}, {D[l], int32_t(rb * 2)}}),
                     hbm(dzt + uint64_t{b0} * 2, {{rb, 2}, {D[l], int32_t(Bpad * 2)}}), 2);
        }
      }
      if (l > 1) {  // dx = dz W^T, then the relu gradient by x_{l-1} > 0
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
        const bool relu = spec_.layers[l - 2].relu;
        const float drop = spec_.layers[l - 2].dropout;  // kept units pass d x 1 / (1 - rate)
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
              b.vpu_ld(kAcc, 3, k.acc0 + c * k.R + k.ar0 + r);
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
        b.vpu_lif(ar.lr_t, opt_.lr);
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
      dw.w_pitch = P[l - 1] * 2;
      dw.w_by_column = false;
      dw.epi_row_bytes = upd_bytes;
      note(emit_matmul(
          b, dw, arena_lo, arena_hi, chip_.acc_rows,
          {[&](const Block& k) { update(true, k, R.w, R.w_m, R.w_v, R.w16, P[l - 1]); },
           [&](const Block& k) { update(false, k, R.w, R.w_m, R.w_v, R.w16, P[l - 1]); }}));
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
                       {[&](const Block& k) { update(true, k, R.b, R.b_m, R.b_v, 0, P[l]); },
                        [&](const Block& k) { update(false, k, R.b, R.b_m, R.b_v, 0, P[l]); }}));
    }
  }

  program_ = phases.finish(mxu_bound_);
}

uint64_t DenseStackStep::bound_cycles() const {
  uint64_t sum = 0;
  for (const auto& p : stats_.phases)
    sum += std::max({p.mxu_bound, p.vpu, p.hbm_bytes / kHbmBytesPerCycle});
  return sum;
}

std::vector<uint8_t> DenseStackStep::program_bytes() const {
  return isa::encode_program(program_);
}

std::vector<DenseStackStep::Write> DenseStackStep::state_image(const DenseParams& p,
                                                               const DenseOptState& s) const {
  const uint32_t N = chip_.n, L = spec_.layers.size(), Bpad = padded(batch_);
  std::vector<uint32_t> P{padded(spec_.inputs)}, D{spec_.inputs};
  for (const auto& l : spec_.layers) {
    P.push_back(padded(l.units));
    D.push_back(l.units);
  }
  auto check = [](const DenseParams& q, const std::vector<uint32_t>& d, const char* what) {
    if (q.kernel.size() != d.size() - 1 || q.bias.size() != d.size() - 1)
      throw std::invalid_argument(std::string(what) + ": " + std::to_string(q.kernel.size()) +
                                  " layers, the model has " + std::to_string(d.size() - 1));
    for (size_t l = 1; l < d.size(); ++l)
      if (q.kernel[l - 1].size() != size_t{d[l - 1]} * d[l] || q.bias[l - 1].size() != d[l])
        throw std::invalid_argument(std::string(what) + ": layer " + std::to_string(l) +
                                    " has the wrong number of values");
  };
  check(p, D, "weights");
  check(s.m, D, "first moments");
  check(s.v, D, "second moments");
  std::vector<Write> out;
  auto transposed = [&](const std::vector<float>& k, uint32_t l, bool bf16) {
    const int e = bf16 ? 2 : 4;
    std::vector<uint8_t> img(size_t{P[l]} * P[l - 1] * e, 0);
    for (uint32_t i = 0; i < D[l - 1]; ++i)
      for (uint32_t u = 0; u < D[l]; ++u) {
        const uint32_t bits = fp::bits(k[size_t{i} * D[l] + u]);
        const size_t at = (size_t{u} * P[l - 1] + i) * e;
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
  for (uint32_t l = 1; l <= L; ++l) {
    const LayerRegions& R = layout_.layers[l - 1];
    out.push_back({R.w, transposed(p.kernel[l - 1], l, false)});
    out.push_back({R.w_m, transposed(s.m.kernel[l - 1], l, false)});
    out.push_back({R.w_v, transposed(s.v.kernel[l - 1], l, false)});
    out.push_back({R.w16, transposed(p.kernel[l - 1], l, true)});
    out.push_back({R.b, vec(p.bias[l - 1], P[l])});
    out.push_back({R.b_m, vec(s.m.bias[l - 1], P[l])});
    out.push_back({R.b_v, vec(s.v.bias[l - 1], P[l])});
  }
  std::vector<uint8_t> pw(3 * N * 4);
  for (uint32_t i = 0; i < N; ++i) {
    put32(pw, i * 4, fp::bits(s.beta1_power));
    put32(pw, (N + i) * 4, fp::bits(s.beta2_power));
    put32(pw, (2 * N + i) * 4, s.steps);
  }
  out.push_back({layout_.powers, pw});
  const uint32_t Cpad = P[L], C = D[L];
  std::vector<uint8_t> cs(size_t{2} * Cpad * 4);
  for (uint32_t c = 0; c < Cpad; ++c) {
    put32(cs, c * 4, fp::bits(static_cast<float>(c)));
    put32(cs, (Cpad + c) * 4, c < C ? 0xFFFFFFFFu : 0u);
  }
  out.push_back({layout_.consts, cs});
  std::vector<uint8_t> ones(size_t{Bpad} * 2);
  for (uint32_t i = 0; i < Bpad; ++i) {
    ones[2 * i] = 0x80;  // bf16 1.0 = 0x3F80
    ones[2 * i + 1] = 0x3F;
  }
  out.push_back({layout_.ones, ones});
  return out;
}

std::vector<DenseStackStep::Write> DenseStackStep::batch_image(
    const std::vector<uint16_t>& images, const std::vector<uint8_t>& labels) const {
  const uint32_t B = batch_, Bpad = padded(B), K = spec_.inputs, P0 = padded(K);
  if (images.size() != size_t{B} * K || labels.size() != B)
    throw std::invalid_argument("batch: " + std::to_string(images.size()) + " values and " +
                                std::to_string(labels.size()) + " labels for " +
                                std::to_string(B) + " samples of " + std::to_string(K));
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
  const uint32_t L = spec_.layers.size();
  std::vector<uint32_t> P{padded(spec_.inputs)}, D{spec_.inputs};
  for (const auto& l : spec_.layers) {
    P.push_back(padded(l.units));
    D.push_back(l.units);
  }
  for (DenseParams* q : {&p, &s.m, &s.v}) {
    q->kernel.assign(L, {});
    q->bias.assign(L, {});
  }
  for (uint32_t l = 1; l <= L; ++l) {
    const LayerRegions& R = layout_.layers[l - 1];
    auto kernel = [&](uint64_t addr) {
      const auto bytes = read(ctx, addr, size_t{P[l]} * P[l - 1] * 4);
      std::vector<float> k(size_t{D[l - 1]} * D[l]);
      for (uint32_t i = 0; i < D[l - 1]; ++i)
        for (uint32_t u = 0; u < D[l]; ++u)
          k[size_t{i} * D[l] + u] = fp::f32(get32(bytes, (size_t{u} * P[l - 1] + i) * 4));
      return k;
    };
    auto bias = [&](uint64_t addr) {
      const auto bytes = read(ctx, addr, size_t{D[l]} * 4);
      std::vector<float> v(D[l]);
      for (uint32_t u = 0; u < D[l]; ++u) v[u] = fp::f32(get32(bytes, u * 4));
      return v;
    };
    p.kernel[l - 1] = kernel(R.w);
    s.m.kernel[l - 1] = kernel(R.w_m);
    s.v.kernel[l - 1] = kernel(R.w_v);
    p.bias[l - 1] = bias(R.b);
    s.m.bias[l - 1] = bias(R.b_m);
    s.v.bias[l - 1] = bias(R.b_v);
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
  uint32_t in = spec.inputs;
  for (const auto& l : spec.layers) {
    p.kernel.push_back(glorot(state, size_t{in} * l.units, in, l.units));
    p.bias.push_back(std::vector<float>(l.units, 0.0f));
    in = l.units;
  }
  return p;
}

DenseOptState zero_opt_state(const DenseStackSpec& spec) {
  DenseOptState s;
  uint32_t in = spec.inputs;
  for (const auto& l : spec.layers) {
    for (DenseParams* q : {&s.m, &s.v}) {
      q->kernel.push_back(std::vector<float>(size_t{in} * l.units, 0.0f));
      q->bias.push_back(std::vector<float>(l.units, 0.0f));
    }
    in = l.units;
  }
  return s;
}

}  // namespace tessera::compiler
