#include "sw/compiler/feature_plan.h"

namespace tessera::compiler {
namespace {
// Whether a live node of op `op` (exact, or a prefix ending in '_' or '.') belongs to `layer`.
bool has_node(const Graph& g, int layer, const std::string& op, bool prefix = false) {
  for (const Node& n : g.nodes())
    if (!n.dead && n.layer == layer && (prefix ? n.op.compare(0, op.size(), op) == 0 : n.op == op))
      return true;
  return false;
}
}  // namespace

FeaturePlan plan_features(const Graph& g, uint32_t batch) {
  const DenseStackSpec& spec = g.spec;
  const uint32_t n = g.chip.n;
  FeaturePlan fp;
  const auto shapes = feature_shapes(spec);
  auto pad = [&](uint64_t v) { return static_cast<uint32_t>((v + n - 1) / n * n); };
  for (size_t i = 0; i < spec.features.size(); ++i) {
    FeatureOp op;
    op.f = spec.features[i];
    op.in = shapes[i];
    op.out = shapes[i + 1];
    op.conv = op.f.kind == FeatureLayerSpec::Kind::kConv;
    const int layer = static_cast<int>(i);
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
      if (fp.first_conv < 0) fp.first_conv = layer;
      op.pool_fused = has_node(g, layer, "fused.conv2d_bias_relu_maxpool");
      op.route_in_dw = has_node(g, layer, "fused.maxpool_relu_grad");
      op.by_taps = has_node(g, layer, "fused.conv2d_filter_bias_grad_", true);
    } else {
      op.act_px = op.g_px = op.in.c * 2;
      op.fused_pool = i > 0 && fp.ops.back().pool_fused;
      op.route_in_dw = op.fused_pool && fp.ops.back().route_in_dw;
    }
    op.bwd = fp.first_conv >= 0;
    op.dx = fp.first_conv >= 0 && fp.first_conv < layer;
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

bool reads_in_place(const FeatureOp& op) {
  const auto& g = op.g;
  return g.pt == 0 && g.pl == 0 && g.s * (g.out.h - 1) + g.k <= g.in.h &&
         g.s * (g.out.w - 1) + g.k <= g.in.w;
}

std::string feature_name(const FeatureOp& op, size_t i) {
  return std::string(op.conv                                         ? "conv"
                     : op.f.kind == FeatureLayerSpec::Kind::kMaxPool ? "maxpool"
                                                                     : "avgpool") +
         std::to_string(i + 1);
}

}  // namespace tessera::compiler
