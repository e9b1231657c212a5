// The plan of the layers before Flatten (docs/compiler.md, "Layers before Flatten"): each
// feature op's shapes, padded sizes and pitches, which ops run backward, and which fusion the
// lowered graph chose for it (the conv + relu + max-pool, the routing inside a weight
// gradient, the one-matmul [dW; db]). The HBM planner places its buffers from it; the
// lowerings read their geometry from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sw/compiler/feature_lowering.h"
#include "sw/compiler/graph.h"
#include "tessera/dense_step.h"

namespace tessera::compiler {

// The routing's stage (pool_routed_in_weight_gradient): this many pooled rows of dp and codes;
// a contraction group then spans at most (kRouteStageRows - 2) 2 wo conv rows.
constexpr uint32_t kRouteStageRows = 6;

// One feature op. conv: rows M = B Ho Wo of the im2col (Mpad rounded up to N), K = k k C
// (Kpad), filters F (Fpad); the input gradient's operand has Min = B H W rows of Kd = k k F.
struct FeatureOp {
  FeatureLayerSpec f;
  Shape3 in, out;
  lowering::ConvGeom g;
  bool conv = false;
  uint32_t M = 0, Mpad = 0, Kpad = 0, Fpad = 0, Kdpad = 0, Cpad = 0, Min = 0;
  uint32_t act_px = 0;  // output pixel pitch in HBM (bytes): conv F x 2, pool C x 2
  uint32_t g_px = 0;    // output-gradient pixel pitch: conv Fpad x 2 ([Mpad][Fpad]), pool C x 2
  bool bwd = false;     // a conv at or before it: it runs backward
  bool dx = false;      // a conv before it: it computes its input gradient
  // From the lowered graph's fused ops:
  bool pool_fused = false;   // conv: the max-pool after it runs in its epilogue
                             // (fused.conv2d_bias_relu_maxpool)
  bool fused_pool = false;   // max-pool: taken by the conv before it
  bool route_in_dw = false;  // conv, and its fused pool: the routing in the conv's weight
                             // gradient (fused.maxpool_relu_grad in the conv's backward phase)
  bool by_taps = false;      // conv: [dW; db] = [patches(x) ones]^T dz, one matmul with no dz^T
                             // (fused.conv2d_filter_bias_grad_*)
  int param = -1;            // conv: its index among the layers with weights
};
struct FeaturePlan {
  std::vector<FeatureOp> ops;
  int first_conv = -1;
  uint32_t convs = 0;
  bool x0_in_place = false;   // the last op writes the Flatten buffer x0 itself
  bool dz0_in_place = false;  // the last op reads its output gradient from dz0 itself
};

// The plan of `g`'s model (its spec and chip) at `batch` samples.
FeaturePlan plan_features(const Graph& g, uint32_t batch);

// A convolution reads its input map in place when every tap lands inside it; else a copy
// with the padding zeros, padded_rows x padded_cols pixels (the rows and columns the taps
// reach).
bool reads_in_place(const FeatureOp& op);
inline uint32_t padded_rows(const FeatureOp& op) { return op.g.s * (op.g.out.h - 1) + op.g.k; }
inline uint32_t padded_cols(const FeatureOp& op) { return op.g.s * (op.g.out.w - 1) + op.g.k; }
// conv1, maxpool2, avgpool3: op i's name in phases and buffer names.
std::string feature_name(const FeatureOp& op, size_t i);

}  // namespace tessera::compiler
