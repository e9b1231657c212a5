// The graph IR and its passes (graph.h).
#include "sw/compiler/graph.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessera::compiler {

using FK = FeatureLayerSpec::Kind;

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32:
      return "f32";
    case DType::kBf16:
      return "bf16";
    case DType::kI32:
      return "i32";
  }
  return "?";
}

int Graph::add(const std::string& op, const std::string& name, std::vector<int> inputs,
               std::vector<uint32_t> shape, DType dtype, const std::string& attrs) {
  Node n;
  n.id = static_cast<int>(nodes_.size());
  n.op = op;
  n.name = name;
  n.inputs = std::move(inputs);
  n.shape = std::move(shape);
  n.dtype = dtype;
  n.attrs = attrs;
  nodes_.push_back(n);
  return n.id;
}

int Graph::find(const std::string& name) const {
  for (const auto& n : nodes_)
    if (!n.dead && n.name == name) return n.id;
  return -1;
}

size_t Graph::live() const {
  return static_cast<size_t>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const Node& n) { return !n.dead; }));
}

std::vector<int> Graph::consumers(int id) const {
  std::vector<int> c;
  for (const auto& n : nodes_)
    if (!n.dead && std::find(n.inputs.begin(), n.inputs.end(), id) != n.inputs.end())
      c.push_back(n.id);
  return c;
}

void Graph::replace_uses(int from, int to) {
  for (auto& n : nodes_)
    if (!n.dead && n.id != to)
      for (int& i : n.inputs)
        if (i == from) i = to;
}

std::string Graph::dump() const {
  std::ostringstream o;
  for (const auto& n : nodes_) {
    if (n.dead) continue;
    o << "  %" << n.id << " " << n.name << " = " << n.op << "(";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      o << (i ? ", " : "") << "%" << n.inputs[i] << " " << nodes_[n.inputs[i]].name;
    o << ") : [";
    for (size_t i = 0; i < n.shape.size(); ++i) o << (i ? "," : "") << n.shape[i];
    o << "] " << dtype_name(n.dtype);
    if (!n.attrs.empty()) o << "  {" << n.attrs << "}";
    if (!n.phase.empty()) o << "  -> " << n.phase << " [" << n.units << "]";
    o << "\n";
  }
  return o.str();
}


std::string layer_name(const DenseStackSpec& spec, int layer) {
  const int nf = static_cast<int>(spec.features.size());
  if (layer < 0) return "-";
  if (layer >= nf) return "dense" + std::to_string(layer - nf + 1);
  const FK k = spec.features[layer].kind;
  return std::string(k == FK::kConv      ? "conv"
                     : k == FK::kMaxPool ? "maxpool"
                                         : "avgpool") +
         std::to_string(layer + 1);
}

namespace {

std::string num_str(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

// A node of layer `layer` (and of the backward pass when `backward`).
int add_in(Graph& g, int layer, bool backward, const std::string& op, const std::string& name,
           std::vector<int> inputs, std::vector<uint32_t> shape, DType dtype,
           const std::string& attrs = "") {
  const int id = g.add(op, name, std::move(inputs), std::move(shape), dtype, attrs);
  g.at(id).layer = layer;
  g.at(id).backward = backward;
  return id;
}

}  // namespace

Graph build_forward(const DenseStackSpec& spec, uint32_t batch) {
  if (spec.layers.empty()) throw std::invalid_argument("build: the model has no Dense layer");
  const std::vector<Shape3> shapes = feature_shapes(spec);  // throws naming the layer
  Graph g;
  g.spec = spec;
  const uint32_t B = batch;
  const int nf = static_cast<int>(spec.features.size());
  const Shape3& s0 = spec.input_shape;
  const bool map_input = nf > 0 || s0.size() == spec.inputs;
  int cur = add_in(g, -1, false, "input", "x", {},
                   map_input ? std::vector<uint32_t>{B, s0.h, s0.w, s0.c}
                             : std::vector<uint32_t>{B, spec.inputs},
                   DType::kF32,
                   spec.norm.on
                       ? "(pixels / 255 - mean) / sqrt(variance), by the host: mean " +
                             num_str(spec.norm.mean) + ", variance " + num_str(spec.norm.variance)
                       : std::string("pixels / 255"));
  if (spec.norm.on) {  // Normalization (the model's first layer): on the input
    g.at(cur).num["norm_mean"] = spec.norm.mean;
    g.at(cur).num["norm_variance"] = spec.norm.variance;
  }
  const int labels = add_in(g, -1, false, "input", "labels", {}, {B}, DType::kI32);
  for (int i = 0; i < nf; ++i) {
    const FeatureLayerSpec& f = spec.features[i];
    const std::string id = layer_name(spec, i);
    const Shape3 &in = shapes[i], &out = shapes[i + 1];
    const std::vector<uint32_t> oshape{B, out.h, out.w, out.c};
    if (f.kind == FK::kConv) {
      const int w = add_in(g, i, false, "param", id + ".W", {},
                           {f.kernel, f.kernel, in.c, f.filters}, DType::kF32, "glorot_uniform");
      const int bias =
          add_in(g, i, false, "param", id + ".b", {}, {f.filters}, DType::kF32, "zeros");
      const int z =
          add_in(g, i, false, "conv2d", id + ".z", {cur, w}, oshape, DType::kF32,
                 std::to_string(f.kernel) + "x" + std::to_string(f.kernel) +
                     (f.same ? " same" : " valid") + " stride " + std::to_string(f.stride));
      g.at(z).num = {{"kernel", f.kernel}, {"stride", f.stride}, {"same", f.same}, {"in_c", in.c}};
      cur = add_in(g, i, false, "bias_add", id + ".a", {z, bias}, oshape, DType::kF32);
      if (f.relu) cur = add_in(g, i, false, "relu", id + ".y", {cur}, oshape, DType::kF32);
    } else {
      const bool max = f.kind == FK::kMaxPool;
      cur = add_in(g, i, false, max ? "maxpool" : "avgpool", id + ".p", {cur}, oshape, DType::kF32,
                   std::to_string(f.pool) + "x" + std::to_string(f.pool) + " stride " +
                       std::to_string(f.pool));
      g.at(cur).num = {{"pool", f.pool}};
    }
  }
  if (map_input)
    cur =
        add_in(g, -1, false, "flatten", "flat", {cur}, {B, spec.inputs}, DType::kF32, "NHWC order");
  uint32_t K = spec.inputs;
  const int L = static_cast<int>(spec.layers.size());
  for (int l = 0; l < L; ++l) {
    const DenseLayerSpec& d = spec.layers[l];
    const int layer = nf + l;
    const std::string id = layer_name(spec, layer);
    const bool last = l + 1 == L;
    const int w = add_in(g, layer, false, "param", id + ".W", {}, {K, d.units}, DType::kF32,
                         "glorot_uniform");
    const int bias =
        add_in(g, layer, false, "param", id + ".b", {}, {d.units}, DType::kF32, "zeros");
    const int z = add_in(g, layer, false, "matmul", id + ".z", {cur, w}, {B, d.units}, DType::kF32);
    cur = add_in(g, layer, false, "bias_add", last ? "logits" : id + ".a", {z, bias}, {B, d.units},
                 DType::kF32);
    if (last) {
      add_in(g, layer, false, "softmax_cross_entropy", "loss", {cur, labels}, {}, DType::kF32,
             "mean over batch");
      add_in(g, layer, false, "accuracy", "acc", {cur, labels}, {}, DType::kF32, "argmax == label");
    } else {
      if (d.relu)
        cur = add_in(g, layer, false, "relu", id + ".y", {cur}, {B, d.units}, DType::kF32);
      if (d.dropout > 0) {
        cur = add_in(g, layer, false, "dropout", id + ".drop", {cur}, {B, d.units}, DType::kF32,
                     "rate " + num_str(d.dropout) + ", seed " + std::to_string(d.dropout_seed));
        g.at(cur).num = {{"rate", d.dropout}, {"seed", d.dropout_seed}};
      }
    }
    K = d.units;
  }
  return g;
}


void autodiff(Graph& g) {
  // Reverse mode over the forward nodes: grad[v] is the node holding dL/dv. A value needs a
  // gradient when a parameter is upstream of it (the images and labels need none).
  const int loss = g.find("loss");
  if (loss < 0) throw std::invalid_argument("autodiff: the graph has no loss");
  const int n_forward = static_cast<int>(g.nodes().size());
  std::vector<bool> needs(n_forward, false);
  for (int id = 0; id < n_forward; ++id) {
    needs[id] = g.at(id).op == "param";
    for (int i : g.at(id).inputs) needs[id] = needs[id] || needs[i];
  }
  std::map<int, int> grad;
  auto in = [&](int id, int k) { return g.at(id).inputs.at(k); };
  auto shape = [&](int id) { return g.at(id).shape; };
  auto name = [&](int id) { return g.at(id).name; };
  for (int id = n_forward - 1; id >= 0; --id) {
    const Node node = g.at(id);  // copy: add() may reallocate
    const std::string& op = node.op;
    const int L = node.layer;
    auto add = [&](const std::string& o, const std::string& n, std::vector<int> inputs,
                   std::vector<uint32_t> s, const std::string& attrs = "") {
      const int x = add_in(g, L, true, o, n, std::move(inputs), std::move(s), DType::kF32, attrs);
      g.at(x).num = node.num;
      return x;
    };
    if (op == "softmax_cross_entropy") {
      grad[in(id, 0)] = add("softmax_cross_entropy_grad", "dlogits", {in(id, 0), in(id, 1)},
                            shape(in(id, 0)), "(softmax - onehot) / B");
      continue;
    }
    if (!grad.count(id)) continue;  // not on the loss's path (accuracy, inputs)
    const int dy = grad[id];
    const int x = node.inputs.empty() ? -1 : in(id, 0);
    const bool dx = x >= 0 && needs[x];
    if (op == "bias_add") {
      grad[x] = dy;  // identity
      grad[in(id, 1)] = add("reduce_sum", "d" + name(in(id, 1)), {dy}, shape(in(id, 1)),
                            "over all but the last axis");
    } else if (op == "matmul") {
      const int w = in(id, 1);
      const int xt = add("transpose", name(x) + "T", {x}, {shape(x)[1], shape(x)[0]});
      grad[w] = add("matmul", "d" + name(w), {xt, dy}, shape(w));
      if (dx) {
        const int wt = add("transpose", name(w) + "T", {w}, {shape(w)[1], shape(w)[0]});
        g.at(wt).num["input_grad"] = 1;
        grad[x] = add("matmul", "d" + name(x), {dy, wt}, shape(x));
        g.at(grad[x]).num["input_grad"] = 1;
      }
    } else if (op == "flatten") {
      if (dx) grad[x] = add("reshape", "d" + name(x), {dy}, shape(x));
    } else if (op == "maxpool") {
      if (dx)
        grad[x] = add("maxpool_grad", "d" + name(x), {x, id, dy}, shape(x),
                      "to the first max of each window");
    } else if (op == "avgpool") {
      if (dx)
        grad[x] = add("avgpool_grad", "d" + name(x), {dy}, shape(x), "dy / (p p) to every tap");
    } else if (op == "relu") {
      if (dx) grad[x] = add("relu_grad", "d" + name(x), {x, dy}, shape(x), "x > 0");
    } else if (op == "dropout") {
      if (dx)
        grad[x] = add("dropout_grad", "d" + name(x), {id, dy}, shape(x),
                      "dy / (1 - rate) where the unit was kept");
    } else if (op == "conv2d") {
      const int w = in(id, 1);
      grad[w] = add("conv2d_filter_grad", "d" + name(w), {x, dy}, shape(w), "patches(x)^T dz");
      if (dx) {
        grad[x] = add("conv2d_input_grad", "d" + name(x), {dy, w}, shape(x),
                      "patches(dz dilated by the stride, padded k-1-pad) W_flipped");
        g.at(grad[x]).num["input_grad"] = 1;
      }
    } else if (op == "input" || op == "param") {
      // leaves
    } else {
      throw std::invalid_argument("autodiff: no gradient rule for op '" + op + "'");
    }
  }
  const bool adam = g.optimizer == OptimizerSpec::Kind::kAdam;
  for (int id = 0; id < n_forward; ++id) {
    if (g.at(id).op != "param") continue;
    if (!grad.count(id)) throw std::invalid_argument("autodiff: no gradient for " + name(id));
    const Node p = g.at(id);
    add_in(g, p.layer, true, adam ? "adam" : "sgd_momentum", p.name + "'", {id, grad[id]}, p.shape,
           DType::kF32,
           adam ? "Keras form: m, v, w; b1^t, b2^t" : "Keras form: v = mu v - lr g; w += v");
  }
}

namespace {
bool is_mxu(const std::string& op) {
  return op == "conv2d" || op == "matmul" || op == "conv2d_filter_grad" ||
         op == "conv2d_input_grad" || op == "matmul_ones";
}
}  // namespace

void insert_casts(Graph& g) {
  // Every MXU operand is bf16 (docs/numerics.md): one cast node per value cast; a transposed
  // operand is cast before its transpose (the transposes move bf16 elements).
  std::map<int, int> cast_of;
  auto cast = [&](int src) {
    if (!cast_of.count(src)) {
      const Node s = g.at(src);  // copy: add() may reallocate
      cast_of[src] = add_in(g, s.layer, s.backward, "cast_bf16", s.name + ".bf16", {src}, s.shape,
                            DType::kBf16, "RNE");
    }
    return cast_of[src];
  };
  const int n = static_cast<int>(g.nodes().size());
  for (int id = 0; id < n; ++id) {
    if (!is_mxu(g.at(id).op)) continue;
    for (size_t k = 0; k < g.at(id).inputs.size(); ++k) {
      const int src = g.at(id).inputs[k];
      const bool transposed = g.at(src).op == "transpose";
      const int base = transposed ? g.at(src).inputs[0] : src;
      if (g.at(base).dtype == DType::kBf16) continue;
      const int c = cast(base);
      if (transposed) {
        g.at(src).inputs[0] = c;
        g.at(src).dtype = DType::kBf16;
      } else {
        g.at(id).inputs[k] = c;
      }
    }
  }
}

namespace {

// The live forward consumers of a value (its backward readers are rewired by the fusions).
std::vector<int> forward_consumers(const Graph& g, int id) {
  std::vector<int> c;
  for (int x : g.consumers(id))
    if (!g.at(x).backward) c.push_back(x);
  return c;
}
int only_of(const Graph& g, const std::vector<int>& ids, const char* op) {
  return ids.size() == 1 && g.at(ids[0]).op == op ? ids[0] : -1;
}
const char* opt_suffix(const Graph& g) {
  return g.optimizer == OptimizerSpec::Kind::kAdam ? "adam" : "sgd_momentum";
}

// An MXU op with its bias epilogue: mm -> bias_add -> [relu] -> [dropout], or -> bias_add ->
// softmax cross-entropy (+ accuracy, + its gradient); a conv chain that feeds a 2x2 max-pool
// takes the pool too, with the argmax it keeps for the backward pass (on the DenseStackStep
// target where conv_pool_fused says the chip runs it so).
void fuse_epilogue(Graph& g, int mm) {
  const Node m = g.at(mm);
  const int a = only_of(g, forward_consumers(g, mm), "bias_add");
  if (a < 0) return;
  const int bias = g.at(a).inputs[1];
  const std::vector<int> ac = forward_consumers(g, a);
  int sce = -1, acc = -1;
  for (int c : ac) {
    if (g.at(c).op == "softmax_cross_entropy") sce = c;
    if (g.at(c).op == "accuracy") acc = c;
  }
  if (sce >= 0) {
    const int labels = g.at(sce).inputs[1];
    int dl = -1;
    for (int c : g.consumers(a))
      if (g.at(c).op == "softmax_cross_entropy_grad") dl = c;
    const int f =
        add_in(g, m.layer, false, "fused." + m.op + "_bias_softmax_xent", "loss, acc, dlogits",
               {m.inputs[0], m.inputs[1], bias, labels}, g.at(a).shape, DType::kF32,
               "epilogue: + b, softmax, cross-entropy, accuracy, dlogits "
               "(exp/log VPU sequences; dlogits to bf16)");
    if (dl >= 0) g.replace_uses(dl, f);
    g.replace_uses(a, f);
    for (int id : {mm, a, sce, acc, dl})
      if (id >= 0) g.at(id).dead = true;
    return;
  }
  std::vector<int> chain{mm, a};
  std::string kind = m.op + "_bias";
  std::string what = "epilogue: + b";
  std::map<std::string, double> num = m.num;
  int end = a;
  if (const int y = only_of(g, ac, "relu"); y >= 0) {
    chain.push_back(y);
    kind += "_relu";
    what += ", relu";
    end = y;
    if (const int d = only_of(g, forward_consumers(g, y), "dropout");
        d >= 0) {
      chain.push_back(d);
      kind += "_dropout";
      what += ", Dropout (the mask a hash of seed, step, sample, unit)";
      for (const auto& kv : g.at(d).num) num[kv.first] = kv.second;
      end = d;
    }
  }
  const Node e = g.at(end);
  if (m.op == "conv2d" && end != a &&
      conv_pool_fused(g.spec, static_cast<size_t>(m.layer), g.chip)) {
    const int p = only_of(g, forward_consumers(g, end), "maxpool");
    if (p >= 0 && g.at(p).num.at("pool") == 2) {
      const int f = add_in(g, m.layer, false, "fused.conv2d_bias_relu_maxpool", g.at(p).name,
                           {m.inputs[0], m.inputs[1], bias}, g.at(p).shape, DType::kF32,
                           "relu(max(z) + b) == max(relu(z + b)); also argmax: window position "
                           "0..3 of the max, 4 where relu is off");
      g.at(f).num = num;
      const int argmax = add_in(g, m.layer, false, "output", "argmax", {f}, g.at(p).shape,
                                DType::kBf16,
                                "kept for the backward pass: a code a pooled value (bf16)");
      g.replace_uses(p, f);
      // maxpool_grad -> relu_grad: route the pooled gradient to the argmax position
      for (int pg : g.consumers(f)) {
        if (g.at(pg).op != "maxpool_grad") continue;
        const int rg = only_of(g, g.consumers(pg), "relu_grad");
        if (rg < 0) continue;
        // (in the pool layer's backward phase, or in the conv's where its weight gradient
        // routes)
        const bool own_phase =
            !pool_routed_in_weight_gradient(g.spec, static_cast<size_t>(m.layer), g.chip);
        const int route =
            add_in(g, own_phase ? g.at(p).layer : m.layer, true, "fused.maxpool_relu_grad",
                   g.at(rg).name, {argmax, g.at(pg).inputs[2]}, g.at(rg).shape, DType::kF32,
                   "dz = dp at the argmax position, 0 elsewhere");
        g.replace_uses(rg, route);
        g.at(pg).dead = g.at(rg).dead = true;
      }
      for (int id : chain) g.at(id).dead = true;
      g.at(p).dead = true;
      return;
    }
  }
  const int f = add_in(g, m.layer, false, "fused." + kind, e.name, {m.inputs[0], m.inputs[1], bias},
                       e.shape, DType::kF32, what + "; the stored output feeds the backward pass");
  g.at(f).num = num;
  for (int id : chain) g.replace_uses(id, f);  // the backward pass reads the stored output
  for (int id : chain) g.at(id).dead = true;
}

// relu_grad(x, dy) with dy made by the consumer's input gradient (an MXU op, maybe through the
// Flatten's reshape, or a pooling gradient; a Dropout gradient folds in): one epilogue of that
// op, the relu gradient taken on the stored activation.
void fuse_relu_grad(Graph& g, int rg) {
  const Node r = g.at(rg);
  int src = r.inputs[1];
  std::vector<int> gone{rg};
  std::string extra;
  int dropout = -1;  // the folded dropout_grad
  if (g.at(src).op == "dropout_grad" && g.consumers(src).size() == 1) {
    dropout = src;
    gone.push_back(src);
    extra = ", scaled by 1 / (1 - rate) (the stored output is 0 where dropped)";
    src = g.at(src).inputs[1];
  }
  if (g.at(src).op == "reshape" && g.consumers(src).size() == 1) {
    gone.push_back(src);
    src = g.at(src).inputs[0];
  }
  const Node s = g.at(src);
  if (g.consumers(src).size() != 1) return;
  std::vector<int> inputs;
  std::string what;
  if (s.op == "matmul" || s.op == "conv2d_input_grad") {
    inputs = {s.inputs[0], s.inputs[1], r.inputs[0]};
    what = "epilogue: the producer's relu gradient, stored output > 0";
  } else if (s.op == "maxpool_grad") {
    inputs = {s.inputs[0], s.inputs[2]};
    what = "dp to the first tap equal to the window max, where the max > 0";
  } else if (s.op == "avgpool_grad") {
    inputs = {s.inputs[0], r.inputs[0]};
    what = "dp / (p p) to every tap whose stored output > 0";
  } else {
    return;
  }
  const bool grad_op = s.op.size() > 5 && s.op.compare(s.op.size() - 5, 5, "_grad") == 0;
  const int f = add_in(g, s.layer, true, "fused." + s.op + (grad_op ? "_relu" : "_relu_grad"),
                       r.name, inputs, r.shape, DType::kF32, what + extra);
  g.at(f).num = s.num;
  if (dropout >= 0) g.at(f).num["dropout_rate"] = g.at(g.at(dropout).inputs[0]).num.at("rate");
  g.replace_uses(rg, f);
  gone.push_back(src);
  for (int id : gone) g.at(id).dead = true;
}

// The optimizer update of a parameter as the epilogue of the MXU op that makes its gradient
// (the gradient is read from the ACC and never stored).
void fuse_optimizer(Graph& g, int upd) {
  const Node u = g.at(upd);
  const int gr = u.inputs[1];
  const Node s = g.at(gr);
  if (g.consumers(gr).size() != 1) return;
  if (s.op != "matmul" && s.op != "conv2d_filter_grad" && s.op != "matmul_ones") return;
  const int f =
      add_in(g, u.layer, true, "fused." + s.op + "_" + u.op, u.name,
             {s.inputs[0], s.inputs.size() > 1 ? s.inputs[1] : s.inputs[0], u.inputs[0]}, u.shape,
             DType::kF32, "epilogue: " + u.op + " on the gradient in the ACC (" + u.attrs + ")");
  if (s.op == "matmul_ones") g.at(f).inputs = {s.inputs[0], u.inputs[0]};
  g.at(f).num = s.num;
  g.replace_uses(upd, f);
  g.at(upd).dead = g.at(gr).dead = true;
}

}  // namespace

void fuse(Graph& g) {
  const int n0 = static_cast<int>(g.nodes().size());
  // 1. forward epilogues (in model order)
  for (int id = 0; id < n0; ++id) {
    const Node& n = g.at(id);
    if (!n.dead && !n.backward && (n.op == "matmul" || n.op == "conv2d"))
      fuse_epilogue(g, id);
  }
  // 2. bias gradients: a row of ones through the MXU, of the same bf16 operand as the weight
  //    gradient
  for (auto& n : g.nodes()) {
    if (n.dead || n.op != "reduce_sum") continue;
    n.op = "matmul_ones";
    n.attrs = "1^T dz: a ones row through the MXU";
    for (const auto& c : g.nodes())
      if (!c.dead && c.op == "cast_bf16" && c.inputs[0] == n.inputs[0]) {
        n.inputs[0] = c.id;
        break;
      }
  }
  // 3. relu gradients into the epilogue of the op that makes the incoming gradient
  for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id)
    if (!g.at(id).dead && g.at(id).op == "relu_grad") fuse_relu_grad(g, id);
  // 4. optimizer updates into their gradient's MXU epilogue
  for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) {
    const std::string& op = g.at(id).op;
    if (!g.at(id).dead && (op == "adam" || op == "sgd_momentum")) fuse_optimizer(g, id);
  }
  // 5. a one-channel stride-1 convolution's weight and bias gradients as one matmul
  //    [dW; db] = [patches(x) ones]^T dz (filters a multiple of N)
  const std::string wgrad = std::string("fused.conv2d_filter_grad_") + opt_suffix(g);
  const std::string bgrad = std::string("fused.matmul_ones_") + opt_suffix(g);
  for (int id = 0; id < static_cast<int>(g.nodes().size()); ++id) {
    const Node w = g.at(id);
    if (w.dead || w.op != wgrad) continue;
    if (w.num.at("in_c") != 1 || w.num.at("stride") != 1 ||
        static_cast<uint32_t>(w.shape.back()) % static_cast<uint32_t>(g.chip.n) != 0)
      continue;
    for (auto& bn : g.nodes()) {
      if (bn.dead || bn.op != bgrad || bn.layer != w.layer) continue;
      const Node b = bn;
      const int f = add_in(
          g, w.layer, true, std::string("fused.conv2d_filter_bias_grad_") + opt_suffix(g),
          w.name + ", " + b.name, {w.inputs[0], w.inputs[1], w.inputs[2], b.inputs[1]}, w.shape,
          DType::kF32, "[dW; db] = [patches(x) ones]^T dz, one matmul; epilogue: the update");
      g.at(f).num = w.num;
      g.replace_uses(id, f);
      g.replace_uses(b.id, f);
      g.at(id).dead = g.at(b.id).dead = true;
      break;
    }
  }
}

namespace {

std::string units_of(const std::string& op) {
  static const std::map<std::string, std::string> table = {
      {"input", "staged into HBM by the host"},
      {"param", "HBM state: fp32 master, optimizer state, bf16 copy"},
      {"output", "HBM (conv_fwd writes, conv_dw reads)"},
      {"flatten", "layout only (NHWC rows)"},
      {"reshape", "layout only"},
      {"transpose", "MXU transpose (tiles times the identity) or the DMA's element walk"},
      {"maxpool", "DMA window gather, VPU max"},
      {"avgpool", "DMA window gather, VPU sum / (p p)"},
      {"maxpool_grad", "VPU: to the first max of each window; DMA scatter"},
      {"avgpool_grad", "VPU: dp / (p p); DMA scatter"},
      {"matmul", "MXU (tiled; operands double-buffered through the UB)"},
      {"matmul_ones", "MXU"},
      {"conv2d_input_grad", "DMA gather from the dilated gradient map, MXU"},
      {"fused.conv2d_bias", "DMA patch gather, MXU, VPU epilogue"},
      {"fused.conv2d_bias_relu", "DMA patch gather, MXU, VPU epilogue"},
      {"fused.conv2d_bias_relu_maxpool", "DMA im2col walk, MXU, VPU"},
      {"fused.matmul_bias", "MXU, VPU epilogue"},
      {"fused.matmul_bias_relu", "MXU, VPU epilogue"},
      {"fused.matmul_bias_relu_dropout", "MXU, VPU epilogue (hash mask)"},
      {"fused.matmul_bias_softmax_xent", "MXU, VPU epilogue"},
      {"fused.matmul_relu_grad", "MXU, VPU epilogue"},
      {"fused.conv2d_input_grad_relu", "DMA gather from the dilated gradient map, MXU, VPU"},
      {"fused.maxpool_grad_relu", "VPU, DMA scatter"},
      {"fused.avgpool_grad_relu", "VPU, DMA scatter"},
      {"fused.maxpool_relu_grad", "VPU"},
      {"fused.matmul_adam", "MXU, VPU update from the ACC"},
      {"fused.matmul_sgd_momentum", "MXU, VPU update from the ACC"},
      {"fused.matmul_ones_adam", "MXU, VPU update from the ACC"},
      {"fused.matmul_ones_sgd_momentum", "MXU, VPU update from the ACC"},
      {"fused.conv2d_filter_grad_adam", "DMA patch gather, MXU, VPU update from the ACC"},
      {"fused.conv2d_filter_grad_sgd_momentum", "DMA patch gather, MXU, VPU update from the ACC"},
      {"fused.conv2d_filter_bias_grad_adam", "DMA transposed patch gather, MXU, VPU update"},
      {"fused.conv2d_filter_bias_grad_sgd_momentum",
       "DMA transposed patch gather, MXU, VPU update"},
      {"cast_bf16", "VPU.ST bf16 where the value is produced"},
  };
  const auto it = table.find(op);
  return it == table.end() ? std::string() : it->second;
}

// The phase of a node of the DenseStackStep target: its layer's forward or backward phase.
std::string dense_phase(const Graph& g, const Node& n) {
  const int nf = static_cast<int>(g.spec.features.size());
  if (n.layer < 0) return "-";
  if (n.layer < nf) return (n.backward ? "bwd_" : "fwd_") + layer_name(g.spec, n.layer);
  return (n.backward ? "bwd" : "fwd") + std::to_string(n.layer - nf + 1);
}


}  // namespace

void lower(Graph& g) {
  auto phase_of = [&](const Node& n) { return dense_phase(g, n); };
  for (auto& n : g.nodes()) {
    if (n.dead || n.op == "cast_bf16") continue;
    const std::string units = units_of(n.op);
    if (units.empty())
      throw std::invalid_argument("lower: no chip lowering for op '" + n.op + "' (" + n.name +
                                  ", layer " + layer_name(g.spec, n.layer) +
                                  ") (docs/compiler.md, \"Supported ops\")");
    n.units = units;
    if (n.op == "input") {
      n.phase = "host";
    } else if (n.op == "param" || n.op == "output") {
      n.phase = "HBM";
    } else if (n.op == "flatten" || n.op == "reshape") {
      n.phase = "-";
    } else {
      n.phase = phase_of(n);
    }
  }
  // a transpose runs where its consumer does; a cast where its value is produced (a parameter's
  // bf16 copy: by its optimizer update; the images: by the host)
  for (auto& n : g.nodes()) {
    if (n.dead || n.op != "transpose") continue;
    for (int c : g.consumers(n.id)) n.phase = g.at(c).phase;
  }
  for (auto& n : g.nodes()) {
    if (n.dead || n.op != "cast_bf16") continue;
    int from = n.inputs[0];  // the producer, through layout-only ops
    while (g.at(from).op == "flatten" || g.at(from).op == "reshape") from = g.at(from).inputs[0];
    const Node& src = g.at(from);
    if (src.op == "input") {
      n.phase = "host";
      n.units = "p / 255 rounded when a batch is staged";
    } else if (src.op == "param") {
      for (const auto& u : g.nodes())
        if (!u.dead && u.backward && u.name.find(src.name + "'") != std::string::npos)
          n.phase = u.phase;
      n.units = "the optimizer's epilogue writes the bf16 copy (VPU.ST bf16)";
    } else {
      n.phase = src.phase;
      n.units = units_of("cast_bf16");
    }
  }
}


std::vector<std::string> graph_phases(const Graph& g) {
  std::set<std::string> used;
  for (const auto& n : g.nodes())
    if (!n.dead) used.insert(n.phase);
  std::vector<std::string> order{"setup"};
  const int nf = static_cast<int>(g.spec.features.size());
  const int L = static_cast<int>(g.spec.layers.size());
  auto take = [&](const std::string& p) {
    if (used.count(p)) order.push_back(p);
  };
  for (int i = 0; i < nf; ++i) take("fwd_" + layer_name(g.spec, i));
  for (int l = 1; l <= L; ++l) take("fwd" + std::to_string(l));
  for (int l = L; l >= 1; --l) take("bwd" + std::to_string(l));
  for (int i = nf - 1; i >= 0; --i) take("bwd_" + layer_name(g.spec, i));
  return order;
}

namespace {
Graph run_passes(Graph g, PassDumps* dumps) {
  if (dumps) dumps->push_back({"build", g.dump()});
  autodiff(g);
  if (dumps) dumps->push_back({"autodiff", g.dump()});
  insert_casts(g);
  if (dumps) dumps->push_back({"numerics (bf16 casts)", g.dump()});
  fuse(g);
  if (dumps) dumps->push_back({"fuse", g.dump()});
  lower(g);
  if (dumps) dumps->push_back({"lower", g.dump()});
  return g;
}
}  // namespace


Graph compile_graph(const DenseStackSpec& spec, OptimizerSpec::Kind optimizer,
                    const ChipShape& chip, uint32_t batch, PassDumps* dumps) {
  Graph g = build_forward(spec, batch);
  g.optimizer = optimizer;
  g.chip = chip;
  return run_passes(std::move(g), dumps);
}

}  // namespace tessera::compiler
