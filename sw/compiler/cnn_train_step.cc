// CnnTrainStep: lowers one training step of the example CNN to a chip program
// (tessera/compiler.h; docs/compiler.md walks through the phases below).
//
//   phase        unit work
//   setup        VPU: b1^t, b2^t, lr_t
//   conv_fwd     per (image, pooled row): DMA im2col rows -> MXU conv -> VPU bias, relu, 2x2 max
//                pool and the window position of the max -> DMA features / argmax to HBM
//   dense_fwd    MXU features x W (K tiles streamed by the DMA) -> VPU bias, softmax,
//                cross-entropy, accuracy, d logits (bf16, kept in the UB)
//   dense_dx     MXU d logits x W^T (W^T tiles: rows of the bf16 copy kept as [Cpad][features])
//                -> d features to HBM
//   dense_dw     MXU d W^T = d logits^T x features (features rows are the weight tiles, d logits^T
//                a small UB-to-UB transpose), bias grads by a row of ones -> VPU Adam on W^T and b
//                (fused: the gradient never leaves the ACC; W, m, v are kept as [classes][features]
//                so the lanes run along features), the bf16 copies in both layouts
//   conv_dw      per (image, pooled row): DMA transposed im2col rows, d features, argmax ->
//                VPU max-pool and relu backward -> MXU im2col^T x dz (row of ones: bias grad)
//                accumulated over the batch in the ACC -> VPU Adam on the kernel and bias
// Split update (data parallelism, Replication): dense_dw and conv_dw store the gradients to HBM
// (P chunks, GradShards) instead of applying Adam, then
//   reduce_scatter  the ring reduce-scatter of the gradient vector (sw/compiler/allreduce.cc),
//                   fenced: chip r ends with chunk (r + 1) mod P summed
//   update          on that chunk's tensors only: DMA gradient, W, m, v chunks -> VPU Adam ->
//                   DMA W, m, v and the bf16 copies
//   allgather       every chunk's bf16 copies and fp32 biases from its owner to every chip
// The dense kernel has one bf16 copy, W^T rows [Cpad][features]: dense_dx's weight tiles as
// they are, dense_fwd's through MXU.LDW t (the transposed tile).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "sw/compiler/lowering_util.h"
#include "sw/compiler/program_builder.h"
#include "sw/compiler/reroll.h"
#include "sw/compiler/vpu_math.h"
#include "sw/numerics/fp_ref.h"
#include "tessera/allreduce.h"
#include "tessera/compiler.h"

namespace tessera::compiler {
namespace {
using namespace lowering;

using Fn = isa::Funct;
constexpr isa::Kind kF32 = isa::Kind::kUbF32;
constexpr isa::Kind kBf16 = isa::Kind::kUbBf16;
constexpr isa::Kind kAcc = isa::Kind::kAcc;

void put32(std::vector<uint8_t>& v, size_t at, uint32_t x) {
  for (int i = 0; i < 4; ++i) v[at + i] = static_cast<uint8_t>(x >> (8 * i));
}
void put16(std::vector<uint8_t>& v, size_t at, uint16_t x) {
  v[at] = static_cast<uint8_t>(x);
  v[at + 1] = static_cast<uint8_t>(x >> 8);
}
// The image rows an item's im2col walk reads (pooled row py of image img: rows 2 py .. 2 py +
// rows_in - 1), staged in the UB as they are in HBM (full bursts). `whole`: two buffers of a
// whole image each at `stage`, an image loaded by one copy when its first item is (items are
// loaded in order), so the DMA pays one HBM round trip an image instead of one an item; else
// the item's rows into `stage`. Returns the UB address of row 2 py.
uint32_t stage_image_rows(ProgramBuilder& b, bool whole, uint32_t stage, uint64_t images,
                          uint32_t img, uint32_t py, uint32_t H, uint32_t W, uint32_t rows_in) {
  const uint64_t image = uint64_t{img} * H * W * 2;
  if (whole) {
    const uint32_t buf = stage + (img % 2) * H * W * 2;
    if (py == 0)
      copy_linear(b, isa::Space::kHbm, images + image, isa::Space::kUb, buf, uint64_t{H} * W, 2);
    return buf + 2 * py * W * 2;
  }
  copy_linear(b, isa::Space::kHbm, images + image + uint64_t{2 * py} * W * 2, isa::Space::kUb,
              stage, uint64_t{rows_in} * W, 2);
  return stage;
}

uint32_t get32(const std::vector<uint8_t>& v, size_t at) {
  return v[at] | v[at + 1] << 8 | v[at + 2] << 16 | static_cast<uint32_t>(v[at + 3]) << 24;
}

// The gradient vector's chunks (GradShards): whole groups of max(N, 16) dense columns — so
// no 32-byte word of a bf16 copy is written by two chips — with the small tensors in chunk 0,
// balanced to the smallest largest chunk.
GradShards plan_shards(uint32_t small, uint32_t classes, uint32_t features, int n, int replicas) {
  const uint32_t P = static_cast<uint32_t>(replicas);
  const uint32_t group = std::max<uint32_t>(static_cast<uint32_t>(n), 16);
  const uint32_t G = ceil_div(features, group);  // the last group may be narrower
  auto cols = [&](uint32_t groups_before) { return std::min(features, groups_before * group); };
  // chunk 0 gets g0 groups, the others share the rest (the first ones one more)
  auto split = [&](uint32_t g0) {
    std::vector<uint32_t> bounds{0, g0};
    const uint32_t rest = G - g0, others = P - 1;
    for (uint32_t k = 0; k < others; ++k)
      bounds.push_back(bounds.back() + rest / others + (k < rest % others ? 1 : 0));
    return bounds;
  };
  std::vector<uint32_t> best;
  uint64_t best_max = ~uint64_t{0};
  for (uint32_t g0 = P == 1 ? G : 0; g0 <= G; ++g0) {
    const std::vector<uint32_t> bounds = split(g0);
    uint64_t largest = 0;
    for (uint32_t k = 0; k < P; ++k)
      largest = std::max<uint64_t>(
          largest,
          (k == 0 ? small : 0) + uint64_t{classes} * (cols(bounds[k + 1]) - cols(bounds[k])));
    if (largest < best_max) {
      best_max = largest;
      best = bounds;
    }
  }
  GradShards s;
  s.small = small;
  s.chunk = ceil_div(best_max, static_cast<uint64_t>(n)) * static_cast<uint32_t>(n);
  for (uint32_t g : best) s.col.push_back(cols(g));
  return s;
}

}  // namespace

uint32_t CnnTrainStep::code_words() const {
  return (spec_.pool_w() + kCodesPerWord - 1) / kCodesPerWord;
}
uint32_t CnnTrainStep::class_pad() const { return ceil_div(spec_.classes, chip_.n) * chip_.n; }
uint32_t CnnTrainStep::tap_pad() const { return ceil_div(spec_.taps(), chip_.n) * chip_.n; }

CnnTrainStep::CnnTrainStep(const CnnSpec& spec, const AdamSpec& adam, const ChipShape& chip,
                           uint32_t batch, uint64_t hbm_base, StepKind kind,
                           const HbmLayout* share_state, const Replication& replication)
    : spec_(spec), kind_(kind), adam_(adam), chip_(chip), batch_(batch), rep_(replication) {
  const int n = chip.n;
  auto bad = [](const std::string& why) { throw std::invalid_argument(why); };
  if (n < 4 || n > 128 || (n & (n - 1))) bad("array size N must be a power of two in 4..128");
  if (batch < 1 || batch > 4096) bad("batch must be 1..4096");
  if (spec.pool != 2) bad("MaxPool2D: only pool size 2 (stride 2) is lowered");
  if (spec.kernel < 1 || spec.kernel > spec.height || spec.kernel > spec.width)
    bad("Conv2D kernel larger than the input");
  if (spec.filters % n)
    bad("Conv2D filters (" + std::to_string(spec.filters) +
        ") must be a multiple of the array size N = " + std::to_string(n));
  if (spec.pool_h() < 1 || spec.pool_w() < 1) bad("the pooled feature map is empty");
  if (ceil_div(spec.classes, n) > 3) bad("Dense: at most 3N classes");
  if (spec.taps() + 1 > chip.acc_rows || 2 * spec.conv_w() > chip.acc_rows)
    bad("the ACC is too small for one conv row pair");
  if (replication.replicas < 1 || replication.rank < 0 || replication.rank >= replication.replicas)
    bad("replication: replicas must be >= 1 and rank in 0 .. replicas - 1");
  plan_hbm(hbm_base, share_state);
  compile();
}

uint64_t CnnTrainStep::data_bytes(const CnnSpec& spec, const ChipShape& chip, uint32_t batch,
                                  const Replication& replication) {
  CnnTrainStep probe;
  probe.spec_ = spec;
  probe.chip_ = chip;
  probe.batch_ = batch;
  probe.rep_ = replication;
  probe.plan_hbm(0);
  return probe.layout_.program;
}

void CnnTrainStep::plan_hbm(uint64_t base, const HbmLayout* share) {
  const uint64_t n = chip_.n, f = spec_.filters, t = spec_.taps(), d = spec_.features();
  const uint64_t cpad = class_pad(), bpad = ceil_div(batch_, n) * n;
  uint64_t next = base;
  auto take = [&](uint64_t bytes) {
    const uint64_t at = next;
    next = base + (next - base + bytes + 255) / 256 * 256;  // relative: data_bytes() holds
    return at;
  };
  HbmLayout& l = layout_;
  l.base = base;
  l.images = take(uint64_t{batch_} * spec_.height * spec_.width * 2);
  l.labels = take(bpad * 4);
  l.conv_w = take(t * f * 4);
  l.conv_w_m = take(t * f * 4);
  l.conv_w_v = take(t * f * 4);
  l.conv_b = take(f * 4);
  l.conv_b_m = take(f * 4);
  l.conv_b_v = take(f * 4);
  l.conv_w16 = take(tap_pad() * f * 2);
  const uint64_t c = spec_.classes;
  l.dense_w = take(c * d * 4);
  l.dense_w_m = take(c * d * 4);
  l.dense_w_v = take(c * d * 4);
  l.dense_b = take(cpad * 4);
  l.dense_b_m = take(cpad * 4);
  l.dense_b_v = take(cpad * 4);
  l.dense_w16t = take(cpad * d * 2);
  l.powers = take(2 * n * 4);
  l.consts = take(2 * (cpad / n) * n * 4);
  l.features = take(uint64_t{batch_} * d * 2);
  l.argmax = take(uint64_t{batch_} * spec_.pool_h() * code_words() * spec_.filters * 4);
  l.dfeatures = take(uint64_t{batch_} * d * 2);
  l.metrics = take(2 * n * 4);
  l.probs = take(uint64_t{batch_} * cpad * 4);
  if (rep_.split() && kind_ == StepKind::kTrain) {
    shards_ = plan_shards(static_cast<uint32_t>(t * f + f + cpad), static_cast<uint32_t>(c),
                          static_cast<uint32_t>(d), chip_.n, rep_.replicas);
    l.grads_elems = uint64_t{shards_.chunk} * rep_.replicas;
    l.grads = take(l.grads_elems * 4);
  }
  l.program = next;
  if (share) {
    for (uint64_t HbmLayout::*m :
         {&HbmLayout::conv_w, &HbmLayout::conv_w_m, &HbmLayout::conv_w_v, &HbmLayout::conv_b,
          &HbmLayout::conv_b_m, &HbmLayout::conv_b_v, &HbmLayout::conv_w16, &HbmLayout::dense_w,
          &HbmLayout::dense_w_m, &HbmLayout::dense_w_v, &HbmLayout::dense_b, &HbmLayout::dense_b_m,
          &HbmLayout::dense_b_v, &HbmLayout::dense_w16t, &HbmLayout::powers, &HbmLayout::consts})
      l.*m = share->*m;
  }  // the program follows; its size is known after compile()
}

void CnnTrainStep::compile() {
  const int n = chip_.n;
  const uint32_t N = n, F = spec_.filters, Fc = F / N, K = spec_.kernel, T = spec_.taps();
  const uint32_t H = spec_.height, W = spec_.width, CW = spec_.conv_w();
  const uint32_t PH = spec_.pool_h(), PW = spec_.pool_w(), D = spec_.features();
  const uint32_t Kc = tap_pad() / N, Cpad = class_pad(), Cc = Cpad / N;
  const uint32_t B = batch_, Bpad = ceil_div(B, N) * N, Bk = Bpad / N;
  const uint32_t RW = 2 * CW;                 // conv output rows of one pooled row
  const uint32_t Rpad = ceil_div(RW, N) * N;  // ... padded to whole K tiles
  const uint32_t Dk = D / N;
  const uint32_t CWords = code_words();  // argmax code words per channel and pooled row
  // The pooled features in HBM, pooled-row-major [PH][B][PW F]: conv_fwd stores a pooled row's
  // PW F features as one contiguous run; the dense phases read feature ranges of consecutive
  // samples PW F apart (not D apart). Copies features [d_lo, d_hi) of samples s0 .. s0 + ns to
  // UB rows of `row_bytes` from `ub_base` (feature d_lo at the start of each row).
  const uint32_t PWF = PW * F;
  auto copy_features = [&](ProgramBuilder& pb, uint32_t d_lo, uint32_t d_hi, uint32_t s0,
                           uint32_t ns, uint32_t ub_base, uint32_t row_bytes) {
    for (uint32_t a = d_lo; a < d_hi;) {
      const uint32_t py = a / PWF, r = a % PWF, len = std::min(d_hi - a, PWF - r);
      pb.dma_copy(
          walk(isa::Space::kHbm, layout_.features + ((uint64_t{py} * batch_ + s0) * PWF + r) * 2,
               {{len, 2}, {ns, int32_t(PWF * 2)}}),
          walk(isa::Space::kUb, ub_base + (a - d_lo) * 2, {{len, 2}, {ns, int32_t(row_bytes)}}), 2);
      a += len;
    }
  };
  const uint32_t row2n = 2 * N, row4n = 4 * N;
  const HbmLayout& L = layout_;
  // Split update: where each gradient goes in the gradient vector (HbmLayout::grads).
  const bool split = rep_.split() && kind_ == StepKind::kTrain;
  const GradShards& S = shards_;
  const uint64_t g_conv_w = L.grads, g_conv_b = g_conv_w + uint64_t{T} * F * 4,
                 g_dense_b = g_conv_b + uint64_t{F} * 4;
  // chunk k's dense W^T columns: [classes][col[k+1] - col[k]] from here
  auto g_dense_w = [&](size_t k) {
    return L.grads + uint64_t{S.chunk} * k * 4 + (k == 0 ? uint64_t{S.small} * 4 : 0);
  };
  ProgramBuilder b(n, chip_.ub_bytes, chip_.acc_rows);
  // Per-phase statistics: the builder's counters when each phase starts.
  StepPhases phases(b, stats_);
  auto phase = [&](const char* name) { phases.begin(name); };

  // ---- global UB: powers, lr_t, metrics ----
  UbArena global(0, chip_.ub_bytes, n, "setup");
  const uint32_t ub_powers = global.take(2 * row4n);
  const uint32_t ub_lrt = global.take(row4n);
  const uint32_t ub_metrics = global.take(2 * row4n);
  const uint64_t phase_base = chip_.ub_bytes - global.free();

  // ---- setup: b1^t, b2^t, lr_t = lr * (sqrt(1 - b2^t) / (1 - b1^t)) ----
  phase("setup");
  b.vpu_li(0, 0);
  const bool train = kind_ == StepKind::kTrain;
  if (train) {
    copy_linear(b, isa::Space::kHbm, L.powers, isa::Space::kUb, ub_powers, 2 * N, 4);
    emit_adam_powers(b, adam_.lr, adam_.beta1, adam_.beta2, ub_powers, ub_lrt);
    b.signal(isa::Unit::kVpu);
    copy_linear(b, isa::Space::kUb, ub_powers, isa::Space::kHbm, L.powers, 2 * N, 4);
  }

  // ---- conv_fwd ----
  phase("conv_fwd");
  {
    UbArena a(phase_base, chip_.ub_bytes, n, "conv_fwd");
    const uint32_t w16 = a.take(uint64_t{Kc} * N * F * 2);
    const uint32_t bias = a.take(F * 4);
    const uint32_t im2col_bytes = RW * Kc * row2n, out_bytes = PW * F * 2;
    const uint32_t code_bytes = CWords * F * 4;
    // ACC regions of one pooled row (RW rows) each; a unit u = (item, column tile j) uses
    // region u % slots. The MXU runs a group of G items (every column tile of each) back to
    // back while the VPU's epilogues work through the group before it: 2 G items' regions in
    // flight, G as large as the ACC allows up to 4 (a group waits once and signals once, so its
    // tiles stream without the array's drain in between: the MXU's busy time approaches its
    // shape bound; docs/compiler.md, "MXU bursts").
    const uint32_t slots = chip_.acc_rows / RW;
    const uint32_t G = std::max<uint32_t>(1, std::min<uint32_t>(4, slots / (2 * Fc)));
    // Buffer sets: im2col buffers for the items the MXU may read (the group running, the group
    // queued) and one more the DMA fills (so a load never queues behind the store of the item
    // just before it) — 2 G + 1, fewer when the UB is small (1: no prefetch at all) — and 2
    // output buffers.
    // The image rows: two whole images where the UB holds them beside the full buffer sets,
    // else one pooled row's rows (stage_image_rows).
    int nin = static_cast<int>(2 * G + 1), nout = 2;
    const auto fits = [&](uint64_t stage_bytes) {
      return a.free() >= uint64_t(nin) * im2col_bytes + uint64_t(nout) * (out_bytes + code_bytes) +
                             stage_bytes + 64 * (2 * nin + 2 * nout + 2);
    };
    const uint32_t rows_in = 2 + K - 1;
    const bool whole = fits(2ull * H * W * 2);
    const uint64_t stage_bytes = whole ? 2ull * H * W * 2 : uint64_t{rows_in} * W * 2;
    while (nin > 1 && !fits(stage_bytes)) {
      --nin;
      nout = std::min(nout, nin);
    }
    uint32_t col[9], feat[2], code[2];
    for (int i = 0; i < nin; ++i) col[i] = a.take(im2col_bytes);
    for (int i = 0; i < nout; ++i) {
      feat[i] = a.take(out_bytes);
      code[i] = a.take(code_bytes);
    }
    // The image rows as they are in HBM (full bursts); the im2col walk then runs UB to UB
    // instead of gathering 3-element runs from HBM.
    const uint32_t stage = a.take(stage_bytes);
    copy_linear(b, isa::Space::kHbm, L.conv_w16, isa::Space::kUb, w16, uint64_t{Kc} * N * F, 2);
    copy_linear(b, isa::Space::kHbm, L.conv_b, isa::Space::kUb, bias, F, 4);
    // The im2col rows' padding taps stay zero: zero the buffers once, the DMA writes only taps.
    for (int i = 0; i < nin; ++i)
      for (uint32_t r = 0; r < RW * Kc; ++r) b.vpu_st(kBf16, 0, col[i] + r * row2n);
    b.vpu_li(14, 3);  // v14 = the code 3
    b.signal(isa::Unit::kVpu);
    const uint32_t items = B * PH;
    auto load = [&](uint32_t i) {
      const uint32_t rows =
          stage_image_rows(b, whole, stage, L.images, i / PH, i % PH, H, W, rows_in);
      b.dma_copy(ub(rows, {{K, 2}, {K, int32_t(W * 2)}, {CW, 2}, {2, int32_t(W * 2)}}),
                 ub(col[i % nin], {{K, 2},
                                   {K, int32_t(K * 2)},
                                   {CW, int32_t(Kc * row2n)},
                                   {2, int32_t(CW * Kc * row2n)}}),
                 2);
      b.signal(isa::Unit::kDma);
    };
    // Loads run nin - 1 items ahead (one buffer: none, it would overwrite the data in use).
    const uint32_t ahead = nin - 1;
    for (uint32_t k = 0; k < ahead && k < items; ++k) load(k);
    // Work units u = (item, column tile j): the MXU's convolution into ACC region u % ring, then
    // the VPU's epilogue. With two or more regions the MXU work of unit u + 1 is emitted before
    // the epilogue of unit u, so the in-order decode hands the MXU its next unit while the VPU
    // works (otherwise the VPU would wait for each unit's matmul in turn). Numerics are
    // unchanged: every ACC row gets the same operations in the same order.
    const uint32_t units = items * Fc;
    const bool pipelined = ahead > 0 && slots >= 2;
    // With room for two groups' regions the MXU gets a group of g whole items (every column
    // tile) at a time, a group ahead of the VPU: its tiles stream back to back and the array
    // fills and drains once per group instead of once per tile (the MXU waits for the VPU's
    // epilogues either way: the phase is VPU- and DMA-bound). The group's inputs are loaded
    // 2 g - 1 items ahead of the epilogue that emits it.
    uint32_t g = G;
    while (g > 1 && ahead < 2 * g - 1) --g;
    const bool by_item = pipelined && slots >= 2 * g * Fc;
    // By groups the regions form a ring of whole groups, so a group reuses the regions of a
    // group at least two before it (whose epilogues are all emitted before it).
    const uint32_t ring = by_item ? slots / (2 * g * Fc) * (2 * g * Fc) : slots;
    auto region = [&](uint32_t u) { return (u % ring) * RW; };
    // (A SIGNAL leaves the MXU's queue only once the MXU is idle — its array drained, ~2N
    // cycles — so a group signals once, after its last tile.)
    auto emit_mxu = [&](uint32_t u, bool signal = true) {
      const uint32_t j = u % Fc, buf = (u / Fc) % nin, acc0 = region(u);
      for (uint32_t kt = 0; kt < Kc; ++kt) {
        b.mxu_ldw(w16 + (kt * N * F + j * N) * 2, F * 2);
        b.mxu_mm(kt > 0, col[buf] + kt * row2n, Kc * row2n, RW, acc0);
      }
      if (signal) b.signal(isa::Unit::kMxu);
    };
    auto emit_group = [&](uint32_t first) {
      const uint32_t last = std::min(first + g, items);
      // One wait for the whole group's inputs and ACC regions, so its tiles stream back to
      // back rather than pausing for the epilogues that free its regions one by one.
      std::vector<Footprint> fp;
      for (uint32_t i = first; i < last; ++i) {
        fp.push_back({Footprint::Space::kUb, col[i % nin], col[i % nin] + im2col_bytes, false});
        for (uint32_t j = 0; j < Fc; ++j)
          fp.push_back({Footprint::Space::kAcc, region(i * Fc + j), region(i * Fc + j) + RW, true});
      }
      b.await(isa::Unit::kMxu, fp);
      for (uint32_t i = first; i < last; ++i)
        for (uint32_t j = 0; j < Fc; ++j) emit_mxu(i * Fc + j, false);
      b.signal(isa::Unit::kMxu);
    };
    auto emit_epilogue = [&](uint32_t u) {
      const uint32_t j = u % Fc, ob = (u / Fc) % nout, acc0 = region(u);
      // bias, relu, 2x2 max pool; argmax code: first window position holding the max
      // (0..3 in row-major order), 4 when the relu output is 0 (no gradient flows). The codes
      // are packed 3 bits each, 10 pooled columns to an int32 word (v9), so the backward pass
      // reads 2 words per channel instead of 13 bf16 codes: the DMA moves fewer elements.
      // The pooled columns go from the last to the first, so a word's codes are packed by one
      // shift-or a column (code | word << 3: the word's first column lands in bits 2:0): the
      // per-column sequence is the same for the columns of a word but the stepped addresses (a
      // word's first shifts in v0, its last stores), and loop compression folds it.
      b.vpu_ld(kF32, 7, bias + j * row4n);
      for (uint32_t px = PW; px-- > 0;) {
        const uint32_t r0 = acc0 + 2 * px, r1 = acc0 + CW + 2 * px;
        b.vpu_ld(kAcc, 1, r0);
        b.vpu_ld(kAcc, 2, r0 + 1);
        b.vpu_ld(kAcc, 3, r1);
        b.vpu_ld(kAcc, 4, r1 + 1);
        b.vpu_op(Fn::kMax, 5, 1, 2);
        b.vpu_op(Fn::kMax, 6, 3, 4);
        b.vpu_op(Fn::kMax, 5, 5, 6);
        b.vpu_op(Fn::kAdd, 6, 5, 7);
        b.vpu_op(Fn::kMax, 6, 6, 0);
        b.vpu_st(kBf16, 6, feat[ob] + (px * F + j * N) * 2);
        // code = x2 == max ? 2 : 3, then x1 == max ? 1 : code, x0 == max ? 0 : code (selne:
        // va = vb ? imm : vc), then 0 < relu ? code : 4 (sellt: va < vb ? vc : imm)
        b.vpu_op(Fn::kSelNe, 11, 3, 5, 14, 2);  // v14 = 3
        b.vpu_op(Fn::kSelNe, 11, 2, 5, 11, 1);
        b.vpu_op(Fn::kSelNe, 11, 1, 5, 11, 0);
        b.vpu_op(Fn::kSelLt, 11, 0, 6, 11, 4);
        const uint32_t slot = px % kCodesPerWord, word = px / kCodesPerWord;
        const bool word_last = slot == kCodesPerWord - 1 || px + 1 == PW;  // its first here
        b.vpu_op(Fn::kShlOr, 9, 11, word_last ? 0 : 9, 0, 3);              // v9 = code | v9 << 3
        if (slot == 0) b.vpu_st(kF32, 9, code[ob] + (word * F + j * N) * 4);
      }
    };
    if (by_item && items > 0)
      emit_group(0);
    else if (pipelined && units > 0)
      emit_mxu(0);
    for (uint32_t i = 0; i < items; ++i) {
      const uint32_t img = i / PH, py = i % PH, ob = i % nout;
      if (ahead == 0)
        load(i);
      else if (i + ahead < items)
        load(i + ahead);
      if (by_item && i % g == 0 && i + g < items)  // (loaded `ahead` >= 2 g - 1 items earlier)
        emit_group(i + g);
      for (uint32_t j = 0; j < Fc; ++j) {
        const uint32_t u = i * Fc + j;
        if (!pipelined)
          emit_mxu(u);
        else if (!by_item && u + 1 < units)
          emit_mxu(u + 1);  // (its item's inputs were loaded `ahead` >= 1 items earlier)
        emit_epilogue(u);
      }
      b.signal(isa::Unit::kVpu);
      const uint64_t at = (uint64_t{py} * B + img) * PWF * 2;  // pooled-row-major
      copy_linear(b, isa::Space::kUb, feat[ob], isa::Space::kHbm, L.features + at, PWF, 2);
      copy_linear(b, isa::Space::kUb, code[ob], isa::Space::kHbm,
                  L.argmax + (uint64_t{img} * PH + py) * CWords * F * 4, CWords * F, 4);
    }
  }

  // ---- dense phases: the d logits, labels, class constants and dense bias stay in the UB ----
  UbArena dense(phase_base, chip_.ub_bytes, n, "dense");
  const uint32_t dlog = dense.take(uint64_t{Bpad} * Cpad * 2);
  const uint32_t labels = dense.take(Bpad * 4);
  const uint32_t consts = dense.take(2 * Cc * row4n);
  const uint32_t db = dense.take(Cpad * 4), db_m = dense.take(Cpad * 4),
                 db_v = dense.take(Cpad * 4);
  const uint32_t ones = dense.take(row2n);
  const uint64_t dense_base = chip_.ub_bytes - dense.free();

  phase("dense_fwd");
  {
    copy_linear(b, isa::Space::kHbm, L.labels, isa::Space::kUb, labels, Bpad, 4);
    copy_linear(b, isa::Space::kHbm, L.consts, isa::Space::kUb, consts, 2 * Cc * N, 4);
    copy_linear(b, isa::Space::kHbm, L.dense_b, isa::Space::kUb, db, Cpad, 4);
    if (train && !split) {  // the fused Adam in dense_dw updates the bias in the UB
      copy_linear(b, isa::Space::kHbm, L.dense_b_m, isa::Space::kUb, db_m, Cpad, 4);
      copy_linear(b, isa::Space::kHbm, L.dense_b_v, isa::Space::kUb, db_v, Cpad, 4);
    }
    b.signal(isa::Unit::kDma);
    for (uint32_t r = B; r < Bpad; ++r)  // the padding samples' d logits are zero
      for (uint32_t c = 0; c < Cc; ++c) b.vpu_st(kBf16, 0, dlog + (r * Cpad + c * N) * 2);
    b.vpu_lif(1, 1.0f);
    b.vpu_st(kBf16, 1, ones);
    b.vpu_li(1, 0);  // loss sum
    b.vpu_li(2, 0);  // correct count
    UbArena a(dense_base, chip_.ub_bytes, n, "dense_fwd");
    const uint32_t SB = std::min(B, chip_.acc_rows / Cc);
    // K tiles per DMA group: as many as fit double-buffered.
    const uint64_t per_tile = uint64_t{SB} * row2n + uint64_t{N} * Cpad * 2;
    const uint32_t G =
        static_cast<uint32_t>(std::min<uint64_t>(Dk, a.free() / (2 * per_tile + 256)));
    if (G < 1) a.take(2 * per_tile + a.free() + 1);  // throws: does not fit
    uint32_t fbuf[2], wbuf[2];
    for (int i = 0; i < 2; ++i) {
      fbuf[i] = a.take(uint64_t{SB} * G * row2n);
      wbuf[i] = a.take(uint64_t{G} * N * Cpad * 2);
    }
    const uint32_t groups = ceil_div(Dk, G);
    const uint32_t probs = train ? 0 : a.take(2ull * Cpad * 4);  // evaluate: two sample rows
    for (uint32_t s0 = 0; s0 < B; s0 += SB) {
      const uint32_t sb = std::min(SB, B - s0);
      auto load = [&](uint32_t g) {
        const uint32_t k0 = g * G, gk = std::min(G, Dk - k0);
        copy_features(b, k0 * N, (k0 + gk) * N, s0, sb, fbuf[g % 2], G * row2n);
        // W^T rows [Cpad][features k0 .. k0 + gk N) (contiguous runs); MXU.LDW t transposes
        b.dma_copy(hbm(L.dense_w16t + uint64_t{k0} * N * 2, {{gk * N, 2}, {Cpad, int32_t(D * 2)}}),
                   ub(wbuf[g % 2], {{gk * N, 2}, {Cpad, int32_t(G * N * 2)}}), 2);
        b.signal(isa::Unit::kDma);
      };
      load(0);
      for (uint32_t g = 0; g < groups; ++g) {
        if (g + 1 < groups) load(g + 1);
        const uint32_t k0 = g * G, gk = std::min(G, Dk - k0);
        for (uint32_t kt = 0; kt < gk; ++kt)
          for (uint32_t ct = 0; ct < Cc; ++ct) {
            // W[k0 + kt N + k][ct N + n] = element k of W^T row ct N + n
            b.mxu_ldw(wbuf[g % 2] + (ct * N * G * N + kt * N) * 2, G * N * 2, true);
            b.mxu_mm(k0 + kt > 0, fbuf[g % 2] + kt * row2n, G * row2n, sb, ct * SB);
          }
        b.signal(isa::Unit::kMxu);
      }
      // softmax, cross-entropy, accuracy and d logits = (softmax - onehot) / B per sample
      for (uint32_t t = 0; t < sb; ++t) {
        const uint32_t smp = s0 + t;
        for (uint32_t c = 0; c < Cc; ++c) {
          const int z = 3 + c;
          b.vpu_ld(kAcc, z, c * SB + t);
          b.vpu_ld(kF32, 10, db + c * row4n);
          b.vpu_op(Fn::kAdd, z, z, 10);
          b.vpu_ld(kF32, 11, consts + (Cc + c) * row4n);  // valid-class mask
          b.vpu_lif(12, -INFINITY);
          b.vpu_op(Fn::kSel, z, z, 12, 11);
        }
        if (Cc == 1) {
          b.vpu_op(Fn::kRMax, 6, 3);
        } else {
          b.vpu_op(Fn::kMax, 6, 3, 4);
          if (Cc == 3) b.vpu_op(Fn::kMax, 6, 6, 5);
          b.vpu_op(Fn::kRMax, 6, 6);
        }
        for (uint32_t c = 0; c < Cc; ++c) {
          const int z = 3 + c, e = 7 + c;
          b.vpu_op(Fn::kSub, z, z, 6);
          emit_exp(b, e, z, 10, 11, 12, 13);
          b.vpu_ld(kF32, 11, consts + (Cc + c) * row4n);
          b.vpu_op(Fn::kSel, e, e, 0, 11);
        }
        if (Cc == 1) {
          b.vpu_op(Fn::kRSum, 6, 7);
        } else {
          b.vpu_op(Fn::kAdd, 10, 7, 8);
          if (Cc == 3) b.vpu_op(Fn::kAdd, 10, 10, 9);
          b.vpu_op(Fn::kRSum, 6, 10);
        }
        b.vpu_ld(kF32, 10, labels + (smp / N) * row4n);
        b.vpu_op(Fn::kBcast, 10, 10, 0, 0, smp % N);
        for (uint32_t c = 0; c < Cc; ++c) {
          const int z = 3 + c, e = 7 + c;
          b.vpu_ld(kF32, 11, consts + c * row4n);  // class index of each lane
          b.vpu_op(Fn::kCmpEq, 11, 10, 11);        // one-hot mask
          b.vpu_op(Fn::kSel, 12, z, 0, 11);
          if (c == 0)
            b.vpu_op(Fn::kIOr, 13, 12, 0);
          else
            b.vpu_op(Fn::kAdd, 13, 13, 12);
          b.vpu_op(Fn::kDiv, 14, e, 6);
          if (!train) b.vpu_st(kF32, 14, probs + ((smp % 2) * Cpad + c * N) * 4);
          b.vpu_lif(15, 1.0f);
          b.vpu_op(Fn::kSel, 15, 15, 0, 11);
          b.vpu_op(Fn::kSub, 14, 14, 15);
          // 1 / global batch: the replicas' gradients add up to the global batch's
          b.vpu_lif(15, 1.0f / static_cast<float>(uint64_t{B} * rep_.replicas));
          b.vpu_op(Fn::kMul, 14, 14, 15);
          b.vpu_st(kBf16, 14, dlog + (smp * Cpad + c * N) * 2);
        }
        b.vpu_op(Fn::kRSum, 13, 13);  // z_label - max
        emit_log(b, 14, 6, 7, 8, 9, 11, 12);
        b.vpu_op(Fn::kSub, 14, 14, 13);  // loss = ln(sum e) - (z_label - max)
        b.vpu_op(Fn::kAdd, 1, 1, 14);
        b.vpu_op(Fn::kCmpEq, 14, 13, 0);  // the label's logit is the largest
        b.vpu_lif(15, 1.0f);
        b.vpu_op(Fn::kSel, 14, 15, 0, 14);
        b.vpu_op(Fn::kAdd, 2, 2, 14);
        if (!train) {
          b.signal(isa::Unit::kVpu);
          copy_linear(b, isa::Space::kUb, probs + (smp % 2) * Cpad * 4, isa::Space::kHbm,
                      L.probs + uint64_t{smp} * Cpad * 4, Cpad, 4);
        }
      }
      b.signal(isa::Unit::kVpu);
    }
    b.vpu_lif(15, static_cast<float>(B));
    b.vpu_op(Fn::kDiv, 1, 1, 15);
    b.vpu_st(kF32, 1, ub_metrics);
    b.vpu_st(kF32, 2, ub_metrics + row4n);
    b.signal(isa::Unit::kVpu);
    copy_linear(b, isa::Space::kUb, ub_metrics, isa::Space::kHbm, L.metrics, 2 * N, 4);
  }

  if (train) {
    // ---- dense_dx: d features = d logits x W^T ----
    phase("dense_dx");
    {
      UbArena a(dense_base, chip_.ub_bytes, n, "dense_dx");
      const uint32_t SB = std::min(B, chip_.acc_rows / 2);
      const uint32_t slots = chip_.acc_rows / SB;
      // Per K tile: two W^T buffers (rows of the [Cpad][features] bf16 copy: contiguous runs),
      // two d-features buffers. A group of G K tiles is one W^T load and one d-features store
      // (G as large as the UB allows: the phase is DMA-bound, and longer runs move faster).
      const uint64_t per_tile = 2 * uint64_t{Cpad} * row2n + 2 * uint64_t{SB} * row2n;
      const uint32_t G = static_cast<uint32_t>(std::min<uint64_t>(Dk, a.free() / (per_tile + 256)));
      if (G < 1) a.take(a.free() + 1);
      uint32_t wt[2], dp[2];
      for (int i = 0; i < 2; ++i) {
        wt[i] = a.take(uint64_t{Cpad} * G * row2n);
        dp[i] = a.take(uint64_t{SB} * G * row2n);
      }
      const uint32_t GN = G * N, groups = ceil_div(Dk, G);
      // The MXU works in bursts of Q K tiles (one ACC region each) with one SIGNAL a burst (a
      // SIGNAL waits for the array to drain), a burst ahead of the VPU's copies: 2 Q regions.
      const uint32_t Q = std::max<uint32_t>(1, std::min(G, slots / 2));
      struct Burst {
        uint32_t g, dt0, dt1;
      };
      std::vector<Burst> bursts;
      for (uint32_t g = 0; g < groups; ++g) {
        const uint32_t gk = std::min(G, Dk - g * G);
        for (uint32_t d = 0; d < gk; d += Q) bursts.push_back({g, d, std::min(gk, d + Q)});
      }
      uint32_t slot_counter = 0;
      for (uint32_t s0 = 0; s0 < B; s0 += SB) {
        const uint32_t sb = std::min(SB, B - s0);
        auto load = [&](uint32_t g) {
          const uint32_t gn = std::min(G, Dk - g * G) * N;
          b.dma_copy(hbm(L.dense_w16t + uint64_t{g} * GN * 2, {{gn, 2}, {Cpad, int32_t(D * 2)}}),
                     ub(wt[g % 2], {{gn, 2}, {Cpad, int32_t(GN * 2)}}), 2);
          b.signal(isa::Unit::kDma);
        };
        std::vector<std::vector<uint32_t>> acc0(bursts.size());
        auto emit_mxu = [&](size_t k) {
          const Burst& u = bursts[k];
          std::vector<Footprint> fp{
              {Footprint::Space::kUb, wt[u.g % 2], wt[u.g % 2] + uint64_t{Cpad} * GN * 2, false}};
          for (uint32_t dt = u.dt0; dt < u.dt1; ++dt) {
            acc0[k].push_back((slot_counter++ % slots) * SB);
            fp.push_back({Footprint::Space::kAcc, acc0[k].back(), acc0[k].back() + sb, true});
          }
          b.await(isa::Unit::kMxu, fp);  // one wait: the burst's tiles stream back to back
          for (uint32_t dt = u.dt0; dt < u.dt1; ++dt)
            for (uint32_t ct = 0; ct < Cc; ++ct) {
              b.mxu_ldw(wt[u.g % 2] + (ct * N * GN + dt * N) * 2, GN * 2);
              b.mxu_mm(ct > 0, dlog + (s0 * Cpad + ct * N) * 2, Cpad * 2, sb, acc0[k][dt - u.dt0]);
            }
          b.signal(isa::Unit::kMxu);
        };
        load(0);
        if (groups > 1) load(1);
        emit_mxu(0);
        for (size_t k = 0; k < bursts.size(); ++k) {
          const Burst& u = bursts[k];
          // The next group's W^T goes into the buffer of the group before this one, whose
          // bursts were all emitted before.
          if (u.dt0 == 0 && u.g >= 1 && u.g + 1 < groups) load(u.g + 1);
          if (k + 1 < bursts.size()) emit_mxu(k + 1);  // (its W^T is loaded: one group ahead)
          for (uint32_t dt = u.dt0; dt < u.dt1; ++dt)
            for (uint32_t t = 0; t < sb; ++t) {
              b.vpu_ld(kAcc, 1, acc0[k][dt - u.dt0] + t);
              b.vpu_st(kBf16, 1, dp[u.g % 2] + (t * GN + dt * N) * 2);
            }
          if (u.dt1 < std::min(G, Dk - u.g * G)) continue;
          const uint32_t gn = std::min(G, Dk - u.g * G) * N;
          b.signal(isa::Unit::kVpu);
          b.dma_copy(ub(dp[u.g % 2], {{gn, 2}, {sb, int32_t(GN * 2)}}),
                     hbm(L.dfeatures + (uint64_t{s0} * D + uint64_t{u.g} * GN) * 2,
                         {{gn, 2}, {sb, int32_t(D * 2)}}),
                     2);
        }
      }
    }

    // ---- dense_dw: d W = features^T x d logits, d b = ones x d logits; Adam ----
    phase("dense_dw");
    {
      const AdamRegs ar;
      emit_adam_constants(b, ar, adam_.beta1, adam_.beta2, adam_.epsilon, ub_lrt);
      UbArena a(dense_base, chip_.ub_bytes, n, "dense_dw");
      const uint32_t C = spec_.classes;
      const uint32_t bias_row = 0;  // Cc ACC rows for the bias gradient
      // d logits^T [Cpad][Bpad]: the activation rows of d W^T = d logits^T x features. Rows of
      // padding samples are zero in d logits, so their columns here are too.
      const uint32_t dlogt = a.take(uint64_t{Cpad} * Bpad * 2);
      b.dma_copy(ub(dlog, {{Bpad, int32_t(Cpad * 2)}, {Cpad, 2}}),
                 ub(dlogt, {{Bpad, 2}, {Cpad, int32_t(Bpad * 2)}}), 2);
      b.signal(isa::Unit::kDma);
      // Chunks of DR features (DRt tiles of N): the ACC holds two chunks of DRt x C rows after
      // the bias rows; the UB two chunks' features columns [Bpad][DR] (the weight tiles), W^T,
      // m^T, v^T [C][DR] and the bf16 copy of W^T.
      const uint64_t per_col = uint64_t{Bpad} * 2 + uint64_t{C} * (3 * 4 + 2);
      const uint64_t drt = std::min<uint64_t>(
          {uint64_t{Dk}, (chip_.acc_rows - Cc) / (2 * C), a.free() / (2 * per_col * N + 512)});
      if (drt < 1) a.take(a.free() + 1);
      const uint32_t DRt = static_cast<uint32_t>(drt), DR = DRt * N;
      uint32_t fw[2], w[2], m[2], v[2], w16[2];
      for (int i = 0; i < 2; ++i) {
        fw[i] = a.take(uint64_t{Bpad} * DR * 2);
        w[i] = a.take(uint64_t{C} * DR * 4);
        m[i] = a.take(uint64_t{C} * DR * 4);
        v[i] = a.take(uint64_t{C} * DR * 4);
        w16[i] = a.take(uint64_t{C} * DR * 2);
      }
      // feature rows of padding samples: zero once (the DMA writes only real samples)
      for (int i = 0; i < 2; ++i)
        for (uint32_t r = B; r < Bpad; ++r)
          for (uint32_t j = 0; j < DRt; ++j) b.vpu_st(kBf16, 0, fw[i] + (r * DR + j * N) * 2);
      // bias gradient and its Adam step
      for (uint32_t kt = 0; kt < Bk; ++kt)
        for (uint32_t ct = 0; ct < Cc; ++ct) {
          b.mxu_ldw(dlog + (kt * N * Cpad + ct * N) * 2, Cpad * 2);
          b.mxu_mm(kt > 0, ones, row2n, 1, bias_row + ct);
        }
      b.signal(isa::Unit::kMxu);
      if (split) {  // the gradient to HBM (db is free: the forward pass has used the bias)
        for (uint32_t ct = 0; ct < Cc; ++ct) {
          b.vpu_ld(kAcc, ar.g, bias_row + ct);
          b.vpu_st(kF32, ar.g, db + ct * row4n);
        }
        b.signal(isa::Unit::kVpu);
        copy_linear(b, isa::Space::kUb, db, isa::Space::kHbm, g_dense_b, Cpad, 4);
      } else {
        for (uint32_t ct = 0; ct < Cc; ++ct) {
          b.vpu_ld(kAcc, ar.g, bias_row + ct);
          b.vpu_ld(kF32, ar.w, db + ct * row4n);
          b.vpu_ld(kF32, ar.m, db_m + ct * row4n);
          b.vpu_ld(kF32, ar.v, db_v + ct * row4n);
          emit_adam_update(b, ar);
          b.vpu_st(kF32, ar.w, db + ct * row4n);
          b.vpu_st(kF32, ar.m, db_m + ct * row4n);
          b.vpu_st(kF32, ar.v, db_v + ct * row4n);
        }
        b.signal(isa::Unit::kVpu);
        copy_linear(b, isa::Space::kUb, db, isa::Space::kHbm, L.dense_b, Cpad, 4);
        copy_linear(b, isa::Space::kUb, db_m, isa::Space::kHbm, L.dense_b_m, Cpad, 4);
        copy_linear(b, isa::Space::kUb, db_v, isa::Space::kHbm, L.dense_b_v, Cpad, 4);
      }
      const uint32_t chunks = ceil_div(D, DR);
      // W^T-shaped tensors: C rows of D in HBM, C rows of DR in the UB.
      auto rows_hbm = [&](uint64_t base, uint32_t d0, uint32_t dr, int e) {
        return hbm(base + uint64_t{d0} * e, {{dr, e}, {C, int32_t(D * e)}});
      };
      auto rows_ub = [&](uint32_t base, uint32_t dr, int e) {
        return ub(base, {{dr, e}, {C, int32_t(DR * e)}});
      };
      auto load = [&](uint32_t q) {
        const uint32_t d0 = q * DR, dr_q = std::min(DR, D - d0), i = q % 2;
        copy_features(b, d0, d0 + dr_q, 0, B, fw[i], DR * 2);
        if (split) {  // only the features: the gradient goes to HBM, Adam comes later
          b.signal(isa::Unit::kDma);
          return;
        }
        b.dma_copy(rows_hbm(L.dense_w, d0, dr_q, 4), rows_ub(w[i], dr_q, 4), 4);
        b.dma_copy(rows_hbm(L.dense_w_m, d0, dr_q, 4), rows_ub(m[i], dr_q, 4), 4);
        b.dma_copy(rows_hbm(L.dense_w_v, d0, dr_q, 4), rows_ub(v[i], dr_q, 4), 4);
        b.signal(isa::Unit::kDma);
      };
      load(0);
      for (uint32_t q = 0; q < chunks; ++q) {
        if (q + 1 < chunks) load(q + 1);
        const uint32_t d0 = q * DR, dr_q = std::min(DR, D - d0), i = q % 2, tq = dr_q / N;
        const uint32_t acc0 = Cc + i * DRt * C;
        // d W^T[c][tile j] = sum over sample tiles of d logits^T[c][kt] x features[kt][tile j]
        for (uint32_t j = 0; j < tq; ++j)
          for (uint32_t kt = 0; kt < Bk; ++kt) {
            b.mxu_ldw(fw[i] + (kt * N * DR + j * N) * 2, DR * 2);
            b.mxu_mm(kt > 0, dlogt + kt * row2n, Bpad * 2, C, acc0 + j * C);
          }
        b.signal(isa::Unit::kMxu);
        if (split) {  // d W^T rows to the gradient vector, through w[i]
          for (uint32_t j = 0; j < tq; ++j)
            for (uint32_t c = 0; c < C; ++c) {
              b.vpu_ld(kAcc, ar.g, acc0 + j * C + c);
              b.vpu_st(kF32, ar.g, w[i] + (c * DR + j * N) * 4);
            }
          b.signal(isa::Unit::kVpu);
          // columns [d0, d0 + dr_q) into the chunks holding them
          for (size_t k = 0; k + 1 < S.col.size(); ++k) {
            const uint32_t c0 = std::max(d0, S.col[k]), c1 = std::min(d0 + dr_q, S.col[k + 1]);
            if (c0 >= c1) continue;
            const int32_t pitch = int32_t(S.col[k + 1] - S.col[k]) * 4;
            b.dma_copy(ub(w[i] + (c0 - d0) * 4, {{c1 - c0, 4}, {C, int32_t(DR * 4)}}),
                       hbm(g_dense_w(k) + uint64_t{c0 - S.col[k]} * 4, {{c1 - c0, 4}, {C, pitch}}),
                       4);
          }
          continue;
        }
        for (uint32_t j = 0; j < tq; ++j)
          for (uint32_t c = 0; c < C; ++c) {
            const uint32_t off = c * DR + j * N;
            b.vpu_ld(kAcc, ar.g, acc0 + j * C + c);
            b.vpu_ld(kF32, ar.w, w[i] + off * 4);
            b.vpu_ld(kF32, ar.m, m[i] + off * 4);
            b.vpu_ld(kF32, ar.v, v[i] + off * 4);
            emit_adam_update(b, ar);
            b.vpu_st(kF32, ar.w, w[i] + off * 4);
            b.vpu_st(kF32, ar.m, m[i] + off * 4);
            b.vpu_st(kF32, ar.v, v[i] + off * 4);
            b.vpu_st(kBf16, ar.w, w16[i] + off * 2);
          }
        b.signal(isa::Unit::kVpu);
        b.dma_copy(rows_ub(w[i], dr_q, 4), rows_hbm(L.dense_w, d0, dr_q, 4), 4);
        b.dma_copy(rows_ub(m[i], dr_q, 4), rows_hbm(L.dense_w_m, d0, dr_q, 4), 4);
        b.dma_copy(rows_ub(v[i], dr_q, 4), rows_hbm(L.dense_w_v, d0, dr_q, 4), 4);
        // the bf16 copy, [Cpad][D] rows: dense_dx's weight tiles, and dense_fwd's transposed
        // (MXU.LDW t); the padding rows keep the zeros the host wrote
        b.dma_copy(rows_ub(w16[i], dr_q, 2), rows_hbm(L.dense_w16t, d0, dr_q, 2), 2);
      }
    }

    // ---- conv_dw: max-pool and relu backward, d kernel = im2col^T x dz, Adam ----
    phase("conv_dw");
    {
      UbArena a(phase_base, chip_.ub_bytes, n, "conv_dw");
      const uint32_t at_bytes = (T + 1) * Rpad * 2, row_bytes = PW * F * 2, dz_bytes = Rpad * F * 2;
      const uint32_t code_bytes = CWords * F * 4;
      // The MXU takes the items' dz in groups of P (one SIGNAL a group: a SIGNAL waits for the
      // array to drain, so each group's tiles stream back to back), emitted `lag` = 1 item
      // after the group's last dz, so that its WAIT is met when the decoder reaches it (else
      // the group's 32+ instructions fill the MXU's queue and hold the decoder while the VPU
      // starves). In flight: the group the MXU runs, the dz the lag holds back and the next
      // group the VPU routes: 2 P + 2 dz buffers. Input sets (im2col^T, d features, argmax
      // codes): P + 4, so the DMA loads 3 items ahead, as far as the groups allow (below).
      // P = 2 where the UB holds that, else one item at a time as the MXU's work follows each
      // dz (lag 0) with up to 3 input sets and 2 dz buffers (fewer when the UB is small).
      const uint64_t in_bytes = uint64_t{at_bytes} + row_bytes + code_bytes;
      // The image rows: two whole images where the UB holds them beside P = 2's buffers, else
      // one pooled row's rows (stage_image_rows).
      const uint32_t rows_in = 2 + K - 1;
      uint64_t stage_bytes = 2ull * H * W * 2;
      auto fits = [&](int sets, int dzs) {
        return a.free() >= uint64_t(sets) * in_bytes + uint64_t(dzs) * dz_bytes + stage_bytes +
                               64 * (3 * sets + dzs + 2);
      };
      uint32_t P = 2, lag = 1;
      int nin = 6, ndz = 6;
      const bool whole = fits(nin, ndz);
      if (!whole) stage_bytes = uint64_t{rows_in} * W * 2;
      if (!fits(nin, ndz)) {
        P = 1;
        lag = 0;
        nin = 3;
        ndz = 2;
      }
      while (nin > 1 && !fits(nin, ndz)) {
        --nin;
        ndz = std::min(ndz, nin);
      }
      uint32_t at[6], dp[6], code[6], dz[6];
      for (int i = 0; i < nin; ++i) at[i] = a.take(at_bytes);
      // d features and codes: one block each, the sets back to back (`load` fills two at once)
      const uint32_t dp0 = a.take(uint64_t(nin) * row_bytes);
      const uint32_t code0 = a.take(uint64_t(nin) * code_bytes);
      for (int i = 0; i < nin; ++i) {
        dp[i] = dp0 + i * row_bytes;
        code[i] = code0 + i * code_bytes;
      }
      for (int i = 0; i < ndz; ++i) dz[i] = a.take(dz_bytes);
      const uint32_t stage = a.take(stage_bytes);
      // The kernel's Adam state reuses the same UB after each group's gradient pass (the builder
      // orders the reuse): loaded, updated for the group's columns and written back per group.
      UbArena opt(phase_base, chip_.ub_bytes, n, "conv_dw Adam");
      const uint32_t cw = opt.take(T * F * 4), cw_m = opt.take(T * F * 4),
                     cw_v = opt.take(T * F * 4);
      const uint32_t cb = opt.take(F * 4), cb_m = opt.take(F * 4), cb_v = opt.take(F * 4);
      const uint32_t cw16 = opt.take(T * F * 2);
      struct Tensor32 {
        uint64_t hbm;
        uint32_t ub, count;
      };
      const Tensor32 state[] = {{L.conv_w, cw, T * F},     {L.conv_w_m, cw_m, T * F},
                                {L.conv_w_v, cw_v, T * F}, {L.conv_b, cb, F},
                                {L.conv_b_m, cb_m, F},     {L.conv_b_v, cb_v, F}};
      const uint32_t jg = std::min(Fc, chip_.acc_rows / (T + 1));
      const uint32_t items = B * PH;
      for (uint32_t j0 = 0; j0 < Fc; j0 += jg) {
        const uint32_t j1 = std::min(Fc, j0 + jg);
        // im2col^T: T tap rows + a row of ones (the bias gradient), padding positions zero;
        // dz padding rows zero. Per group: the Adam state of the group before overwrote them.
        b.vpu_lif(8, 1.0f);
        for (int i = 0; i < nin; ++i) {
          for (uint32_t r = 0; r < T; ++r)
            for (uint32_t c = 0; c < Rpad / N; ++c)
              b.vpu_st(kBf16, 0, at[i] + (r * Rpad + c * N) * 2);
          for (uint32_t c = 0; c < Rpad / N; ++c)
            b.vpu_st(kBf16, 8, at[i] + (T * Rpad + c * N) * 2);
        }
        for (int i = 0; i < ndz; ++i)
          for (uint32_t r = RW; r < Rpad; ++r)
            for (uint32_t j = 0; j < Fc; ++j) b.vpu_st(kBf16, 0, dz[i] + (r * F + j * N) * 2);
        for (uint32_t k = 1; k <= 3; ++k) b.vpu_li(k, k);  // v0..v3: the window codes 0..3
        b.signal(isa::Unit::kVpu);
        // Loads run nin - P - lag items ahead (one set: none, it would overwrite the data in
        // use): the set a load overwrites is that of an item whose MXU group is already emitted
        // (in program order the load comes after the group's reads, so it waits for them).
        const uint32_t ahead = nin - P - lag;
        // A pair's two items are consecutive in HBM and, with an even number of sets, in the
        // UB; the successor's set must be free when the pair loads: at most nin - 2 ahead.
        const bool pairs = nin % 2 == 0 && static_cast<int>(ahead) + 2 <= nin;
        auto load = [&](uint32_t i) {
          const uint32_t img = i / PH, py = i % PH, buf = i % nin;
          const uint32_t rows = stage_image_rows(b, whole, stage, L.images, img, py, H, W, rows_in);
          b.dma_copy(ub(rows, {{CW, 2}, {2, int32_t(W * 2)}, {K, 2}, {K, int32_t(W * 2)}}),
                     ub(at[buf], {{CW, 2},
                                  {2, int32_t(CW * 2)},
                                  {K, int32_t(Rpad * 2)},
                                  {K, int32_t(K * Rpad * 2)}}),
                     2);
          // d features and codes: an even item with its odd successor of the same image in one
          // copy each (`pairs`, below), which halves the HBM round trips the single DMA engine
          // waits for.
          const bool pair_first = pairs && i % 2 == 0 && i + 1 < items && py + 1 < PH;
          const bool pair_second = pairs && i % 2 == 1 && py > 0;
          if (!pair_second) {
            const uint32_t k = pair_first ? 2 : 1;
            const uint64_t off = (uint64_t{img} * D + uint64_t{py} * PW * F) * 2;
            copy_linear(b, isa::Space::kHbm, L.dfeatures + off, isa::Space::kUb, dp[buf],
                        k * PW * F, 2);
            copy_linear(b, isa::Space::kHbm, L.argmax + (uint64_t{img} * PH + py) * CWords * F * 4,
                        isa::Space::kUb, code[buf], k * CWords * F, 4);
          }
          b.signal(isa::Unit::kDma);
        };
        for (uint32_t k = 0; k < ahead && k < items; ++k) load(k);
        // The MXU's group: items first .. last - 1, waiting once for all of their inputs.
        uint32_t next_group = 0;
        auto emit_group = [&](uint32_t first, uint32_t last) {
          std::vector<Footprint> fp{{Footprint::Space::kAcc, 0, uint64_t{j1 - j0} * (T + 1), true}};
          for (uint32_t k = first; k < last; ++k) {
            fp.push_back({Footprint::Space::kUb, dz[k % ndz], dz[k % ndz] + dz_bytes, false});
            fp.push_back({Footprint::Space::kUb, at[k % nin], at[k % nin] + at_bytes, false});
          }
          b.await(isa::Unit::kMxu, fp);
          for (uint32_t k = first; k < last; ++k)
            for (uint32_t j = j0; j < j1; ++j) {
              for (uint32_t c = 0; c < Rpad / N; ++c) {
                b.mxu_ldw(dz[k % ndz] + (c * N * F + j * N) * 2, F * 2);
                b.mxu_mm(k > 0 || c > 0, at[k % nin] + c * row2n, Rpad * 2, T + 1,
                         (j - j0) * (T + 1));
              }
            }
          b.signal(isa::Unit::kMxu);
        };
        for (uint32_t i = 0; i < items; ++i) {
          const uint32_t buf = i % nin, zb = i % ndz;
          if (ahead == 0)
            load(i);
          else if (i + ahead < items)
            load(i + ahead);
          for (uint32_t j = j0; j < j1; ++j)
            for (uint32_t px = 0; px < PW; ++px) {
              b.vpu_ld(kBf16, 4, dp[buf] + (px * F + j * N) * 2);
              const uint32_t slot = px % kCodesPerWord, word = px / kCodesPerWord;
              if (slot == 0) b.vpu_ld(kF32, 9, code[buf] + (word * F + j * N) * 4);
              // the code: the word's low 3 bits (an int; seleq compares it exactly), then the
              // word shifted to the next column's (v3 = 3)
              b.vpu_op(Fn::kBfx, 5, 9, 0, 0, (3 - 1) << 5);  // shift 0, width 3
              b.vpu_op(Fn::kShr, 9, 9, 3);
              for (uint32_t pos = 0; pos < 4; ++pos) {
                const uint32_t r = (pos / 2) * CW + 2 * px + pos % 2;
                b.vpu_op(Fn::kSelEq, 7, 5, static_cast<int>(pos), 4, 0);  // code = pos ? dp : 0
                b.vpu_st(kBf16, 7, dz[zb] + (r * F + j * N) * 2);
              }
            }
          b.signal(isa::Unit::kVpu);
          // Items 0 .. i - lag are ready for the MXU: emit the whole groups among them.
          const uint32_t ready = i + 1 >= lag ? i + 1 - lag : 0;  // items 0 .. ready - 1
          while (next_group < items && (next_group + P <= ready || (i + 1 == items))) {
            emit_group(next_group, std::min(items, next_group + P));
            next_group = std::min(items, next_group + P);
          }
        }
        if (split) {  // this group's kernel columns and biases to the gradient vector
          for (uint32_t j = j0; j < j1; ++j)
            for (uint32_t t = 0; t <= T; ++t) {
              b.vpu_ld(kAcc, 7, (j - j0) * (T + 1) + t);
              b.vpu_st(kF32, 7, t == T ? cb + j * row4n : cw + (t * F + j * N) * 4);
            }
          b.signal(isa::Unit::kVpu);
          const uint32_t cols = (j1 - j0) * N;
          b.dma_copy(ub(cw + j0 * row4n, {{cols, 4}, {T, int32_t(F * 4)}}),
                     hbm(g_conv_w + uint64_t{j0} * row4n, {{cols, 4}, {T, int32_t(F * 4)}}), 4);
          copy_linear(b, isa::Space::kUb, cb + j0 * row4n, isa::Space::kHbm,
                      g_conv_b + uint64_t{j0} * row4n, cols, 4);
          continue;
        }
        // Adam on this group's kernel columns and biases (constants reloaded: v1..v3 were 1..3)
        for (const Tensor32& t : state)
          copy_linear(b, isa::Space::kHbm, t.hbm, isa::Space::kUb, t.ub, t.count, 4);
        copy_linear(b, isa::Space::kHbm, L.conv_w16, isa::Space::kUb, cw16, T * F, 2);
        b.signal(isa::Unit::kDma);
        const AdamRegs ar;
        emit_adam_constants(b, ar, adam_.beta1, adam_.beta2, adam_.epsilon, ub_lrt);
        for (uint32_t j = j0; j < j1; ++j)
          for (uint32_t t = 0; t <= T; ++t) {
            const bool is_bias = t == T;
            const uint32_t off4 = is_bias ? j * row4n : (t * F + j * N) * 4;
            b.vpu_ld(kAcc, ar.g, (j - j0) * (T + 1) + t);
            b.vpu_ld(kF32, ar.w, (is_bias ? cb : cw) + off4);
            b.vpu_ld(kF32, ar.m, (is_bias ? cb_m : cw_m) + off4);
            b.vpu_ld(kF32, ar.v, (is_bias ? cb_v : cw_v) + off4);
            emit_adam_update(b, ar);
            b.vpu_st(kF32, ar.w, (is_bias ? cb : cw) + off4);
            b.vpu_st(kF32, ar.m, (is_bias ? cb_m : cw_m) + off4);
            b.vpu_st(kF32, ar.v, (is_bias ? cb_v : cw_v) + off4);
            if (!is_bias) b.vpu_st(kBf16, ar.w, cw16 + (t * F + j * N) * 2);
          }
        b.signal(isa::Unit::kVpu);
        for (const Tensor32& t : state)
          copy_linear(b, isa::Space::kUb, t.ub, isa::Space::kHbm, t.hbm, t.count, 4);
        copy_linear(b, isa::Space::kUb, cw16, isa::Space::kHbm, L.conv_w16, T * F, 2);
      }
    }

    if (split) {
      // ---- reduce_scatter: chip r ends with the sum of chunk (r + 1) mod P (fenced: its own
      // sync) ----
      const int P = rep_.replicas;
      const size_t own = static_cast<size_t>((rep_.rank + 1) % P);
      if (P > 1) {
        phase("reduce_scatter");
        AllReduceSpec ars;
        ars.chips = rep_.replicas;
        ars.rank = rep_.rank;
        ars.n = n;
        ars.hbm_addr = static_cast<uint32_t>(L.grads);
        ars.elems = static_cast<uint32_t>(L.grads_elems);
        ars.ub_base = static_cast<uint32_t>(phase_base);
        ars.ub_bytes = static_cast<uint32_t>(chip_.ub_bytes - phase_base);
        ars.reduce_scatter_only = true;
        std::vector<isa::Instruction> block = ring_allreduce_program(ars);
        block.pop_back();  // its HALT
        b.fenced_block(block);
      }
      // ---- update: Adam on the tensors of this chip's chunk from its summed gradients ----
      phase("update");
      const AdamRegs ar;
      emit_adam_constants(b, ar, adam_.beta1, adam_.beta2, adam_.epsilon, ub_lrt);
      // A [rows][cols] fp32 tensor with row pitch `pitch` elements in HBM, in chunks of DR
      // columns (two buffer sets); `w16`: its bf16 copy in the same layout.
      auto adam2d = [&](uint64_t w_hbm, uint64_t m_hbm, uint64_t v_hbm, uint64_t g_hbm,
                        uint32_t rows, uint32_t cols, uint32_t pitch, uint32_t g_pitch,
                        uint64_t w16, const char* what) {
        UbArena a(phase_base, chip_.ub_bytes, n, what);
        const uint64_t per_col = uint64_t{rows} * (4 * 4 + 2);
        const uint64_t room =
            a.free() > 10 * 512 ? a.free() - 10 * 512 : 0;  // 10 buffers' alignment
        const uint32_t DR = std::min<uint32_t>(ceil_div(cols, N) * N,
                                               static_cast<uint32_t>(room / (2 * per_col) / N * N));
        if (DR == 0) a.take(a.free() + 1);  // names the phase: the UB is too small
        uint32_t gb[2], wb[2], mb[2], vb[2], hb[2];
        for (int i = 0; i < 2; ++i) {
          gb[i] = a.take(uint64_t{rows} * DR * 4);
          wb[i] = a.take(uint64_t{rows} * DR * 4);
          mb[i] = a.take(uint64_t{rows} * DR * 4);
          vb[i] = a.take(uint64_t{rows} * DR * 4);
          hb[i] = a.take(uint64_t{rows} * DR * 2);
        }
        auto h = [&](uint64_t base, uint32_t d0, uint32_t dr, int e, uint32_t p) {
          return hbm(base + uint64_t{d0} * e, {{dr, e}, {rows, int32_t(p * e)}});
        };
        auto u = [&](uint32_t base, uint32_t dr, int e) {
          return ub(base, {{dr, e}, {rows, int32_t(DR * e)}});
        };
        // Software-pipelined: chunk q + 1 is loaded before chunk q's updates are emitted, so the
        // in-order DMA fetches it while the VPU works on q (its store waits for the VPU).
        const uint32_t chunks = ceil_div(cols, DR);
        auto load = [&](uint32_t q) {
          const uint32_t d0 = q * DR, dr = std::min(DR, cols - d0), i = q % 2;
          b.dma_copy(h(g_hbm, d0, dr, 4, g_pitch), u(gb[i], dr, 4), 4);
          b.dma_copy(h(w_hbm, d0, dr, 4, pitch), u(wb[i], dr, 4), 4);
          b.dma_copy(h(m_hbm, d0, dr, 4, pitch), u(mb[i], dr, 4), 4);
          b.dma_copy(h(v_hbm, d0, dr, 4, pitch), u(vb[i], dr, 4), 4);
          b.signal(isa::Unit::kDma);
        };
        load(0);
        for (uint32_t q = 0, d0 = 0; d0 < cols; ++q, d0 += DR) {
          const uint32_t dr = std::min(DR, cols - d0), i = q % 2;
          if (q + 1 < chunks) load(q + 1);
          for (uint32_t r = 0; r < rows; ++r)
            for (uint32_t j = 0; j < dr / N; ++j) {
              const uint32_t off = r * DR + j * N;
              b.vpu_ld(kF32, ar.g, gb[i] + off * 4);
              b.vpu_ld(kF32, ar.w, wb[i] + off * 4);
              b.vpu_ld(kF32, ar.m, mb[i] + off * 4);
              b.vpu_ld(kF32, ar.v, vb[i] + off * 4);
              emit_adam_update(b, ar);
              b.vpu_st(kF32, ar.w, wb[i] + off * 4);
              b.vpu_st(kF32, ar.m, mb[i] + off * 4);
              b.vpu_st(kF32, ar.v, vb[i] + off * 4);
              if (w16) b.vpu_st(kBf16, ar.w, hb[i] + off * 2);
            }
          b.signal(isa::Unit::kVpu);
          b.dma_copy(u(wb[i], dr, 4), h(w_hbm, d0, dr, 4, pitch), 4);
          b.dma_copy(u(mb[i], dr, 4), h(m_hbm, d0, dr, 4, pitch), 4);
          b.dma_copy(u(vb[i], dr, 4), h(v_hbm, d0, dr, 4, pitch), 4);
          if (w16) b.dma_copy(u(hb[i], dr, 2), h(w16, d0, dr, 2, pitch), 2);
        }
      };
      const uint32_t C = spec_.classes;
      if (own == 0) {
        adam2d(L.conv_w, L.conv_w_m, L.conv_w_v, g_conv_w, 1, T * F, T * F, T * F, L.conv_w16,
               "update (conv kernel)");
        adam2d(L.conv_b, L.conv_b_m, L.conv_b_v, g_conv_b, 1, F, F, F, 0, "update (conv bias)");
        adam2d(L.dense_b, L.dense_b_m, L.dense_b_v, g_dense_b, 1, Cpad, Cpad, Cpad, 0,
               "update (dense bias)");
      }
      const uint32_t c0 = S.col[own], cw = S.col[own + 1] - c0;  // my dense W^T columns
      if (cw > 0)
        adam2d(L.dense_w + uint64_t{c0} * 4, L.dense_w_m + uint64_t{c0} * 4,
               L.dense_w_v + uint64_t{c0} * 4, g_dense_w(own), C, cw, D, cw,
               L.dense_w16t + uint64_t{c0} * 2, "update (dense kernel)");
      // ---- allgather: every chunk's bf16 copies and fp32 biases from its owner to every chip
      // (fenced: its own sync) ----
      if (P > 1) {
        phase("allgather");
        std::vector<std::vector<GatherRegion>> chunks(static_cast<size_t>(P));
        auto region = [](uint64_t addr, int e, std::vector<std::pair<uint32_t, int32_t>> loops) {
          GatherRegion g;
          g.addr = static_cast<uint32_t>(addr);
          g.elem_bytes = e;
          g.loops = std::move(loops);
          return g;
        };
        for (size_t k = 0; k < chunks.size(); ++k) {
          if (k == 0) {
            chunks[k].push_back(region(L.conv_w16, 2, {{F, 2}, {T, int32_t(F * 2)}}));
            chunks[k].push_back(region(L.conv_b, 4, {{F, 4}}));
            chunks[k].push_back(region(L.dense_b, 4, {{Cpad, 4}}));
          }
          // the chunk's columns in pieces whose loop counts fit the DMA's 16 bits
          for (uint32_t k0 = S.col[k]; k0 < S.col[k + 1]; k0 += 32768) {
            const uint32_t kw = std::min<uint32_t>(32768, S.col[k + 1] - k0);
            chunks[k].push_back(
                region(L.dense_w16t + uint64_t{k0} * 2, 2, {{kw, 2}, {C, int32_t(D * 2)}}));
          }
        }
        std::vector<isa::Instruction> block = ring_allgather_program(P, rep_.rank, chunks);
        block.pop_back();  // its HALT
        b.fenced_block(block);
      }
    }
  }  // train

  // Loop compression: the same instructions, fetched as REPEAT bodies; no loop crosses a phase.
  program_ = phases.finish(mxu_bound_);
  layout_.bytes = layout_.program + program_.size() * isa::kInstructionBytes - layout_.base;
}

std::vector<uint8_t> CnnTrainStep::program_bytes() const { return isa::encode_program(program_); }

std::vector<CnnTrainStep::Write> CnnTrainStep::state_image(const CnnParams& p,
                                                           const AdamState& s) const {
  const uint32_t N = chip_.n, F = spec_.filters, T = spec_.taps(), D = spec_.features();
  const uint32_t C = spec_.classes, Cpad = class_pad(), Cc = Cpad / N;
  auto check = [](const std::vector<float>& v, size_t want, const char* what) {
    if (v.size() != want)
      throw std::invalid_argument(std::string(what) + ": " + std::to_string(v.size()) +
                                  " values, the model has " + std::to_string(want));
  };
  std::vector<Write> out;
  auto f32s = [&](uint64_t addr, const std::vector<float>& v, size_t want, const char* what) {
    check(v, want, what);
    std::vector<uint8_t> bytes(v.size() * 4);
    for (size_t i = 0; i < v.size(); ++i) put32(bytes, i * 4, fp::bits(v[i]));
    out.push_back({addr, std::move(bytes)});
  };
  // A dense tensor ([rows][classes] as Keras has it): element (r, c) at r * row_stride +
  // c * class_stride of an `elems`-element zero-padded region.
  auto dense_as = [&](uint64_t addr, const std::vector<float>& v, uint32_t rows, const char* what,
                      bool bf16, size_t row_stride, size_t class_stride, size_t elems) {
    check(v, size_t{rows} * C, what);
    const int e = bf16 ? 2 : 4;
    std::vector<uint8_t> bytes(elems * e, 0);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < C; ++c) {
        const uint32_t bits = fp::bits(v[size_t{r} * C + c]);
        const size_t at = (r * row_stride + c * class_stride) * e;
        if (bf16)
          put16(bytes, at, fp::fp32_to_bf16(bits));
        else
          put32(bytes, at, bits);
      }
    out.push_back({addr, std::move(bytes)});
  };
  // padded to Cpad columns: [rows][Cpad]
  auto dense = [&](uint64_t addr, const std::vector<float>& v, uint32_t rows, const char* what,
                   bool bf16) {
    dense_as(addr, v, rows, what, bf16, Cpad, 1, size_t{rows} * Cpad);
  };
  // the dense kernel transposed: [out_rows][features] (classes, or Cpad with zero rows)
  auto dense_t = [&](uint64_t addr, const std::vector<float>& v, uint32_t out_rows,
                     const char* what,
                     bool bf16) { dense_as(addr, v, D, what, bf16, 1, D, size_t{out_rows} * D); };
  const HbmLayout& L = layout_;
  f32s(L.conv_w, p.conv_kernel, size_t{T} * F, "conv kernel");
  f32s(L.conv_w_m, s.m.conv_kernel, size_t{T} * F, "conv kernel m");
  f32s(L.conv_w_v, s.v.conv_kernel, size_t{T} * F, "conv kernel v");
  f32s(L.conv_b, p.conv_bias, F, "conv bias");
  f32s(L.conv_b_m, s.m.conv_bias, F, "conv bias m");
  f32s(L.conv_b_v, s.v.conv_bias, F, "conv bias v");
  {
    std::vector<uint8_t> bytes(size_t{tap_pad()} * F * 2, 0);
    for (size_t i = 0; i < size_t{T} * F; ++i)
      put16(bytes, i * 2, fp::fp32_to_bf16(fp::bits(p.conv_kernel[i])));
    out.push_back({L.conv_w16, std::move(bytes)});
  }
  dense_t(L.dense_w, p.dense_kernel, C, "dense kernel", false);
  dense_t(L.dense_w_m, s.m.dense_kernel, C, "dense kernel m", false);
  dense_t(L.dense_w_v, s.v.dense_kernel, C, "dense kernel v", false);
  dense_t(L.dense_w16t, p.dense_kernel, Cpad, "dense kernel", true);
  dense(L.dense_b, p.dense_bias, 1, "dense bias", false);
  dense(L.dense_b_m, s.m.dense_bias, 1, "dense bias m", false);
  dense(L.dense_b_v, s.v.dense_bias, 1, "dense bias v", false);
  {
    std::vector<uint8_t> bytes(2 * N * 4);
    for (uint32_t l = 0; l < N; ++l) {
      put32(bytes, l * 4, fp::bits(s.beta1_power));
      put32(bytes, (N + l) * 4, fp::bits(s.beta2_power));
    }
    out.push_back({L.powers, std::move(bytes)});
  }
  {
    std::vector<uint8_t> bytes(2 * Cc * N * 4);
    for (uint32_t c = 0; c < Cc; ++c)
      for (uint32_t l = 0; l < N; ++l) {
        const uint32_t cls = c * N + l;
        put32(bytes, (c * N + l) * 4, fp::bits(static_cast<float>(cls)));
        put32(bytes, ((Cc + c) * N + l) * 4, cls < C ? 0xFFFFFFFFu : 0u);
      }
    out.push_back({L.consts, std::move(bytes)});
  }
  // the gradient vector's padding is summed by the all-reduce like the rest: zero, not garbage
  if (L.grads_elems) out.push_back({L.grads, std::vector<uint8_t>(L.grads_elems * 4, 0)});
  return out;
}

std::vector<CnnTrainStep::Write> CnnTrainStep::batch_image(const std::vector<uint16_t>& images,
                                                           const std::vector<uint8_t>& lbl) const {
  const size_t px = size_t{spec_.height} * spec_.width;
  if (images.size() != px * batch_ || lbl.size() != batch_)
    throw std::invalid_argument("batch_image: expected " + std::to_string(batch_) +
                                " images and labels, got " + std::to_string(images.size() / px) +
                                " and " + std::to_string(lbl.size()));
  std::vector<uint8_t> img(images.size() * 2);
  for (size_t i = 0; i < images.size(); ++i) put16(img, i * 2, images[i]);
  const uint32_t bpad = ceil_div(batch_, chip_.n) * chip_.n;
  std::vector<uint8_t> lab(bpad * 4, 0);
  for (uint32_t i = 0; i < batch_; ++i) {
    if (lbl[i] >= spec_.classes)
      throw std::invalid_argument("label " + std::to_string(lbl[i]) + " of sample " +
                                  std::to_string(i) + " is not a class of the model");
    put32(lab, i * 4, fp::bits(static_cast<float>(lbl[i])));
  }
  return {{layout_.images, std::move(img)}, {layout_.labels, std::move(lab)}};
}

void CnnTrainStep::read_state(Reader read, void* ctx, CnnParams& p, AdamState& s) const {
  const uint32_t F = spec_.filters, T = spec_.taps(), D = spec_.features();
  const uint32_t C = spec_.classes, Cpad = class_pad();
  auto f32s = [&](uint64_t addr, size_t count) {
    const std::vector<uint8_t> bytes = read(ctx, addr, count * 4);
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = fp::f32(get32(bytes, i * 4));
    return v;
  };
  auto dense = [&](uint64_t addr, uint32_t rows) {
    const std::vector<float> padded = f32s(addr, size_t{rows} * Cpad);
    std::vector<float> v(size_t{rows} * C);
    for (uint32_t r = 0; r < rows; ++r)
      for (uint32_t c = 0; c < C; ++c) v[size_t{r} * C + c] = padded[size_t{r} * Cpad + c];
    return v;
  };
  const HbmLayout& L = layout_;
  p.conv_kernel = f32s(L.conv_w, size_t{T} * F);
  s.m.conv_kernel = f32s(L.conv_w_m, size_t{T} * F);
  s.v.conv_kernel = f32s(L.conv_w_v, size_t{T} * F);
  p.conv_bias = f32s(L.conv_b, F);
  s.m.conv_bias = f32s(L.conv_b_m, F);
  s.v.conv_bias = f32s(L.conv_b_v, F);
  auto dense_t = [&](uint64_t addr) {  // [classes][features] -> [features][classes]
    const std::vector<float> t = f32s(addr, size_t{C} * D);
    std::vector<float> v(size_t{D} * C);
    for (uint32_t c = 0; c < C; ++c)
      for (uint32_t d = 0; d < D; ++d) v[size_t{d} * C + c] = t[size_t{c} * D + d];
    return v;
  };
  p.dense_kernel = dense_t(L.dense_w);
  s.m.dense_kernel = dense_t(L.dense_w_m);
  s.v.dense_kernel = dense_t(L.dense_w_v);
  p.dense_bias = dense(L.dense_b, 1);
  s.m.dense_bias = dense(L.dense_b_m, 1);
  s.v.dense_bias = dense(L.dense_b_v, 1);
  const std::vector<float> pw = f32s(L.powers, 2 * chip_.n);
  s.beta1_power = pw[0];
  s.beta2_power = pw[chip_.n];
}

void CnnTrainStep::merge_replica_states(const std::vector<CnnParams>& ps,
                                        const std::vector<AdamState>& ss, CnnParams& p,
                                        AdamState& s) const {
  const size_t P = shards_.col.empty() ? 1 : shards_.col.size() - 1;
  if (ps.size() != P || ss.size() != P)
    throw std::invalid_argument("merge_replica_states: " + std::to_string(P) +
                                " replica states are needed, got " + std::to_string(ps.size()));
  p = ps[0];
  s = ss[0];
  if (P == 1) return;
  const size_t small = static_cast<size_t>(shards_.owner(0));  // conv kernel and both biases
  p.conv_kernel = ps[small].conv_kernel;
  p.conv_bias = ps[small].conv_bias;
  p.dense_bias = ps[small].dense_bias;
  for (CnnParams AdamState::*mom : {&AdamState::m, &AdamState::v}) {
    (s.*mom).conv_kernel = (ss[small].*mom).conv_kernel;
    (s.*mom).conv_bias = (ss[small].*mom).conv_bias;
    (s.*mom).dense_bias = (ss[small].*mom).dense_bias;
  }
  // the dense kernel ([features][classes] on the host): column d of W^T is row d here
  const size_t C = spec_.classes;
  for (size_t k = 0; k < P; ++k) {
    const size_t o = static_cast<size_t>(shards_.owner(static_cast<int>(k)));
    const size_t a = shards_.col[k] * C, e = shards_.col[k + 1] * C;
    std::copy(ps[o].dense_kernel.begin() + a, ps[o].dense_kernel.begin() + e,
              p.dense_kernel.begin() + a);
    for (CnnParams AdamState::*mom : {&AdamState::m, &AdamState::v})
      std::copy((ss[o].*mom).dense_kernel.begin() + a, (ss[o].*mom).dense_kernel.begin() + e,
                (s.*mom).dense_kernel.begin() + a);
  }
}

std::vector<std::pair<uint64_t, uint64_t>> CnnTrainStep::replicated_ranges() const {
  const HbmLayout& L = layout_;
  const uint64_t F = spec_.filters, D = spec_.features(), Cpad = class_pad();
  return {{L.conv_w16, uint64_t{tap_pad()} * F * 2},
          {L.conv_b, F * 4},
          {L.dense_w16t, Cpad * D * 2},
          {L.dense_b, Cpad * 4}};
}

std::vector<float> CnnTrainStep::read_probabilities(Reader read, void* ctx) const {
  const uint32_t C = spec_.classes, Cpad = class_pad();
  const std::vector<uint8_t> bytes = read(ctx, layout_.probs, size_t{batch_} * Cpad * 4);
  std::vector<float> p(size_t{batch_} * C);
  for (uint32_t i = 0; i < batch_; ++i)
    for (uint32_t c = 0; c < C; ++c)
      p[size_t{i} * C + c] = fp::f32(get32(bytes, (i * Cpad + c) * 4));
  return p;
}

void CnnTrainStep::read_metrics(Reader read, void* ctx, float& loss, float& correct) const {
  const std::vector<uint8_t> bytes = read(ctx, layout_.metrics, 2 * chip_.n * 4);
  loss = fp::f32(get32(bytes, 0));
  correct = fp::f32(get32(bytes, chip_.n * 4));
}

CnnParams glorot_init(const CnnSpec& spec, uint64_t seed) {
  uint64_t state = seed;
  CnnParams p;
  const double rf = spec.taps();
  p.conv_kernel = glorot(state, size_t{spec.taps()} * spec.filters, rf * 1, rf * spec.filters);
  p.conv_bias.assign(spec.filters, 0.0f);
  p.dense_kernel =
      glorot(state, size_t{spec.features()} * spec.classes, spec.features(), spec.classes);
  p.dense_bias.assign(spec.classes, 0.0f);
  return p;
}

AdamState zero_adam_state(const CnnSpec& spec) {
  AdamState s;
  for (CnnParams* p : {&s.m, &s.v}) {
    p->conv_kernel.assign(size_t{spec.taps()} * spec.filters, 0.0f);
    p->conv_bias.assign(spec.filters, 0.0f);
    p->dense_kernel.assign(size_t{spec.features()} * spec.classes, 0.0f);
    p->dense_bias.assign(spec.classes, 0.0f);
  }
  return s;
}

}  // namespace tessera::compiler
