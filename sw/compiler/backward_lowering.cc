// The backward lowerings (sw/compiler/step_lowering.h): a Dense layer's (dz^T, the input
// gradient with the producer's relu and Dropout gradient, the weight and bias gradients with
// the optimizer in their epilogues) and a feature layer's (pooling gradients, the max-pool
// gradient routed by the argmax codes, a convolution's input gradient, its weight and bias
// gradients — item by item for the conv + max-pool fusion over the images).
// Layer l's input gradient is computed before its weights change (it reads the old copy).
#include <memory>
#include <stdexcept>

#include "sw/compiler/conv_pool_lowering.h"
#include "sw/compiler/step_lowering.h"
#include "sw/compiler/vpu_math.h"

namespace tessera::compiler {
using namespace lowering;
using Fn = isa::Funct;
namespace {

const Node* find_op(const std::vector<const Node*>& nodes, std::initializer_list<std::string> ops) {
  for (const Node* n : nodes)
    for (const std::string& o : ops)
      if (n->op == o) return n;
  return nullptr;
}
}  // namespace

// bwd<l>: dz_l^T; the input gradient (matmul, or fused.matmul_relu_grad with the producer's
// relu and Dropout gradient) unless l is the first layer over the images; the weight gradient
// with its update (fused.matmul_<optimizer>), the bias gradient with its (fused.matmul_ones_*)
void StepLowering::dense_backward(uint32_t l, const Nodes& nodes) {
  const std::string opt = adam ? "adam" : "sgd_momentum";
  const Node* dx_node = nullptr;
  for (const Node* n : nodes)
    if ((n->op == "matmul" || n->op == "fused.matmul_relu_grad") && n->num.count("input_grad"))
      dx_node = n;
  if (!find_op(nodes, {"fused.matmul_" + opt}) || !find_op(nodes, {"fused.matmul_ones_" + opt}))
    throw std::logic_error("compiler: bwd" + std::to_string(l) +
                           " has no weight or bias gradient with its " + opt + " update");
  const LayerRegions& R = Y.layers[fp.convs + l - 1];
  const uint64_t dz = transient("dz" + std::to_string(l));
  const uint64_t dzt = transient("dzT" + std::to_string(l));
  // dz^T [D_l][Bpad], the activation rows of the weight gradient
  if (!emit_transpose_mxu(b, arena_lo, arena_hi, chip_.acc_rows, ub_identity, dz, Bpad, D[l], P[l],
                          P[l] * 2, dzt, Bpad * 2))
    emit_transpose(b, arena_lo, arena_hi, dz, Bpad, D[l], P[l], P[l] * 2, dzt, Bpad * 2);
  if (dx_node) {  // dx = dz W^T, the relu gradient by x_{l-1} > 0
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
    const bool relu = dx_node->op == "fused.matmul_relu_grad";
    // kept units pass d x 1 / (1 - rate)
    const auto rate = dx_node->num.find("dropout_rate");
    const float drop = rate == dx_node->num.end() ? 0.0f : static_cast<float>(rate->second);
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
  optimizer_constants();
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
    dw.w_gather = x0_gather();
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

// bwd_<feature i>: the pooling gradient (or the routing by the argmax codes), or a
// convolution's input gradient and its weight and bias gradients with their update
void StepLowering::feature_backward(int i, const Nodes& nodes) {
  const FeatureOp& op = fp.ops[i];
  const std::string id = feature_name(op, i);
  const bool last = i + 1 == int(nf);
  const bool routed = op.conv && op.route_in_dw;  // its dz made in the UB, never stored
  const MapRef g = routed ? MapRef{} : grad_ref(i);
  // the producer's relu gradient, fused into this op's input gradient
  bool prev_relu = false;
  for (const Node* n : nodes)
    prev_relu |= n->op == "fused.conv2d_input_grad_relu" || n->op == "fused.maxpool_grad_relu" ||
                 n->op == "fused.avgpool_grad_relu";
  if (op.fused_pool) {  // dz of the conv before: dp routed by the argmax codes
    const MapRef gin = grad_ref(i - 1);
    const uint32_t F = op.out.c;
    if (g.px != F * 2 || g.sample != uint64_t{op.out.size()} * 2 || gin.px != F * 2)
      throw std::logic_error(id + ": the pooled gradient is not compact");
    prepare_grad(i - 1, false);
    emit_pool_route(b, arena_lo, arena_hi, B, op.out.h, op.out.w, F, g.addr,
                    transient(feature_name(fp.ops[i - 1], i - 1) + ".argmax"), gin.addr);
    note(id + ": the pooled gradient routed by the argmax codes, with the relu gradient");
    return;
  }
  if (!op.conv) {
    const MapRef x = out_ref(i - 1), gin = grad_ref(i - 1);
    prepare_grad(i - 1, op.in.h % op.f.pool || op.in.w % op.f.pool);
    emit_pool_backward(b, arena_lo, arena_hi, op.f.kind == FeatureLayerSpec::Kind::kMaxPool,
                       op.f.pool, prev_relu, op.in, op.out, B, x, g, gin);
    note(id + ": pooling gradient" + std::string(prev_relu ? " with the relu gradient" : ""));
    return;
  }
  const LayerRegions& R = Y.layers[op.param];
  const uint32_t F = op.f.filters, C = op.in.c;
  if (last && !fp.dz0_in_place) {  // dz0's [Bpad][P0] rows into [Mpad][Fpad]
    prepare_grad(i, false);
    const uint32_t pixels = op.out.h * op.out.w;
    b.dma_copy(hbm(transient("dz0"), {{F, 2}, {pixels, int32_t(F * 2)}, {B, int32_t(P0 * 2)}}),
               hbm(g.addr, {{F, 2}, {pixels, int32_t(op.g_px)}, {B, int32_t(pixels * op.g_px)}}),
               2);
  }
  // dz^T [F][Mpad]: the weight gradient's activation rows
  const bool by_taps = op.by_taps;
  const uint64_t dzt = by_taps ? 0 : transient(id + ".gradT");
  if (!by_taps && !emit_transpose_mxu(b, arena_lo, arena_hi, chip_.acc_rows, ub_identity, g.addr,
                                      op.Mpad, F, op.Fpad, op.g_px, dzt, op.Mpad * 2))
    emit_transpose(b, arena_lo, arena_hi, g.addr, op.Mpad, F, op.Fpad, op.g_px, dzt, op.Mpad * 2);
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
      b.dma_copy(
          hbm(x.addr + uint64_t{k.r0} * x.px + k.c0 * N * 2, {{valid, 2}, {k.rows, int32_t(x.px)}}),
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
    const bool implicit = s_.choices_.implicit_gemm && F % N == 0 && op.Kdpad == k * k * F;
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
  optimizer_constants();
  // The fused pair's first convolution over the images (valid padding): item by item,
  // a pooled row of a sample each (conv_pool_lowering.h), its sums then updated from the ACC.
  if (routed && i == 0 && !op.f.same &&
      conv_pool_weight_gradient_fits(static_cast<int>(N), arena_hi - arena_lo, op.in.h, op.in.w,
                                     op.f.kernel, F)) {
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
    return;
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
  if (by_taps) {              // [d W; d b] = [patches(x) ones]^T dz: rows the taps and a ones row
    dw.M = K + 1;
    dw.Ct = op.Fpad / N;
    const uint64_t ones = Y.ones;
    // One input channel: the samples the group's positions lie in are staged in the UB
    // once (one contiguous copy of at most two samples), and the k k taps gathered from
    // there instead of k k walks over HBM (runs of an output row, a DRAM page each).
    const uint32_t plane = xmap.ho * xmap.wo;
    // (only where the two buffers take at most a quarter of the arena; emit_matmul drops
    // them when no tiling fits beside them)
    if (xmap.c == 1 && xmap.map.sample <= 8192 && 4 * xmap.map.sample <= (arena_hi - arena_lo) / 4)
      dw.a_stage_bytes = static_cast<uint32_t>(2 * xmap.map.sample);
    dw.a_gather = [&b = b, xmap, ub_zero = ub_zero, zero_elems = zero_elems, K, ones, plane](
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
        from.map.addr = stage_at - b0 * xmap.map.sample;  // wraps; the walks add b0's offset back
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
      dw.w_gather = [&b = b, ro](uint64_t r0, uint32_t rows, uint32_t c0, uint32_t cols,
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
  note(emit_matmul(
      b, dw, arena_lo, dw_hi, chip_.acc_rows,
      {[&](const Block& k) { dw_update(true, k); }, [&](const Block& k) { dw_update(false, k); }}));
  if (by_taps) return;
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

}  // namespace tessera::compiler
