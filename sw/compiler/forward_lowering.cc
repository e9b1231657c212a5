// The forward lowerings (sw/compiler/step_lowering.h): a convolution with its bias, relu and
// (fused) max-pool epilogue, a pooling layer, a Dense layer with its bias, relu and Dropout
// epilogue, and the softmax layer with the cross-entropy, accuracy and d logits.
#include <cmath>
#include <stdexcept>

#include "sw/compiler/conv_pool_lowering.h"
#include "sw/compiler/step_lowering.h"
#include "sw/compiler/vpu_math.h"

namespace tessera::compiler {
using namespace lowering;
using Fn = isa::Funct;

// Dense layer l's forward matmul x_{l-1} · W_l (its bias in ub_bias, copied here): the operands
// as they lie in HBM, the flattened features gathered pooled-row-major where the conv wrote so.
Matmul StepLowering::dense_matmul(uint32_t l, const LayerRegions& R, const char* name) {
  copy_linear(b, kHbm, R.b, kUb, ub_bias, P[l], 4);
  b.signal(isa::Unit::kDma);
  Matmul op;
  op.name = name;
  op.M = Bpad;
  op.Kt = P[l - 1] / N;
  op.Ct = P[l] / N;
  op.a = x_addr(l - 1);
  op.a_pitch = P[l - 1] * 2;
  if (l == 1 && x0_rows) {
    op.a_gather = x0_gather();
    op.a_run = x0_row;
  }
  op.w = R.w16;
  op.w_pitch = P[l - 1] * 2;
  op.w_by_column = true;
  return op;
}

// fused.conv2d_bias[_relu][_maxpool], maxpool, avgpool: feature layer n.layer's forward
void StepLowering::feature_forward(const Node& n) {
  const uint32_t i = static_cast<uint32_t>(n.layer);
  const FeatureOp& op = fp.ops[i];
  const std::string id = feature_name(op, i);
  const bool fused = n.op == "fused.conv2d_bias_relu_maxpool";
  if (fused != op.pool_fused) throw std::logic_error(id + ": the plan and the graph disagree");
  // the op whose output this phase writes: the pool a conv takes, else the op's
  const uint32_t io = fused ? i + 1 : i;
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
  if (n.op == "maxpool" || n.op == "avgpool") {
    emit_pool_forward(b, arena_lo, arena_hi, n.op == "maxpool", op.f.pool, op.in, op.out, B, x, y);
    note(id + ": pool " + std::to_string(op.f.pool) + " on " + std::to_string(op.in.h) + " x " +
         std::to_string(op.in.w) + " x " + std::to_string(op.in.c));
    return;
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
  const bool relu = n.op != "fused.conv2d_bias";
  note(id + ": " + std::to_string(op.g.k) + " x " + std::to_string(op.g.k) + " stride " +
       std::to_string(op.g.s) + (op.f.same ? " same" : " valid") + ", " + std::to_string(op.in.h) +
       " x " + std::to_string(op.in.w) + " x " + std::to_string(op.in.c) + " -> " +
       std::to_string(op.out.h) + " x " + std::to_string(op.out.w) + " x " + std::to_string(F) +
       "; operand " + std::to_string(op.M) + " x " + std::to_string(op.Kpad) + " read from " +
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
  if (fused) {  // the max-pool in the epilogue: pairs of output rows a piece
    const FeatureOp& pool = fp.ops[io];
    if (y.px != F * 2 || y.sample != uint64_t{pool.out.size()} * 2)
      throw std::logic_error(id + ": the pooled map is not compact");
    mm.row_align = 2 * op.out.w;
    ConvPoolOut po{y.addr, transient(id + ".argmax"), op.out.w, F};
    if (last && x0_rows) {
      po.rows_batch = Bpad;
      po.hp = pool.out.h;
    }
    ProgramBuilder& bb = b;
    const uint32_t ub_bias = this->ub_bias;
    fepi.run = [&bb, po, ub_bias](const Block& k) { emit_conv_pool_epilogue(bb, k, po, ub_bias); };
    note(id + " + " + feature_name(pool, io) + ": the 2 x 2 max-pool, its argmax codes (" + id +
         ".argmax) and the relu in the epilogue");
  }
  // implicit GEMM over the (padded) input map at stride 1, as for the input gradient
  std::string how;
  const uint32_t C = op.in.c, k = op.g.k;
  if (s_.choices_.implicit_gemm && !fused && op.g.s == 1 && C % N == 0 && op.Kpad == k * k * C &&
      src.map.px == C * 2 && src.map.space == isa::Space::kHbm &&
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

// fused.matmul_bias[_relu][_dropout]: a hidden Dense layer, x_l = epilogue(x_{l-1} W_l)
void StepLowering::dense_forward(const Node& n) {
  const uint32_t l = static_cast<uint32_t>(n.layer) - nf + 1;
  const LayerRegions& R = Y.layers[fp.convs + l - 1];
  const bool relu = n.op != "fused.matmul_bias";
  Matmul op = dense_matmul(l, R, "Dense forward");
  op.epi_row_bytes = row2n;
  op.allow_whole_acc = true;
  const uint64_t out = x_addr(l);
  const float rate = train && n.op == "fused.matmul_bias_relu_dropout"
                         ? static_cast<float>(n.num.at("rate"))
                         : 0.0f;
  note(emit_matmul(
      b, op, arena_lo, arena_hi, chip_.acc_rows,
      {nullptr, [&](const Block& k) {
         const uint32_t pitch = k.ct * row2n;
         if (rate > 0) {  // relu(z + b), then Dropout: kept units x 1 / (1 - rate), dropped 0
           b.vpu_ld(kF32, 8, ub_consts);  // lane index (the class-index row), as an int
           b.vpu_op(Fn::kF2I, 8, 8);
           for (uint32_t r = 0; r < k.rows; ++r) {
             b.vpu_ld(kF32, 5, ub_dbase + (l - 1) * row4n);
             b.vpu_li(7, s_.rep_.rank * B + k.r0 + r);  // the sample, in the global batch
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
}

// fused.matmul_bias_softmax_xent: the last layer; training: the loss, accuracy and d logits
// (bf16, to dz_L), evaluation: the probabilities
void StepLowering::softmax_xent(const Node& n) {
  const uint32_t l = static_cast<uint32_t>(n.layer) - nf + 1;
  if (l != L) throw std::logic_error("compiler: the softmax cross-entropy is not the last layer");
  const LayerRegions& R = Y.layers[fp.convs + l - 1];
  Matmul op = dense_matmul(l, R, "softmax layer");
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
  const float inv_b = 1.0f / static_cast<float>(uint64_t{B} * s_.rep_.replicas);
  // label smoothing eps: the target of class c is hi for the label, lo for the other real
  // classes (Keras's (1 - eps) one-hot + eps / C), and the loss ln S - sum_c t_c (z_c - max)
  // = ln S - (1 - eps) (z_label - max) - lo sum_c (z_c - max); eps 0 emits the plain loss,
  // as does evaluation (smoothing is a training target; the test loss is the cross-entropy)
  const float ls = train ? s_.opt_.label_smoothing : 0.0f, ls_lo = ls / static_cast<float>(D[l]),
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
           b.dma_copy(ub(drow, {{Cpad, 2}, {k.rows, int32_t(Cc * row2n)}}),
                      hbm(dz + uint64_t{k.r0} * Cpad * 2, {{Cpad, 2}, {k.rows, int32_t(Cpad * 2)}}),
                      2);
         else
           b.dma_copy(
               ub(prow, {{Cpad, 4}, {k.rows, int32_t(Cc * row4n)}}),
               hbm(Y.probs + uint64_t{k.r0} * Cpad * 4, {{Cpad, 4}, {k.rows, int32_t(Cpad * 4)}}),
               4);
       }}));
  b.vpu_lif(15, static_cast<float>(B));
  b.vpu_op(Fn::kDiv, 1, 1, 15);
  b.vpu_st(kF32, 1, ub_metrics);
  b.vpu_st(kF32, 2, ub_metrics + row4n);
  b.signal(isa::Unit::kVpu);
  copy_linear(b, kUb, ub_metrics, kHbm, Y.metrics, 2 * N, 4);
}

}  // namespace tessera::compiler
