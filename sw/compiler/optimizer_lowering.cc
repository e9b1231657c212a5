// The optimizer lowerings (sw/compiler/step_lowering.h): Adam or SGD with momentum as the
// epilogue of a weight or bias gradient's matmul (the gradient read from the ACC), and data
// parallelism's split update: the gradients to the gradient vector, the ring reduce-scatter,
// the optimizer on this chip's chunk, the all-gather of the bf16 copies and biases.
#include <algorithm>
#include <functional>
#include <stdexcept>
#include <tuple>

#include "sw/compiler/step_lowering.h"
#include "sw/compiler/vpu_math.h"
#include "tessera/allreduce.h"

namespace tessera::compiler {
using namespace lowering;
using Fn = isa::Funct;

// The optimizer's constants in AdamRegs (b1 = momentum, lr_t = lr for SGD).
void StepLowering::optimizer_constants() {
  if (adam) {
    emit_adam_constants(b, ar, s_.opt_.beta1, s_.opt_.beta2, s_.opt_.epsilon, ub_lrt);
  } else {
    b.vpu_lif(ar.b1, s_.opt_.momentum);
    b.vpu_ld(kF32, ar.lr_t, ub_lrt);
  }
}

// Optimizer epilogue on a [rows][ct N] piece of a tensor in HBM rows of `pitch` elements
// (W^T or the bias as one row): `load` w, m, v into the scratch, else the update with the
// gradient from the ACC and the stores; w16: the bf16 copy (0: none).
// `transposed`: the ACC holds the gradient's transpose (block rows are the tensor's
// columns, lanes its rows), and w, m, v are walked element by element to match.
// `R.streams` > 1 (a Dense layer): w, m, v interleaved, one run a row of the piece each way.
void StepLowering::update(bool load, const Block& k, const LayerRegions& R, uint32_t pitch,
                          bool transposed) {
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
  auto urows = [&](uint32_t base, int e) { return ub(base, {{cn, e}, {k.rows, int32_t(cn * e)}}); };
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
}

void StepLowering::split_update() {
  // ---- reduce_scatter: chip r ends with chunk (r + 1) mod P of the gradient vector summed
  // (fenced: its own sync) ----
  const uint32_t P = static_cast<uint32_t>(s_.rep_.replicas);
  if (P > 1) {
    phases.begin("reduce_scatter");
    AllReduceSpec ars;
    ars.chips = s_.rep_.replicas;
    ars.rank = s_.rep_.rank;
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
  optimizer_constants();
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
  auto parts =
      [&](uint32_t chunk,
          const std::function<void(const LayerRegions&, bool bias, uint64_t e0, uint64_t e1)>& f) {
        const uint64_t c0 = uint64_t{chunk} * C, c1 = c0 + C;
        const auto shapes = weight_shapes(spec_);
        for (size_t j = 0; j < shapes.size(); ++j) {
          const LayerRegions& R = Y.layers[j];
          const uint64_t bias = s_.padded(shapes[j].second),
                         kernel = uint64_t{shapes[j].second} * s_.padded(shapes[j].first);
          for (const auto& [go, n, is_bias] : {std::tuple{(R.g - Y.grads) / 4, kernel, false},
                                               std::tuple{(R.g_b - Y.grads) / 4, bias, true}}) {
            const uint64_t a = std::max(go, c0), z = std::min(go + n, c1);
            if (a < z) f(R, is_bias, a - go, z - go);
          }
        }
      };
  const uint32_t own = (static_cast<uint32_t>(s_.rep_.rank) + 1) % P;
  parts(own, [&](const LayerRegions& R, bool bias, uint64_t e0, uint64_t e1) {
    if (bias) {
      update_flat(e1 - e0, 1, R.b + e0 * 4, R.b_m + e0 * 4, R.b_v + e0 * 4, R.g_b + e0 * 4, 0);
      return;
    }
    const uint64_t S = R.streams;  // interleaved state: N values of each stream in turn
    update_flat(e1 - e0, R.streams, R.w + e0 * S * 4, R.w_m + e0 * 4, R.w_v + e0 * 4, R.g + e0 * 4,
                R.w16 + e0 * 2);
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
    std::vector<isa::Instruction> block =
        ring_allgather_program(s_.rep_.replicas, s_.rep_.rank, chunks);
    block.pop_back();  // its HALT
    b.fenced_block(block);
  }
}

}  // namespace tessera::compiler
